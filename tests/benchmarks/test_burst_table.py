"""The burst benchmark's table: repeats of a case grouped, mean (min–max), and the two
checks (within 1.15× of the bound, never slower than default) over every repeat."""

from __future__ import annotations

from typing import Any

from benchmarks.burst_speedup import aggregate, case_row, markdown


def summary(
    workload: str, bw: float, default_s: float, aware_s: float, bound_s: float
) -> dict[str, Any]:
    run = {"lower_bound_s": bound_s}
    return {
        "workload": workload,
        "bandwidth_mbit": bw,
        "speedup": round(default_s / aware_s, 3),
        "runs": {
            "default": {**run, "makespan_s": default_s,
                        "makespan_over_bound": round(default_s / bound_s, 3)},
            "data-aware": {**run, "makespan_s": aware_s,
                           "makespan_over_bound": round(aware_s / bound_s, 3)},
        },
    }


def test_repeats_are_grouped_per_case_and_one_bad_repeat_fails_the_case() -> None:
    rows = [
        case_row(summary("param-server", 31.0, 30.0, 22.0, 20.0)),
        case_row(summary("image", 106.0, 40.0, 30.0, 28.0)),
        case_row(summary("param-server", 31.0, 30.0, 24.0, 20.0)),  # 1.20× the bound
        case_row(summary("image", 106.0, 29.0, 30.0, 28.0)),  # slower than default
    ]
    table = aggregate(rows)
    assert [(c["workload"], c["bandwidth_mbit"], c["repeats"]) for c in table] == [
        ("image", 106.0, 2), ("param-server", 31.0, 2)
    ]
    image, server = table
    assert image["within"] and not image["not_slower"]
    assert not server["within"] and server["not_slower"]
    lines = markdown(table).splitlines()
    assert lines[3].startswith("| param-server | 31 | 2 | 30.0 (30.0–30.0) | 23.0 (22.0–24.0) |")
    assert lines[3].endswith("| no | yes |")
