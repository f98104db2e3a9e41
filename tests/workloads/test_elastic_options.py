"""run-elastic's input: the seed's flags, the script's argv and train_loop_config after `--`,
the preset, the preemption schedule, the training function found by name (an alias too),
and bad input as one line naming the flag before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.elastic.__main__ import main
from workloads.elastic.options import (
    ELASTIC_SPEC,
    PAPER,
    config_from_args,
    split_command_line,
)
from workloads.elastic.schedule import Point


def test_short_flags_script_args_and_config(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def train_loop_per_worker(config):\n    pass\n")
    options = ELASTIC_SPEC.parse(split_command_line(
        ["-f", str(script), "-m", "3", "--min-workers", "2", "--config", '{"lr": 0.1, "n": 2}',
         "--", "--steps", "5", "--lr", "0.3", "-f", "x y", "--amp"]))
    assert options.script == script and options.max_workers == 3 and options.min_workers == 2
    assert options.argv == ["--steps", "5", "--lr", "0.3", "-f", "x y", "--amp"]
    # --config is the base; `--key value` words after `--` are set on top of it
    assert options.train_loop_config == {"lr": 0.3, "n": 2, "steps": 5, "amp": True}
    assert ELASTIC_SPEC.parse(ELASTIC_SPEC.argv(options)) == options


def test_config_words_read_as_json_where_they_parse() -> None:
    assert config_from_args(["--batch-size", "32", "--name", "run one", "--ids", "[1, 2]",
                             "--x=null", "positional", "--flag"]) == {
        "batch_size": 32, "name": "run one", "ids": [1, 2], "x": None, "flag": True}


def test_paper_preset_sets_the_seed_scale_and_given_flags_win() -> None:
    paper = ELASTIC_SPEC.parse(["--preset", "paper"])
    assert (paper.checkpoint_timeout, paper.notice_poll, paper.preempt_at) == (
        PAPER["checkpoint_timeout"], PAPER["notice_poll"], "")
    mixed = ELASTIC_SPEC.parse(["--preset", "paper", "--preempt-at", "30s,start"])
    assert mixed.schedule == (Point("seconds", 30.0), Point("start"))
    assert mixed.checkpoint_timeout == 120.0 and "preset" in mixed.parameters()
    demo = ELASTIC_SPEC.parse([])
    assert demo.preset is None and len(demo.schedule) == 3


def test_checkpoint_to_shared_puts_them_in_the_shared_folder_and_keeps_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workloads.elastic.experiment import NoSharedFolder, checkpoint_storage

    assert ELASTIC_SPEC.parse([]).checkpoint_to == "bucket"
    options = ELASTIC_SPEC.parse(["--checkpoint-to", "shared"])
    monkeypatch.setenv("SPOTBURST_SHARED", str(tmp_path))
    with checkpoint_storage(options) as (storage, filesystem):
        assert Path(storage).parent == tmp_path / "checkpoints" and filesystem is None
        (Path(storage) / "checkpoint_000001").mkdir()
    assert (Path(storage) / "checkpoint_000001").is_dir()  # outlives the run
    monkeypatch.delenv("SPOTBURST_SHARED")
    with pytest.raises(NoSharedFolder, match=r"^--checkpoint-to shared: this Ray cluster has "
                                             r"no shared folder \(SPOTBURST_SHARED"):
        with checkpoint_storage(options):
            pass


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ")
    return err


@pytest.mark.parametrize(("argv", "flag"), [
    (["-m", "2", "--min-workers", "3"], "--min-workers"),
    (["--config", "[1, 2]"], "--config"),
    (["--config", "{nope"], "--config"),
    (["--preempt-at", "10,soon"], "--preempt-at"),
    (["--preempt-at", "0"], "--preempt-at"),
    (["--preempt-at", "30,start,20"], "--preempt-at"),
    (["--function", "not a name"], "--function"),
    (["--preset", "huge"], "--preset"),
])
def test_bad_flags_name_the_flag(capsys: pytest.CaptureFixture[str], argv: list[str],
                                 flag: str) -> None:
    assert one_line_error(capsys, argv).startswith(f"error: {flag}")


def test_missing_script_names_the_flag(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    err = one_line_error(capsys, ["-f", str(tmp_path / "nope.py"), "-m", "2"])
    assert err.startswith("error: --script:") and "nope.py" in err


def test_the_training_function_is_found_by_name_an_alias_too(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def main():\n    pass\n")
    err = one_line_error(capsys, ["-f", str(script)])
    assert err.startswith("error: --function:") and "train_loop_per_worker" in err
    assert "train.py" in err
    err = one_line_error(capsys, ["-f", str(script), "--function", "nope"])
    assert err.startswith("error: --function:") and "defines no nope" in err
    script.write_text("def train_func(config):\n    pass\n\ntrain_loop_per_worker = train_func\n")
    from workloads.elastic.script import check_script

    check_script(script, "train_loop_per_worker")  # an alias is a binding like any other
    check_script(script, "train_func")
    script.write_text("def broken(:\n")
    err = one_line_error(capsys, ["-f", str(script)])
    assert err.startswith("error: --script:") and "train.py" in err


def test_torchft_is_asked_for_exactly_when_the_script_imports_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text("import ray.train\n\ndef train_func(config):\n    ray.train.report({})\n")
    err = one_line_error(capsys, ["-f", str(plain), "--function", "train_func", "--torchft"])
    assert err.startswith("error: --torchft:") and "plain.py does not import torchft" in err
    written = tmp_path / "ft.py"
    written.write_text("def train_func(config):\n    from torchft import Manager\n")
    err = one_line_error(capsys, ["-f", str(written), "--function", "train_func"])
    assert err.startswith("error: --torchft:") and "ft.py imports torchft" in err
    from workloads.elastic.script import check_script

    check_script(written, "train_func", torchft=True)
    check_script(plain, "train_func", torchft=False)


def test_working_dir_must_be_a_folder(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    err = one_line_error(capsys, ["-d", str(tmp_path / "gone"), "-f", "train.py"])
    assert err.startswith("error: --working-dir:")


def test_the_documented_opt_in_diff_is_the_examples_diff() -> None:
    """docs/elastic.md shows the whole change from the unchanged example to the opted-in one
    (the code after their docstrings), at most 10 added lines."""
    import ast
    import difflib

    repo = Path(__file__).resolve().parents[2]

    def code(name: str) -> list[str]:
        text = (repo / "examples" / "elastic" / name).read_text()
        return text.splitlines()[ast.parse(text).body[0].end_lineno or 0:]

    diff = list(difflib.unified_diff(code("ray_train_mlp.py"), code("ray_train_mlp_spot.py"),
                                     "ray_train_mlp.py", "ray_train_mlp_spot.py", n=1,
                                     lineterm=""))
    doc = (repo / "docs" / "elastic.md").read_text()
    shown = doc.split("```diff\n", 1)[1].split("```", 1)[0].splitlines()
    assert shown == diff
    assert sum(1 for line in diff if line.startswith("+") and not line.startswith("+++")) <= 10
