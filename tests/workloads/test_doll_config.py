from pathlib import Path

import pytest

from workloads.doll.__main__ import main
from workloads.doll.config import DollConfig, from_args


def test_defaults_are_the_issue_defaults() -> None:
    config = from_args([])
    assert config.policies == ("on-demand", "static", "adaptive")
    assert (config.workers, config.deadline_factor, config.alpha) == (16, 1.05, 0.9)
    assert (config.zone, config.product, config.on_demand_price) == (
        "ca-central-1b",
        "SUSE Linux",
        0.286,
    )


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--policy", "static,greedy"], "--policy 'greedy'"),
        (["--policy", ""], "--policy names no policy"),
        (["--alpha", "0"], "--alpha"),
        (["--deadline", "0.9"], "--deadline"),
        (["--workers", "0"], "--workers"),
        (["--k", "20"], "--k 20 is more than --workers 16"),
    ],
)
def test_bad_flags_name_the_flag(argv: list[str], named: str) -> None:
    with pytest.raises(ValueError) as error:
        from_args(argv)
    assert named in str(error.value)


def test_heterogeneous_rates_keep_the_mean_rate() -> None:
    rates = DollConfig(rates="heterogeneous", workers=8, rate=10.0).worker_rates()
    assert len(set(rates)) == 8
    assert sum(rates) / 8 == pytest.approx(10.0)


def test_help_exits_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as leaving:
        main(["--help"])
    assert leaving.value.code == 0
    assert "--preemption" in capsys.readouterr().out


def test_unknown_product_fails_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    assert main(["--product", "Plan 9", "--out", str(out)]) == 2
    assert "product 'Plan 9'" in capsys.readouterr().err
    assert not out.exists()
