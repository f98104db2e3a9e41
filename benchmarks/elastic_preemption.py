"""Elastic training under preemption: without preemptions, with them (checkpoint on the spot
notice) and with notices ignored (periodic checkpoints only), side by side; survivor mode
(`--torchft`) beside them on the same model, schedule and lab; where the extra time went; and
the default `invoke run-elastic` demo, timed.

The lab replaces a preempted node after --replace-delay seconds (the new node's Ray start on
top), so survivor mode has a rejoin to time; restart mode never grows back within the run
(--cluster-rescale-timeout 3600), as before.

The comparison: the same training (the digits CNN) three times, each on a fresh spot
lab, once without preemptions and twice under the same
preemption schedule (`--preempt-at`: spot nodes interrupted when training
reaches the same steps, carried out by launch.elastic.LabInterrupter, the mechanism
`invoke run-elastic` uses): once as spotburst runs it (a notice makes every rank checkpoint
at the current step and hold until Ray Train restarts it on the nodes left), once as
restart-based tools do (the notice is ignored; Ray Train restarts from the last periodic
checkpoint). Both checkpoint every --checkpoint-every steps as well. Prints the steps lost
at each preemption in both modes side by side, then per mode: preemptions, lost steps
(steps computed twice), the median time from the notice to the first step after the
restart, wall time, accuracy; then each mode's wall time as a ratio to the run without
preemptions next to its bound, and where the extra time went, summed over the preemptions
from the run's records:
- detection: the lab's interruption -> the run saw the notice;
- drain: the notice -> Ray Train committed the notice checkpoint (none when ignored);
- restart: -> the next worker group's training function began (old group ended, new one
  placed, its workers started);
- restore: -> its first step done, less one steady step (checkpoint loaded, model built);
- warm-up: its first 5 steps past their steady time;
- redo: the steps computed again, at the steady step time.
The bound is the physical limit: the run without preemptions plus the capacity-seconds the
preemptions removed (each step after a preemption at the steady step time of the worker count
it ran at, less the same step at the first count's, measured in the run without) plus one
restore per preemption (the run without preemptions' time from its training function's start
to its first step), as a ratio to the run without preemptions.

Survivor mode (`torchft-none`, `torchft`): the same CNN written for torchft
(examples/elastic/torchft_digits.py), one replica group per worker, each with a fixed batch
(--batch / workers) and a fixed step time (--step-time / workers) per step whatever the number
of groups up, without and with the same preemptions. Per preemption: the survivors' step rate
from the notice to the replacement's first committed step against their rate in the
--rate-window seconds before the notice, notice -> the replacement's first committed step, and
the replacement's node joining -> that step. Its bound: the run without preemptions plus, for
every step done while fewer groups were up, the difference of that count's steady step time
(measured in the run itself) to the full count's (no restart, no restore, no warm-up). The
final loss of a run is the test loss of its last report (survivor mode), or its mean reported
loss over its last --loss-window steps. Survivor mode runs both of its modes once per script
seed (--loss-seeds: initial weights and data order) under the same preemption schedule: a
single pair differs by where each trajectory happens to end, so the final losses compared are
the means over the seeds, with the runs without preemptions' own spread printed beside them;
the timing targets hold for every preempted run.

The demo (`--demo`): `invoke run-elastic --out DIR`, the default run exactly as the docs
show it, with its wall time (lab, run, teardown, figure) and headline numbers.

Targets: with the notice checkpoint no step is lost, every notice is honoured, the median
restart (notice -> next step) takes at most 15 s and the wall time is at most 1.10x its
bound (a quiet machine); ignoring notices loses steps; the demo sees at least 3 preemptions,
loses no step, honours every notice, reaches 0.95 test accuracy, and (on a quiet machine)
takes at most 240 s; survivor mode (a quiet machine): wall time at most 1.10x its bound, the
survivors' step rate during each replacement at least 0.8x the rate before it, each
replacement's first committed step at most 15 s after its node joined, at most one step
computed twice per preemption, the mean final loss within 5 % of the runs without preemptions.
Exits 1 when one is missed. Writes the table, how it was made and the
targets to --out (a markdown file) and the rows to --json.

    python -m benchmarks.elastic_preemption [--demo] [--out FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import procs
from benchmarks.report import Target, exit_code, header, machine, targets_text, write_output
from launch.elastic import LabInterrupter
from spotlab import SpotLabConfig, spot_lab
from workloads.elastic.summary import first_rows

REPO = Path(__file__).resolve().parents[1]
MODES = ("none", "checkpoint", "ignore", "torchft-none", "torchft")
PREEMPTED = ("checkpoint", "ignore")
SURVIVOR = ("torchft-none", "torchft")
RESTART_SCRIPT = REPO / "examples" / "elastic" / "digits_cnn.py"
TORCHFT_SCRIPT = REPO / "examples" / "elastic" / "torchft_digits.py"
SURVIVOR_RATE_TARGET = 0.8
REJOIN_TARGET_S = 15.0
LOSS_TARGET = 0.05
DEMO_WALL_TARGET_S = 240.0
RESUME_TARGET_S = 15.0
BOUND_TARGET = 1.10
WARM_UP_STEPS = 5
PARTS = ("detection", "drain", "restart", "restore", "warm_up", "redo")


def schedule(preemptions: int, steps: int, seed: int) -> list[int]:
    """Steps at which to interrupt: spread over the middle of the run, seeded."""
    rng = np.random.default_rng(seed)
    edges = np.linspace(0.15 * steps, 0.8 * steps, preemptions + 1)
    return [int(rng.uniform(low, high)) for low, high in zip(edges[:-1], edges[1:],
                                                            strict=True)]


def command_line(mode: str, at: list[int], args: argparse.Namespace, out: Path,
                 seed: int = 0) -> list[str]:
    """The run's command: the digits CNN in restart mode, or written for torchft (`seed`
    its initial weights and data order)."""
    workers = args.preemptions + 2
    schedule = "" if mode.endswith("none") else ",".join(map(str, at))
    command = [sys.executable, "-m", "workloads.elastic", "--out", str(out), "-m", str(workers),
               "--preempt-at", schedule]
    if mode in SURVIVOR:
        return [*command, "--torchft", "-f", str(TORCHFT_SCRIPT), "--function", "train_func",
                "--", "--steps", str(args.steps), "--step-time", str(args.step_time / workers),
                "--batch", str(max(1, args.batch // workers)),
                "--checkpoint-every", str(args.checkpoint_every), "--seed", str(seed)]
    return [*command, "-f", str(RESTART_SCRIPT),
            "--on-notice", "checkpoint" if mode == "none" else mode,
            "--checkpoint-every", str(args.checkpoint_every),
            "--cluster-rescale-timeout", "3600", "--",
            "--steps", str(args.steps), "--step-time", str(args.step_time),
            "--batch", str(args.batch)]


def run_mode(mode: str, at: list[int], args: argparse.Namespace, folder: Path,
             seed: int = 0) -> dict[str, Any]:
    config = SpotLabConfig(spot=args.preemptions + 1, on_demand=1, cpus_per_node=1, alpha=1.0,
                           warning_s=args.warning, replace_delay_s=args.replace_delay,
                           object_store_mb=80, dashboard=False)
    out = folder / (mode if seed == 0 else f"{mode}-seed{seed}")
    with spot_lab(config) as lab:
        interrupter = LabInterrupter(lambda line: print(line, flush=True)
                                     if line.startswith("elastic:") else None)
        interrupter.attach(lab)
        code, log = procs.follow(command_line(mode, at, args, out, seed), interrupter.show,
                                 timeout_s=args.timeout, name=f"the {mode} run",
                                 env=lab.driver_env, cwd=REPO)
    if code != 0:
        tail = "\n".join(log[-40:])
        raise SystemExit(f"{mode}: the run failed:\n{tail}")
    summary = json.loads((out / "summary.json").read_text())
    records = {path.stem: [json.loads(line) for line in path.read_text().splitlines()]
               for path in (out / "records").glob("*.jsonl")}
    if mode in SURVIVOR:
        return {**survivor_row(mode, summary, records, args), "seed": seed}
    restarts = [r for r in summary["restarts"] if r["cause"] == "preemption"]
    resume = [r["time_to_resume_s"] for r in restarts if r["time_to_resume_s"]]
    return {"mode": mode,
            "resume_s": resume,
            "median_time_to_resume_s": float(np.median(resume)) if resume else None,
            "timeline": timeline(records, [row["t"] for row in interrupter.applied]),
            "interrupted_after": [p["steps_done"] for p in summary["preemption_schedule"]],
            "preemptions": summary["preemptions"], "lost_steps": summary["lost_steps"],
            "lost_per_preemption": [r["lost_steps"] for r in restarts],
            "notices": summary["notices"], "notices_honoured": summary["notices_honoured"],
            "mean_time_to_resume_s": float(np.mean(resume)) if resume else None,
            "wall_time_s": summary["wall_time_s"],
            "final_loss": final_loss(records, args.loss_window),
            "test_accuracy": summary["final_metrics"].get("test_accuracy")}


def final_loss(records: dict[str, list[dict[str, Any]]], window: int) -> float | None:
    """The mean loss reported over the run's last `window` steps (every report of them)."""
    rows = [s for s in records.get("steps", []) if "loss" in s]
    if not rows:
        return None
    last = max(s["step"] for s in rows)
    return float(np.mean([s["loss"] for s in rows if s["step"] > last - window]))


