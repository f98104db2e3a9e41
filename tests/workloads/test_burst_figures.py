"""The burst figures keep their legends off the data: outside every plotting area, whole
inside the figure, for short and long runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

from workloads.burst.calibration import Calibration
from workloads.burst.cluster import NodeInfo
from workloads.burst.figures import gantt_plot, makespan_plot, sweep_plot
from workloads.burst.inputs import TaskSpec
from workloads.burst.options import BurstOptions
from workloads.burst.scheduling.base import RunResult
from workloads.burst.summary import summarize
from workloads.common.figures import save_figure

MB = 1_000_000
WORKERS = [NodeInfo("hpc-id", "onprem", "hpc", 2, "198.18.0.2"),
           NodeInfo("cloud-id", "cloud", "cloud", 2, "198.18.1.1")]
CONFIG = BurstOptions(lab="netns", bandwidth_mbit=106.0, profile="100m")


def records(tasks: int, compute_s: float, transfer_s: float) -> list[dict[str, Any]]:
    """Half the tasks on-prem back to back; the cloud's each after its transfer, the last
    transfer ending just before the end of the run (where a legend in a corner sat)."""
    rows = []
    for i in range(tasks):
        cloud = i % 2 == 1
        slot = i // 2
        start = slot * (compute_s + (transfer_s if cloud else 0.0))
        compute_start = start + (transfer_s if cloud else 0.0)
        row: dict[str, Any] = {"task": f"t{i}", "site": "cloud" if cloud else "onprem",
               "role": "cloud" if cloud else "hpc",
               "node_ip": "198.18.1.1" if cloud else "198.18.0.2",
               "transfer_start": start if cloud else None,
               "transfer_end": start + transfer_s if cloud else None,
               "compute_start": compute_start, "compute_end": compute_start + compute_s}
        rows.append(row)
    return rows


def summary(scale: float) -> dict[str, Any]:
    tasks = [TaskSpec(f"t{i}", i, (f"f{i}",), 10 * MB) for i in range(4)]
    results = {}
    for name, makespan, own_cpu in (("default", 1.2, 0.01), ("data-aware", 1.0, 0.02)):
        result = RunResult(name, 100.0, finished=100.0 + makespan * scale,
                           scheduler_cpu_s=own_cpu * scale,
                           site_cpu_s={"onprem": 0.9 * scale, "cloud": 0.8 * scale},
                           others_cpu_s={"onprem": 0.01 * scale, "cloud": 0.02 * scale})
        result.records = [{**row, "bytes_moved": 10 * MB if row["site"] == "cloud" else 0,
                           "compute_cpu_s": 0.2 * scale, "transfer_cpu_s": None}
                          for row in records(4, 0.25 * scale, 0.05 * scale)]
        results[name] = result
    seconds = {"onprem": [0.25 * scale], "cloud": [0.23 * scale]}
    return summarize(CONFIG, tasks, results, {}, WORKERS, 2,
                     Calibration(("t0",), seconds, seconds), {"onprem": [0], "cloud": [1]})


def assert_legends_clear_of_data(figure: plt.Figure, tmp_path: Path, legends: int) -> None:
    """As saved: each legend lies outside every axes that shows data, and inside the figure."""
    save_figure(figure, tmp_path / "figure.png")  # laid out as every figure is, then closed
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    shown = [legend for axes in figure.axes if (legend := axes.get_legend()) is not None]
    assert len(shown) == legends
    plots = [axes.get_window_extent(renderer) for axes in figure.axes if axes.axison]
    page = Bbox.from_bounds(0, 0, *canvas.get_width_height())
    for legend in shown:
        box = legend.get_window_extent(renderer)
        assert not any(box.overlaps(plot) for plot in plots), legend.get_texts()[0].get_text()
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1


@pytest.mark.parametrize("scale", [1.0, 30.0, 3000.0])
def test_the_gantt_legend_covers_no_bar(tmp_path: Path, scale: float) -> None:
    figure = gantt_plot(records(48, 0.9 * scale, 0.3 * scale), "default: image / nfs")
    [legend] = [axes.get_legend() for axes in figure.axes]
    assert legend is not None
    assert [text.get_text() for text in legend.get_texts()] == ["transfer", "compute"]
    assert_legends_clear_of_data(figure, tmp_path, legends=1)


@pytest.mark.parametrize("scale", [1.0, 100.0, 10_000.0])
def test_the_makespan_legends_cover_no_bar_or_line(tmp_path: Path, scale: float) -> None:
    figure = makespan_plot(summary(scale))
    labels = [[text.get_text() for text in legend.get_texts()]
              for axes in figure.axes if (legend := axes.get_legend()) is not None]
    assert labels[0][0].startswith("lower bound") and "cloud tasks" in labels[1]
    assert "scheduler" in labels[2] and "others on cloud's CPUs" in labels[2]
    assert_legends_clear_of_data(figure, tmp_path, legends=3)


def test_the_sweep_legend_covers_no_point(tmp_path: Path) -> None:
    sweep = [{**summary(scale), "bandwidth_mbit": mbit}
             for scale, mbit in ((40.0, 30.0), (20.0, 100.0), (10.0, 200.0))]
    assert_legends_clear_of_data(sweep_plot(sweep), tmp_path, legends=1)
