"""run-elastic's input: the seed's flags, the script's argv after `--`, and bad input as one
line naming the flag before anything starts; the step accounting on a known ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.elastic.__main__ import main
from workloads.elastic.options import ELASTIC_SPEC, split_command_line
from workloads.elastic.summary import summarize


def test_short_flags_and_script_args(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def train_loop_per_worker(config):\n    pass\n")
    options = ELASTIC_SPEC.parse(split_command_line(
        ["-f", str(script), "-m", "3", "--min-workers", "2", "--", "--steps", "5", "-f", "x y"]))
    assert options.script == script and options.max_workers == 3 and options.min_workers == 2
    assert options.argv == ["--steps", "5", "-f", "x y"]
    assert ELASTIC_SPEC.parse(ELASTIC_SPEC.argv(options)) == options


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ")
    return err


def test_missing_script_names_the_flag(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    err = one_line_error(capsys, ["-f", str(tmp_path / "nope.py"), "-m", "2"])
    assert err.startswith("error: --script:") and "nope.py" in err


def test_min_above_max_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, ["-m", "2", "--min-workers", "3"])
    assert err.startswith("error: --min-workers:") and "at most --max-workers (2)" in err


def test_script_without_entry_point_names_the_flag(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def main():\n    pass\n")
    err = one_line_error(capsys, ["-f", str(script)])
    assert err.startswith("error: --script:") and "train_loop_per_worker" in err


def test_working_dir_must_be_a_folder(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    err = one_line_error(capsys, ["-d", str(tmp_path / "gone"), "-f", "train.py"])
    assert err.startswith("error: --working-dir:")


def test_accounting_counts_steps_computed_twice() -> None:
    """A restart that resumes from an older checkpoint than its last step loses the steps
    between; the notice-driven one loses none."""
    steps = [{"attempt": 0, "step": s, "t": 1.0 + s, "world_size": 3} for s in range(10)]
    steps += [{"attempt": 1, "step": s, "t": 10.0 + s, "world_size": 2} for s in range(10, 15)]
    steps += [{"attempt": 2, "step": s, "t": 28.0 + s, "world_size": 2} for s in range(12, 16)]
    steps += [{"attempt": 3, "step": s, "t": 40.0 + s, "world_size": 3} for s in range(16, 20)]
    record = {
        "total_steps": 20,
        "attempts": [
            {"attempt": 0, "t": 0.0, "world_size": 3, "resumed_from_step": None},
            {"attempt": 1, "t": 18.0, "world_size": 2, "resumed_from_step": 9},
            {"attempt": 2, "t": 38.0, "world_size": 2, "resumed_from_step": 11},
            {"attempt": 3, "t": 50.0, "world_size": 3, "resumed_from_step": 15},
        ],
        "steps": steps,
        "notices": [{"attempt": 0, "agreed": True, "t": 10.5},
                    {"attempt": 0, "rank": 2, "t": 10.2, "deadline": 14.0}],
        "checkpoints": [{"attempt": 0, "step": 9, "reason": "notice", "t": 11.0},
                        {"attempt": 1, "step": 11, "reason": "periodic", "t": 22.0},
                        {"attempt": 2, "step": 15, "reason": "resize", "t": 44.0}],
        "final": {"t": 60.0, "test_accuracy": 0.97},
    }
    summary = summarize(record, started=0.0, ended=60.0)
    assert summary["completed"] and summary["steps_done"] == 20
    assert summary["lost_steps"] == 3 and summary["step_executions"] == 23
    first, second, third = summary["restarts"]
    assert first["cause"] == "preemption" and first["lost_steps"] == 0
    assert first["time_to_resume_s"] == pytest.approx(20.0 - 10.2)
    assert (first["workers_before"], first["workers_after"]) == (3, 2)
    assert second["cause"] == "resize or failure" and second["lost_steps"] == 3
    assert third["cause"] == "grow" and third["lost_steps"] == 0
    assert (third["workers_before"], third["workers_after"]) == (2, 3)
    assert summary["preemptions"] == 1 and summary["notices_honoured"] == 1
    assert summary["final_metrics"] == {"test_accuracy": 0.97}
    assert summary["throughput_steps_per_s"] == {"3": pytest.approx(1.0)}  # 2 too short
    assert summary["rescales"] == [
        {"t": 18.0, "cause": "preemption", "workers_before": 3, "workers_after": 2},
        {"t": 50.0, "cause": "grow", "workers_before": 2, "workers_after": 3}]


def test_no_checkpoint_landed_means_a_restart_from_zero_and_counts_every_step_lost() -> None:
    """The fallback when the notice checkpoint did not land (nor any before): Ray Train
    restarts with no checkpoint, the script from step 0, and the accounting says so."""
    steps = [{"attempt": 0, "step": s, "t": 1.0 + s, "world_size": 2} for s in range(6)]
    steps += [{"attempt": 1, "step": s, "t": 20.0 + s, "world_size": 1} for s in range(10)]
    record = {
        "total_steps": 10,
        "attempts": [{"attempt": 0, "t": 0.0, "world_size": 2, "resumed_from_step": None},
                     {"attempt": 1, "t": 19.0, "world_size": 1, "resumed_from_step": None}],
        "steps": steps,
        "notices": [{"attempt": 0, "agreed": True, "t": 6.5},
                    {"attempt": 0, "rank": 1, "t": 6.2, "deadline": 7.0}],
        "checkpoints": [{"attempt": 1, "step": 9, "reason": "final", "t": 30.0}],
        "final": {"t": 30.0},
    }
    summary = summarize(record, started=0.0, ended=31.0)
    [restart] = summary["restarts"]
    assert restart["cause"] == "preemption" and restart["resumed_from_step"] is None
    assert restart["lost_steps"] == 6 == summary["lost_steps"]
    assert summary["completed"] and summary["notices_honoured"] == 0