def survivor_row(mode: str, summary: dict[str, Any], records: dict[str, list[dict[str, Any]]],
                 args: argparse.Namespace) -> dict[str, Any]:
    """Survivor mode's numbers (see the module's docstring) from its summary and records."""
    steps = sorted(records.get("steps", []), key=lambda s: s["t_run"])
    started = summary["started_at"]
    replacements = []
    for row in summary["replacements"]:
        group, notice = row["replica_group"], row["notice_t"]
        others = [s for s in steps if s["replica_group"] != group
                  and s["replica_group"] != row["replacement_group"]]
        since = max(notice - args.rate_window, steps[0]["t_run"] if steps else notice)
        before = {s["step"] for s in others if since <= s["t_run"] <= notice}
        until = row["rejoin_t"] if row["rejoin_t"] is not None else summary["wall_time_s"]
        rate_before = len(before) / (notice - since) if notice > since else 0.0
        rate_during = row["survivor_steps"] / max(until - notice, 1e-9)
        replacements.append({
            **row, "rate_before": rate_before, "rate_during": rate_during,
            "survivor_rate_ratio": rate_during / rate_before if rate_before else None,
            "notice_to_first_step_s": (row["rejoin_t"] - notice
                                       if row["rejoin_t"] is not None else None),
            "node_join_to_first_step_s": (row["rejoin_t"] - row["node_joined_t"]
                                          if row["rejoin_t"] is not None else None)})
    return {"mode": mode, "started_at": started, "wall_time_s": summary["wall_time_s"],
            "preemptions": summary["preemptions"], "lost_steps": summary["lost_steps"],
            "replacements": replacements,
            "interrupted_after": [p["steps_done"] for p in summary["preemption_schedule"]],
            "steady_step_s": steady_by_count(steps, summary["worker_counts"]),
            "steps_by_count": steps_by_count(steps, summary["worker_counts"]),
            "final_loss": summary["final_metrics"].get("test_loss",
                                                       final_loss(records, args.loss_window)),
            "accuracy": summary["final_metrics"].get("accuracy")}


