"""Each site of the lab on CPUs of its own, as two real sites never share a processor: one
site's transfers, Ray daemons and scheduler cannot take CPU time from the other site's
compute.

The CPUs this process may use are split in two: the on-prem site (login node with the Ray
head and the driver, and the HPC worker) takes the first half, rounded up, the cloud site the
rest; on 2 CPUs, one each. Every process a site starts runs under `taskset -c <its CPUs>`, and
what it starts inherits that (Ray's daemons and workers alike). The S3 service belongs to
neither site and may use every CPU. With a single CPU there is nothing to split: both sites
share it, and the split says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from vocab.burst import SITE_CLOUD, SITE_ONPREM

METHOD = "taskset (CPU affinity) on every process a site starts, inherited by its children"


@dataclass(frozen=True)
class CpuSplit:
    sites: dict[str, tuple[int, ...]]
    services: tuple[int, ...]  # the S3 service: every CPU
    shared: bool  # too few CPUs: the sites share them

    def taskset(self, site: str) -> list[str]:
        """The argv prefix that runs a command on `site`'s CPUs."""
        return ["taskset", "-c", cpu_list(self.sites[site])]

    def to_dict(self) -> dict[str, object]:
        return {
            "method": METHOD,
            "sites": {site: list(cpus) for site, cpus in self.sites.items()},
            "s3": list(self.services),
            "shared": self.shared,
        }


def split_cpus(available: set[int] | None = None) -> CpuSplit:
    """The split of `available` (this process's CPUs when not given)."""
    cpus = tuple(sorted(os.sched_getaffinity(0) if available is None else available))
    if not cpus:
        raise ValueError("no CPU to split")
    if len(cpus) == 1:
        return CpuSplit({SITE_ONPREM: cpus, SITE_CLOUD: cpus}, cpus, shared=True)
    half = (len(cpus) + 1) // 2
    return CpuSplit({SITE_ONPREM: cpus[:half], SITE_CLOUD: cpus[half:]}, cpus, shared=False)


def cpu_list(cpus: tuple[int, ...] | list[int]) -> str:
    """taskset's list form: 0,2,3."""
    return ",".join(str(cpu) for cpu in cpus)
