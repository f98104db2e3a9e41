"""The generic option spec every workload declares its options with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from workloads.common.options import OptionError, OptionSpec, check_fields, option


@dataclass(frozen=True, kw_only=True)
class Toy:
    count: int = option(3, "how many", minimum=1, maximum=8)
    share: float = option(0.5, "a fraction", above=0.0, maximum=1.0)
    mode: str = option("fast", "how", choices=("fast", "slow"))
    rates: tuple[float, ...] = option((30.0, 50.0), "rates", above=0.0)
    picks: tuple[str, ...] = option(
        ("a", "b"), "picks", choices=("a", "b"), aliases={"all": ("a", "b")}
    )
    file: Path | None = option(None, "an input file")
    limit: int | None = option(None, "an optional bound", minimum=0)
    loud: bool = option(False, "a switch")
    label: str = option("here", "set per target", launcher=True)

    def __post_init__(self) -> None:
        check_fields(self)


TOY = OptionSpec(Toy, prog="toy")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"count": "9"}, "--count: expected an integer in [1, 8], got '9'"),
        ({"count": "2.5"}, "--count: expected an integer in [1, 8], got '2.5'"),
        ({"share": "0"}, "--share: expected a number in (0, 1], got '0'"),
        ({"share": "inf"}, "--share: expected a number in (0, 1], got 'inf'"),
        ({"mode": "medium"}, "--mode: expected one of fast, slow, got 'medium'"),
        (
            {"rates": "30,-1"},
            "--rates: expected a comma-separated list of numbers > 0, got '30,-1'",
        ),
        (
            {"rates": "30,30"},
            "--rates: expected a comma-separated list of numbers > 0, got '30,30'",
        ),
        ({"picks": "c"}, "--picks: expected a comma-separated list of a, b (or all), got 'c'"),
        ({"limit": "-1"}, "--limit: expected an integer ≥ 0, got '-1'"),
        ({"nothing": "1"}, "--nothing: is not an option here"),
    ],
)
def test_a_bad_value_names_its_flag_and_what_was_expected(
    given: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError) as error:
        TOY.from_text(given)
    assert str(error.value) == message


def test_text_becomes_typed_values_and_comes_back_as_the_same_command_line() -> None:
    toy = TOY.from_text(
        {"count": "8", "rates": "30, 80.5", "picks": "all", "file": "in.json", "loud": True}
    )
    assert toy == Toy(count=8, rates=(30.0, 80.5), file=Path("in.json"), loud=True)
    assert TOY.from_text({"count": None, "loud": False}) == Toy()  # not given: the default
    argv = TOY.argv(toy)
    assert argv == ["--count", "8", "--rates", "30,80.5", "--file", "in.json", "--loud"]
    assert TOY.parse(argv) == toy
    assert TOY.paths_of(toy) == {"--file": Path("in.json")}
    assert TOY.argv(Toy(picks=("b",), label="there")) == ["--picks", "b", "--label", "there"]


def test_task_flags_leave_out_what_the_launcher_sets() -> None:
    flags = {dest: (switch, help) for dest, switch, help in TOY.task_flags()}
    assert set(flags) == {"count", "share", "mode", "rates", "picks", "file", "limit", "loud"}
    assert flags["count"] == (False, "how many (default: 3)")
    assert flags["rates"] == (False, "rates (default: 30,50)")
    assert flags["picks"] == (False, "picks (default: all)")
    assert flags["loud"] == (True, "a switch")


def test_a_spec_refuses_fields_it_cannot_read() -> None:
    @dataclass(frozen=True, kw_only=True)
    class NoOption:
        count: int = 3

    @dataclass(frozen=True, kw_only=True)
    class Unsupported:
        table: dict[str, int] = option(None, "no")

    for cls in (NoOption, Unsupported):
        with pytest.raises(TypeError, match=cls.__name__):
            OptionSpec(cls)


@dataclass(frozen=True, kw_only=True)
class Sized:
    steps: int = option(100, "steps", minimum=1)
    workers: int = option(2, "workers", minimum=1)
    preset: str | None = option(None, "a named set of values", choices=("paper",))

    def __post_init__(self) -> None:
        check_fields(self)


SIZED = OptionSpec(Sized, presets={"paper": {"steps": 5000, "workers": 8}})


def test_a_preset_sets_its_values_and_given_flags_win() -> None:
    assert SIZED.parse(["--preset", "paper"]) == Sized(steps=5000, workers=8, preset="paper")
    assert SIZED.parse(["--preset", "paper", "--workers", "3"]) == Sized(
        steps=5000, workers=3, preset="paper")
    # a flag given at the field's plain default still wins over the preset, also after the
    # options travel as a command line (the launcher's argv to the workload)
    options = SIZED.parse(["--preset", "paper", "--steps", "100"])
    assert options.steps == 100
    assert SIZED.parse(SIZED.argv(options)) == options
    assert SIZED.argv(options) == ["--steps", "100", "--preset", "paper"]


def test_presets_must_name_real_fields_with_good_values_and_a_preset_option() -> None:
    with pytest.raises(TypeError, match="sets"):
        OptionSpec(Sized, presets={"paper": {"stepz": 1}})
    with pytest.raises(OptionError, match="--steps"):
        OptionSpec(Sized, presets={"paper": {"steps": 0}})
    with pytest.raises(TypeError, match="`preset` option"):
        OptionSpec(Sized, presets={"huge": {"steps": 9}})
