from pathlib import Path

import pytest

from workloads.common.options import OptionError
from workloads.doll.__main__ import main
from workloads.doll.options import DOLL_SPEC, DollOptions


def test_defaults_are_the_issue_defaults() -> None:
    options = DOLL_SPEC.parse([])
    assert options == DollOptions()
    assert options.policies == ("on-demand", "static", "adaptive")
    assert (options.workers, options.deadline_factor, options.alpha) == (16, 1.05, 0.9)
    assert (options.zone, options.product, options.on_demand_price) == (
        "ca-central-1b",
        "SUSE Linux",
        0.286,
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--policy", "static,greedy"],
            "--policy: 'greedy' is neither a built-in policy (on-demand, static, adaptive, "
            "static-paper, adaptive-paper, fallback, uniform-progress) nor FILE.py:Class",
        ),
        (
            ["--policy", ""],
            "--policy: expected a comma-separated list of texts, got ''",
        ),
        (
            ["--policy", "static,static"],
            "--policy: expected a comma-separated list of texts, got 'static,static'",
        ),
        (["--alpha", "0"], "--alpha: expected a number in (0, 1], got '0'"),
        (["--deadline", "0.9"], "--deadline: expected a number ≥ 1, got '0.9'"),
        (["--workers", "0"], "--workers: expected an integer in [1, 256], got '0'"),
        (["--workers", "abc"], "--workers: expected an integer in [1, 256], got 'abc'"),
        (["--workers", "99999999"], "--workers: expected an integer in [1, 256], got '99999999'"),
        (["--hidden", "1000000000"],
         "--hidden: expected an integer in [1, 4096], got '1000000000'"),
        (["--batches", "1000000000000"],
         "--batches: expected an integer in [1, 1000000], got '1000000000000'"),
        (["--rate", "nan"], "--rate: expected a number in (0, 1000000], got 'nan'"),
        (
            ["--rates", "bursty"],
            "--rates: expected one of homogeneous, heterogeneous, got 'bursty'",
        ),
        (["--k", "20"], "--k: expected at most --workers (16), got 20"),
        (["--workers", "--k"], "--workers: expected one argument"),
        (["--nodes", "3"], "--nodes: is not an option of python -m workloads.doll"),
    ],
)
def test_bad_flags_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(OptionError) as error:
        DOLL_SPEC.parse(argv)
    assert str(error.value) == message


def test_options_made_in_code_are_checked_the_same_way() -> None:
    with pytest.raises(OptionError, match=r"^--workers: expected an integer in \[1, 256\], got 0$"):
        DollOptions(workers=0)
    with pytest.raises(OptionError,
                       match=r"--workers: expected an integer in \[1, 256\], got '16'"):
        DollOptions(workers="16")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        DollOptions(("static",))  # type: ignore[call-arg, arg-type, misc]  # keyword only


def test_the_command_line_gives_back_the_options() -> None:
    options = DollOptions(
        policies=("static", "adaptive"),
        workers=8,
        alpha=0.5,
        trace=Path("/tmp/other.json"),
        results_to_log=True,
    )
    flags = ["--policy", "static,adaptive", "--workers", "8", "--alpha", "0.5"]
    argv = DOLL_SPEC.argv(options)
    assert argv == ["--results-to-log", *flags, "--trace", "/tmp/other.json"]
    assert DOLL_SPEC.parse(argv) == options
    assert DOLL_SPEC.argv(options, paths=False) == ["--results-to-log", *flags]
    assert DOLL_SPEC.paths_of(options) == {"--trace": Path("/tmp/other.json")}


def test_heterogeneous_rates_keep_the_mean_rate() -> None:
    rates = DollOptions(rates="heterogeneous", workers=8, rate=10.0).worker_rates()
    assert len(set(rates)) == 8
    assert sum(rates) / 8 == pytest.approx(10.0)


def test_help_lists_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as leaving:
        main(["--help"])
    assert leaving.value.code == 0
    shown = capsys.readouterr().out
    for option in DOLL_SPEC.options:
        assert option.flag in shown
    assert "(default: 16)" in " ".join(shown.split())


def test_a_bad_flag_is_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    assert main(["--workers", "abc", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: --workers: expected an integer in [1, 256], got 'abc'\n"
    assert captured.out == ""
    assert not out.exists()


def test_unknown_product_fails_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    assert main(["--product", "Plan 9", "--out", str(out)]) == 2
    assert "product 'Plan 9'" in capsys.readouterr().err
    assert not out.exists()


def test_provenance_records_the_stand_in_delay_only_when_fallback_runs() -> None:
    assert "launch_delay_s" not in DollOptions(policies=("on-demand", "static")).parameters()
    recorded = DollOptions(policies=("static", "fallback"), launch_delay_s=30.0).parameters()
    assert recorded["launch_delay_s"] == 30.0
