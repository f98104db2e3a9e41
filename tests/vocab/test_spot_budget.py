"""The one timing budget of a spot interruption: its arithmetic, its rules, the lab's
compressed copy, and the table docs/aws.md shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from vocab.spot import SPOT_WARNING_S
from vocab.spot_budget import AWS_BUDGET, BudgetError, SpotBudget, lab_budget

DOC = Path(__file__).resolve().parents[2] / "docs" / "aws.md"


def test_the_aws_budget_fits_the_two_minute_warning() -> None:
    budget = AWS_BUDGET
    assert budget.warning_s == SPOT_WARNING_S == 120
    assert budget.drain_timeout_s == 100 and budget.grace_period_s == 110
    # a pod evicted within the allowance is gone before the instance
    assert budget.eviction_allowance_s + budget.grace_period_s == budget.warning_s
    # the agent sees the notice before the eviction may come
    assert budget.poll_s < budget.eviction_allowance_s
    # the deadline Ray gets is the notice's time less the reserves
    assert budget.drain_deadline(1_000_120.0) == 1_000_100.0
    assert budget.deadline_margin_s == 20


def test_a_pod_evicted_at_any_moment_of_the_allowance_outlives_the_agents_deadline() -> None:
    """`ray start` drains for drain_timeout_s from its SIGTERM: whenever the eviction comes
    (not before the notice), the node's processes live at least until the agent's deadline,
    and the pod ends before the instance."""
    notice, budget = 0.0, AWS_BUDGET
    deadline = budget.drain_deadline(notice + budget.warning_s)
    for eviction in (0.0, 0.5, budget.poll_s, budget.eviction_allowance_s):
        assert eviction + budget.drain_timeout_s >= deadline
        assert eviction + budget.grace_period_s <= notice + budget.warning_s


def test_the_lab_runs_the_same_budget_on_its_clock() -> None:
    lab = lab_budget(6.0)
    assert lab.warning_s == 6.0
    assert lab.poll_s == pytest.approx(0.1)
    assert lab.drain_timeout_s == pytest.approx(5.0)
    assert lab.grace_period_s == pytest.approx(5.5)
    assert lab_budget(SPOT_WARNING_S) == AWS_BUDGET


@pytest.mark.parametrize(("changes", "complaint"), [
    ({"poll_s": 0.0}, "poll_s must be a number > 0"),
    ({"warning_s": float("nan")}, "warning_s must be a number > 0"),
    ({"poll_s": 11.0}, "must not exceed eviction_allowance_s"),
    ({"warning_s": 21.0}, "drain window (1 s) must be longer than the poll"),
])
def test_a_budget_that_does_not_fit_is_refused(changes: dict[str, float], complaint: str
                                               ) -> None:
    with pytest.raises(BudgetError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        SpotBudget(**changes)
    with pytest.raises(BudgetError, match="compression factor"):
        AWS_BUDGET.compressed(0.0)


def test_docs_aws_shows_the_budget_as_the_code_has_it() -> None:
    text = DOC.read_text()
    section = text[text.index("## Spot interruptions"):]
    for what, seconds, why in AWS_BUDGET.table():
        assert f"| {what} | {seconds:g} s | {why} |" in section, what