def _count_at(t: float, counts: list[dict[str, Any]]) -> int:
    return next((c["workers"] for c in reversed(counts) if c["t"] <= t), 0)


def _distinct_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first report of each step (torchft's steps are one per quorum, any group's)."""
    seen: set[int] = set()
    rows = []
    for row in steps:
        if row["step"] not in seen:
            seen.add(row["step"])
            rows.append(row)
    return rows


def steady_by_count(steps: list[dict[str, Any]], counts: list[dict[str, Any]]
                    ) -> dict[str, float]:
    """The median interval between steps while each number of replica groups was up, past a
    warm-up after each change."""
    gaps: dict[int, list[float]] = {}
    rows = _distinct_steps(steps)
    changes = [c["t"] for c in counts]
    for before, after in zip(rows, rows[1:], strict=False):
        since = max((t for t in changes if t <= before["t_run"]), default=0.0)
        warm = [r for r in rows if since <= r["t_run"] <= before["t_run"]]
        if len(warm) <= WARM_UP_STEPS:
            continue
        count = _count_at(before["t_run"], counts)
        if count == _count_at(after["t_run"], counts):
            gaps.setdefault(count, []).append(after["t_run"] - before["t_run"])
    return {str(count): float(np.median(values)) for count, values in sorted(gaps.items())}


def steps_by_count(steps: list[dict[str, Any]], counts: list[dict[str, Any]]
                   ) -> dict[str, int]:
    done: dict[str, int] = {}
    for row in _distinct_steps(steps):
        key = str(_count_at(row["t_run"], counts))
        done[key] = done.get(key, 0) + 1
    return done


def survivor_bound(none: dict[str, Any], row: dict[str, Any]) -> float | None:
    """Survivor mode's least wall time (see the module's docstring)."""
    full = max(none["steady_step_s"], key=int, default=None)
    if full is None:
        return None
    base = none["steady_step_s"][full]
    extra = sum(done * (row["steady_step_s"].get(count, base) - base)
                for count, done in row["steps_by_count"].items() if int(count) < int(full))
    return float(none["wall_time_s"] + extra)


def steady_step_s(rows: list[dict[str, Any]]) -> float | None:
    """The median interval between a group's steps past its warm-up."""
    times = [row["t"] for row in rows]
    gaps = np.diff(times[WARM_UP_STEPS:])
    return float(np.median(gaps)) if len(gaps) else None


