"""The lab's CPU split: each site on CPUs of its own, halves of what the lab may use."""

from __future__ import annotations

from netem.lab.cpus import split_cpus


def test_two_cpus_give_one_to_each_site_and_both_to_s3() -> None:
    split = split_cpus({0, 1})
    assert split.sites == {"onprem": (0,), "cloud": (1,)} and not split.shared
    assert split.taskset("cloud") == ["taskset", "-c", "1"]
    assert split.to_dict()["s3"] == [0, 1]


def test_on_prem_takes_the_larger_half_it_holds_the_head_and_the_hpc_worker() -> None:
    assert split_cpus({4, 5, 7}).sites == {"onprem": (4, 5), "cloud": (7,)}
    assert split_cpus(set(range(8))).sites == {"onprem": (0, 1, 2, 3), "cloud": (4, 5, 6, 7)}


def test_one_cpu_is_shared_and_says_so() -> None:
    split = split_cpus({3})
    assert split.sites == {"onprem": (3,), "cloud": (3,)} and split.shared
    assert split.to_dict()["shared"] is True
