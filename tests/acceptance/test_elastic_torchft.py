"""docs/elastic.md's survivor-mode command exactly as shown (only `--out` added): the shipped
torchft script on a fresh spot lab through two preemptions. At each, only the noticed replica
group leaves (after its step was committed); the other groups commit steps throughout; a new
group joins the slot on the lab's replacement node and steps with the others from a peer's
state (no checkpoint was loaded); the run reaches its accuracy; the figure marks the leaves
and joins; Ray's and torchft's own lines are in ray-traces.log, not on the terminal."""

from __future__ import annotations

import json

import pytest

from tests.helpers.acceptance import run_documented_on_a_new_lab

pytestmark = [pytest.mark.ray, pytest.mark.subprocess, pytest.mark.slow]

COMMAND = ("invoke run-elastic -f examples/elastic/torchft_digits.py --function train_func "
           "--torchft --preempt-at 4s,4s -- --steps 600 --step-time 0.1")
TIMEOUT_S = 1200.0
"""A loaded 2-core machine."""


def test_survivors_keep_committing_through_two_preemptions(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    summary, out = run_documented_on_a_new_lab(COMMAND, tmp_path_factory, "elastic-torchft",
                                               TIMEOUT_S)
    assert summary["mode"] == "torchft" and summary["completed"]
    assert summary["steps_done"] == 600 and summary["final_metrics"]["accuracy"] > 0.9
    replaced = summary["replacements"]
    assert len(replaced) >= 2 and summary["preemptions"] >= 2, replaced
    assert all(r["survivor_steps"] > 0 for r in replaced), replaced
    rejoined = [r for r in replaced if r["rejoin_t"] is not None]
    assert rejoined, replaced
    for row in rejoined:
        assert row["notice_t"] <= row["leave_t"] <= row["node_joined_t"] <= row["join_t"] \
            < row["rejoin_t"]
    assert summary["lost_steps"] <= len(replaced)  # a step that did not commit, at most
    assert summary["resumed_from_checkpoint"] == 0  # the new groups healed from a peer
    resizes = [json.loads(line) for line in
               (out / "records" / "resizes.jsonl").read_text().splitlines()]
    left = [r for r in resizes if r["event"] == "leave"]
    assert {r["replica_group"] for r in left} == {r["replica_group"] for r in replaced}
    # the line that asked for each preemption named the group that then left
    asked = [point["group"] for point in summary["preemption_schedule"]]
    assert len(asked) == 2 and set(asked) <= {r["replica_group"] for r in replaced}, asked
    # a new group's first loss is of the weights it healed to, not of its own initial ones
    steps = [json.loads(line) for line in
             (out / "records" / "steps.jsonl").read_text().splitlines()]
    first_loss = steps[0]["loss"]
    for row in rejoined:
        own = next(s for s in steps if s["replica_group"] == row["replacement_group"])
        assert own["loss"] < first_loss / 2, (own, first_loss)
    assert (out / "elastic.png").stat().st_size > 10_000
    kept = (out / "ray-traces.log").read_text()
    assert "Uploading package" in kept