def timeline(records: dict[str, list[dict[str, Any]]], interrupted: list[float]
             ) -> dict[str, Any]:
    """Per worker group: its count, steps and steady step time; per preemption: the parts
    the extra time went to (see the module's docstring), from the run's records."""
    attempts = sorted(records.get("attempts", []), key=lambda a: a["t"])
    steps = first_rows(records.get("steps", []))
    groups = []
    for attempt in attempts:
        mine = [s for s in steps if s["attempt"] == attempt["attempt"]]
        groups.append({"attempt": attempt["attempt"], "began": attempt["t"],
                       "workers": attempt["world_size"], "steps": len(mine),
                       "first_step": mine[0]["t"] if mine else None,
                       "steady_step_s": steady_step_s(mine),
                       "first_steps_s": (mine[min(WARM_UP_STEPS, len(mine)) - 1]["t"]
                                         - mine[0]["t"]) if mine else 0.0,
                       "resumed_steps": attempt.get("resumed_steps", 0)})
    notices = sorted(records.get("notices", []), key=lambda n: n["t"])
    commits = [c for c in records.get("commits", []) if c.get("checkpoint")]
    preemptions = []
    for when in interrupted:
        # a rank may see Ray's drain before the interrupter noted the time: 1 s of slack
        seen = next((n["t"] for n in notices if n["t"] >= when - 1.0), None)
        after = next((g for g in groups if g["began"] > when), None)
        if seen is None or after is None or after["first_step"] is None:
            continue
        before = [g for g in groups if g["began"] < when]
        committed = next((c["t"] for c in commits if seen <= c["t"] <= after["began"]), None)
        handed = committed or seen
        steady = after["steady_step_s"] or 0.0
        last_done = max((g["resumed_steps"] + g["steps"] for g in before), default=0)
        warm = WARM_UP_STEPS - 1 if after["steps"] >= WARM_UP_STEPS else after["steps"] - 1
        preemptions.append({
            "detection": max(0.0, seen - when), "drain": handed - seen,
            "restart": after["began"] - handed,
            "restore": max(0.0, after["first_step"] - after["began"] - steady),
            "warm_up": max(0.0, after["first_steps_s"] - max(0, warm) * steady),
            "redo": max(0, last_done - after["resumed_steps"]) * steady})
    return {"groups": groups, "preemptions": preemptions}


