"""The experiment's figures, drawn on the user's side from a results folder (matplotlib,
Agg): each job's query rate over time (the fair-share picture) and the latency CDF per job."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from workloads.common.figures import save_figure  # noqa: E402
from workloads.common.results import read_records  # noqa: E402
from workloads.common.storage import LocalStorage  # noqa: E402


def draw(folder: Path) -> list[Path]:
    storage = LocalStorage(folder)
    rates = read_records(storage, "rates")
    failures = read_records(storage, "failures")
    jobs = sorted({row["job"] for row in rates})
    drawn = []

    figure, axes = plt.subplots(figsize=(7, 4))
    for job in jobs:
        rows = [row for row in rates if row["job"] == job and row["state"] == "running"]
        axes.plot([r["t"] for r in rows], [r["rate"] for r in rows], label=job)
    for index, event in enumerate(failures):
        axes.axvline(event["t"], color="tab:red", linestyle=":",
                     label="failures" if index == 0 else "_nolegend_")
    axes.set(xlabel="time since the jobs started (s)", ylabel="query rate (queries/s, window)",
             title="Query rate per job")
    axes.legend()
    drawn.append(save_figure(figure, folder / "query_rate.png"))

    latencies = read_records(storage, "latencies")
    figure, axes = plt.subplots(figsize=(7, 4))
    for job in jobs:
        values = np.sort([row["latency_ms"] for row in latencies if row["job"] == job])
        if len(values):
            axes.plot(values, np.arange(1, len(values) + 1) / len(values), label=job)
    axes.set(xscale="log", xlabel="latency per query (ms)", ylabel="fraction of queries",
             title="Latency CDF per job")
    axes.legend()
    drawn.append(save_figure(figure, folder / "latency_cdf.png"))
    return drawn

