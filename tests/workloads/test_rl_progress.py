"""Counting env runners that a preemption moved to another node (Ray may restart one between
two of RLlib's health probes, so RLlib's restart count can miss it)."""

from __future__ import annotations

from workloads.rl.experiment import runners_replaced


def test_a_runner_that_left_a_lost_node_counts_once() -> None:
    placements = [["a", "b"], ["b", "c"], ["c", "d"]]
    assert runners_replaced(placements, lost_nodes={"a", "b"}) == 2
    assert runners_replaced(placements, lost_nodes={"a"}) == 1


def test_moves_off_live_nodes_and_unchanged_placements_do_not_count() -> None:
    assert runners_replaced([["a", "b"], ["a", "c"]], lost_nodes=set()) == 0
    assert runners_replaced([["a", "a"], ["a", "b"]], lost_nodes={"a"}) == 1  # one of two
    assert runners_replaced([["a", "b"]], lost_nodes={"a"}) == 0
    assert runners_replaced([], lost_nodes={"a"}) == 0