def bound_parts(none: dict[str, Any], row: dict[str, Any]) -> tuple[float, float] | None:
    """What the preemptions must cost at least (see the module's docstring): the capacity
    they removed and one restore each, in seconds; None without a reference step time."""
    reference = none["timeline"]["groups"]
    if not reference or reference[0]["steady_step_s"] is None:
        return None
    base_step = reference[0]["steady_step_s"]
    restore = (reference[0]["first_step"] or reference[0]["began"]) - reference[0]["began"]
    capacity = sum(g["steps"] * ((g["steady_step_s"] or base_step) - base_step)
                   for g in row["timeline"]["groups"][1:])
    return float(capacity), float(restore * len(row["timeline"]["preemptions"]))


def bound(none: dict[str, Any], row: dict[str, Any]) -> float | None:
    """The least wall time of `row`'s run: the run without preemptions plus their cost."""
    parts = bound_parts(none, row)
    return None if parts is None else float(none["wall_time_s"] + sum(parts))


def run_demo(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The default run as the docs show it, timed from the command's start to its end."""
    out = folder / "demo"
    invoke = str(Path(sys.executable).with_name("invoke"))
    began = time.monotonic()
    code, log = procs.follow([invoke, "run-elastic", "--out", str(out)],
                             lambda line: print(line, flush=True)
                             if line.startswith(("elastic:", "results")) else None,
                             timeout_s=args.timeout, name="invoke run-elastic", cwd=REPO)
    wall = time.monotonic() - began
    if code != 0:
        raise SystemExit("the demo failed:\n" + "\n".join(log[-40:]))
    summary = json.loads((out / "summary.json").read_text())
    return {"mode": "demo", "command_wall_time_s": wall, "run_wall_time_s":
            summary["wall_time_s"], "preemptions": summary["preemptions"],
            "lost_steps": summary["lost_steps"], "notices": summary["notices"],
            "notices_honoured": summary["notices_honoured"],
            "notices_during_startup": summary["notices_during_startup"],
            "worker_counts": [w["workers"] for w in summary["worker_counts"]],
            "test_accuracy": summary["final_metrics"].get("test_accuracy")}


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    compared = [row for row in rows if row["mode"] in PREEMPTED]
    by_mode = {row["mode"]: row for row in rows}
    lines = []
    if compared or "none" in by_mode:
        lines += [f"Elastic training under preemption: {args.steps} steps of "
                  f"{args.step_time:g} s on one worker, up to {args.preemptions + 2} workers "
                  f"on {args.preemptions + 2} nodes of 1 CPU, {args.preemptions} preemptions "
                  f"(nodes replaced after {args.replace_delay:g} s, not grown into), warning "
                  f"{args.warning:g} s, periodic checkpoint every "
                  f"{args.checkpoint_every} steps", "", "```"]
    if compared:
        lines.append(f"{'preemption':<11} " + " ".join(
            f"{'after step':>10} {'lost (' + row['mode'] + ')':>20}" for row in compared))
        count = max((len(row["lost_per_preemption"]) for row in compared), default=0)
        for index in range(count):
            cells = []
            for row in compared:
                after, lost = row["interrupted_after"], row["lost_per_preemption"]
                cells.append(f"{after[index] if index < len(after) else '-':>10} "
                             f"{lost[index] if index < len(lost) else '-':>20}")
            lines.append(f"{index + 1:<11} " + " ".join(cells))
        lines.append("")
    if compared or "none" in by_mode:
        lines.append(f"{'on notice':<11} {'preempt':>7} {'lost':>5} {'honoured':>9} "
                     f"{'resume s (median)':>24} {'wall s':>7} {'ratio':>6} {'bound':>6} "
                     f"{'/bound':>6} {'accuracy':>8}")
        none = by_mode.get("none")
        for row in rows:
            if row["mode"] not in ("none", *PREEMPTED):
                continue
            resumes = ",".join(f"{r:.1f}" for r in row["resume_s"]) or "-"
            median = row["median_time_to_resume_s"]
            ratio = row["wall_time_s"] / none["wall_time_s"] if none else float("nan")
            limit = bound(none, row) if none else None
            lines.append(
                f"{row['mode']:<11} {row['preemptions']:>7} {row['lost_steps']:>5} "
                f"{row['notices_honoured']:>4}/{row['notices']:<4} "
                f"{resumes + (f' ({median:.1f})' if median is not None else ''):>24} "
                f"{row['wall_time_s']:>7.1f} {ratio:>6.3f} "
                f"{limit / none['wall_time_s'] if limit and none else float('nan'):>6.3f} "
                f"{row['wall_time_s'] / limit if limit else float('nan'):>6.3f} "
                f"{row['test_accuracy'] or float('nan'):>8.3f}")
        if none:
            lines += ["", "where the extra time went (s, summed over the preemptions; "
                      "capacity and restores: the bound's, the lost nodes' work and one "
                      "restore each):",
                      f"{'on notice':<11} {'extra':>6} {'capacity':>8} {'restores':>8} " + " ".join(
                          f"{part.replace('_', '-'):>9}" for part in PARTS) + f" {'other':>6}"]
            for row in compared:
                capacity, restores = bound_parts(none, row) or (0.0, 0.0)
                parts = {part: sum(p[part] for p in row["timeline"]["preemptions"])
                         for part in PARTS}
                extra = row["wall_time_s"] - none["wall_time_s"]
                other = extra - capacity - sum(parts.values())
                lines.append(f"{row['mode']:<11} {extra:>6.1f} {capacity:>8.1f} "
                             f"{restores:>8.1f} " + " ".join(
                    f"{parts[part]:>9.1f}" for part in PARTS) + f" {other:>6.1f}")
        lines.append("```")
    lines += survivor_table(rows, args)
    for row in rows:
        if row["mode"] == "demo":
            lines += ["", "`invoke run-elastic` (the default demo):", "", "```",
                      f"command wall time {row['command_wall_time_s']:.0f} s (run "
                      f"{row['run_wall_time_s']:.0f} s), {row['preemptions']} preemptions, "
                      f"{row['lost_steps']} steps lost, {row['notices_honoured']}/"
                      f"{row['notices']} notices honoured ({row['notices_during_startup']} "
                      f"during a worker group's start-up), workers "
                      f"{' -> '.join(map(str, row['worker_counts']))}, test accuracy "
                      f"{row['test_accuracy']:.3f}", "```"]
    return "\n".join(lines)


def survivor_pairs(rows: list[dict[str, Any]]
                   ) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """Survivor mode's runs by seed: (without preemptions, with them)."""
    seeds = sorted({row.get("seed", 0) for row in rows if row["mode"] in SURVIVOR})
    pick = {(row["mode"], row.get("seed", 0)): row for row in rows if row["mode"] in SURVIVOR}
    return [(pick.get(("torchft-none", seed)), pick.get(("torchft", seed))) for seed in seeds]


def final_losses(pairs: Sequence[tuple[dict[str, Any] | None, dict[str, Any] | None]]
                 ) -> tuple[list[float], list[float]]:
    """The final losses of the seeds run both ways: (without preemptions, with them)."""
    both = [(none["final_loss"], run["final_loss"]) for none, run in pairs
            if none is not None and run is not None
            and none["final_loss"] is not None and run["final_loss"] is not None]
    return [without for without, _ in both], [with_ for _, with_ in both]


def survivor_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """Survivor mode's lines: each replacement, then each run against its bound, then the
    mean final losses."""
    pairs = survivor_pairs(rows)
    if not pairs:
        return []
    groups = args.preemptions + 2
    lines = ["", f"Survivor mode (--torchft, examples/elastic/torchft_digits.py): the same CNN, "
             f"{groups} replica groups of {max(1, args.batch // groups)} images and "
             f"{args.step_time / groups:.3g} s a step each, "
             f"replacement nodes after {args.replace_delay:g} s (plus the node's start)",
             "", "```"]
    runs = [run for _, run in pairs if run is not None]
    if runs:
        lines.append(f"{'seed':<4} {'preemption':<10} {'group':>5} {'notice s':>8} "
                     f"{'left s':>7} {'node s':>7} {'rejoin s':>8} {'survivor steps':>14} "
                     f"{'rate before':>11} {'during':>7} {'ratio':>6} {'notice->step':>12} "
                     f"{'node->step':>10}")
    for preempted in runs:
        for index, rep in enumerate(preempted["replacements"]):
            lines.append(
                f"{preempted.get('seed', 0):<4} {index + 1:<10} {rep['replica_group']:>5} "
                f"{rep['notice_t']:>8.1f} "
                f"{rep['leave_t']:>7.1f} {_s(rep['node_joined_t']):>7} {_s(rep['rejoin_t']):>8} "
                f"{rep['survivor_steps']:>14} {rep['rate_before']:>11.2f} "
                f"{rep['rate_during']:>7.2f} {_x(rep['survivor_rate_ratio']):>6} "
                f"{_s(rep['notice_to_first_step_s']):>12} "
                f"{_s(rep['node_join_to_first_step_s']):>10}")
    if runs:
        lines.append("")
    lines.append(f"{'run':<13} {'seed':>4} {'preempt':>7} {'lost':>5} {'wall s':>7} "
                 f"{'bound s':>7} {'/bound':>6} {'final loss':>10} {'accuracy':>8}")
    for none, run in pairs:
        for row in (none, run):
            if row is None:
                continue
            limit = survivor_bound(none, row) if none else None
            lines.append(f"{row['mode']:<13} {row.get('seed', 0):>4} {row['preemptions']:>7} "
                         f"{row['lost_steps']:>5} {row['wall_time_s']:>7.1f} {_s(limit):>7} "
                         f"{_x(row['wall_time_s'] / limit if limit else None):>6} "
                         f"{_x(row['final_loss']):>10} {_x(row['accuracy']):>8}")
    without, with_ = final_losses(pairs)
    if without and min(without) > 0:
        mean = float(np.mean(without))
        lines += ["", f"final loss over {len(without)} seed(s): {np.mean(with_):.4f} with "
                  f"preemptions, {mean:.4f} without ({np.mean(with_) / mean - 1:+.1%}); "
                  f"without preemptions the seeds range {min(without):.4f}-{max(without):.4f} "
                  f"({max(without) / min(without) - 1:.0%} apart)"]
    lines.append("```")
    return lines


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def survivor_targets(rows: list[dict[str, Any]]) -> list[Target]:
    found: list[Target] = []
    pairs = survivor_pairs(rows)
    for none, run in pairs:
        if run is None:
            continue
        name = f"survivor mode, seed {run.get('seed', 0)}"
        found.append(Target(f"{name}: steps computed twice per preemption",
                            run["lost_steps"] / max(1, run["preemptions"]), 1.0))
        for index, rep in enumerate(run["replacements"], 1):
            found.append(Target(f"{name}: replacement {index}: survivors' rate during / "
                                "before", rep["survivor_rate_ratio"] or 0.0,
                                SURVIVOR_RATE_TARGET, at_most=False))
            if rep["node_joined_t"] is not None:  # a node came back before the run ended
                found.append(Target(f"{name}: replacement {index}: node joined -> its "
                                    "first committed step (s)",
                                    rep["node_join_to_first_step_s"] or float("inf"),
                                    REJOIN_TARGET_S))
        limit = survivor_bound(none, run) if none is not None else None
        if limit:
            found.append(Target(f"{name}: wall time / bound (quiet machine)",
                                run["wall_time_s"] / limit, BOUND_TARGET))
    without, with_ = final_losses(pairs)
    if without and np.mean(without) > 0:
        found.append(Target(f"survivor mode: mean final loss over {len(without)} seed(s) / "
                            "without preemptions - 1",
                            float(abs(np.mean(with_) / np.mean(without) - 1)), LOSS_TARGET))
    return found


def targets(rows: list[dict[str, Any]]) -> list[Target]:
    found = []
    none = next((row for row in rows if row["mode"] == "none"), None)
    for row in rows:
        if row["mode"] == "checkpoint":
            found += [Target("notice checkpoint: steps lost", row["lost_steps"], 0),
                      Target("notice checkpoint: notices not honoured",
                             row["notices"] - row["notices_honoured"], 0),
                      Target("notice checkpoint: median notice -> next step (s, quiet lab)",
                             row["median_time_to_resume_s"] or float("inf"), RESUME_TARGET_S)]
            limit = bound(none, row) if none else None
            if limit:
                found.append(Target("notice checkpoint: wall time / bound (quiet machine)",
                                    row["wall_time_s"] / limit, BOUND_TARGET))
        elif row["mode"] == "ignore":
            found.append(Target("notices ignored: steps lost", row["lost_steps"], 1,
                                at_most=False))
        elif row["mode"] == "demo":
            found += [Target("demo: preemptions", row["preemptions"], 3, at_most=False),
                      Target("demo: steps lost", row["lost_steps"], 0),
                      Target("demo: notices not honoured",
                             row["notices"] - row["notices_honoured"], 0),
                      Target("demo: test accuracy", row["test_accuracy"] or 0.0, 0.95,
                             at_most=False),
                      Target("demo: command wall time (s, quiet machine)",
                             row["command_wall_time_s"], DEMO_WALL_TARGET_S)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.elastic_preemption",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--preemptions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--step-time", type=float, default=0.6,
                        help="seconds a step takes on one worker (the script pads to it)")
    parser.add_argument("--batch", type=int, default=64,
                        help="images per step over all workers (survivor mode: each replica "
                             "group takes its share of the full count, whatever is up)")
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--replace-delay", type=float, default=5.0,
                        help="lab seconds from a kill until the replacement node starts")
    parser.add_argument("--rate-window", type=float, default=10.0,
                        help="seconds before a notice the survivors' rate is measured over")
    parser.add_argument("--loss-window", type=int, default=30,
                        help="last steps whose mean reported loss is the final loss")
    parser.add_argument("--warning", type=float, default=6.0, help="lab seconds of notice")
    parser.add_argument("--seed", type=int, default=0, help="the preemption schedule's")
    parser.add_argument("--loss-seeds", type=int, default=3,
                        help="survivor mode's runs per mode, one per script seed (initial "
                             "weights and data order); the final losses compared are the means")
    parser.add_argument("--modes", type=lambda text: text.split(","), default=list(MODES),
                        help=f"comma-separated, of {','.join(MODES)} (each preempted mode is "
                             "compared with its own run without preemptions); empty: none")
    parser.add_argument("--demo", action="store_true",
                        help="also time the default `invoke run-elastic`")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds each run may take")
    parser.add_argument("--keep", type=Path,
                        help="keep each run's results folder under this folder")
    parser.add_argument("--out", type=Path, help="write the table and targets here (.md)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    at = schedule(args.preemptions, args.steps, args.seed)
    print(f"interrupting at steps {at}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as scratch:
        folder = args.keep or Path(scratch)
        for mode in [m for m in args.modes if m]:
            for seed in range(max(1, args.loss_seeds) if mode in SURVIVOR else 1):
                rows.append(run_mode(mode, at, args, folder, seed))
                print(f"  {mode}: {rows[-1]}", flush=True)
        if args.demo:
            rows.append(run_demo(args, folder))
            print(f"  demo: {rows[-1]}", flush=True)
    checked = targets(rows) + survivor_targets(rows)
    text = "\n\n".join([header(machine()), table(rows, args), targets_text(checked)])
    print(text)
    if args.out:
        write_output(args.out, text + "\n")
    if args.json:
        write_output(args.json, json.dumps(rows, indent=2))
    return exit_code(checked)


if __name__ == "__main__":
    sys.exit(main())
