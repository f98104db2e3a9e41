"""What every benchmark reports the same way: how it was made (the command, the machine's
cores and load, the date, the commit) and its targets, each met or missed; `exit_code` is
non-zero when any target is missed, so a script (and CI) can tell."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workloads.common.provenance import git_commit


@dataclass(frozen=True)
class Target:
    """One claim a benchmark checks: `measured` against `limit` (`at_most` or at least)."""

    name: str
    measured: float
    limit: float
    at_most: bool = True

    @property
    def met(self) -> bool:
        return self.measured <= self.limit if self.at_most else self.measured >= self.limit

    def line(self) -> str:
        sign = "≤" if self.at_most else "≥"
        verdict = "met" if self.met else "MISSED"
        return f"{verdict:6} {self.name}: {self.measured:.3f} (target {sign} {self.limit:.3g})"


def relative_command(command: str) -> str:
    """The command with every absolute path under the current folder (the project) shown
    relative to it, as a reader would type it from a checkout of their own."""
    here = os.getcwd()

    def shown(arg: str) -> str:
        flag, equals, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if os.path.isabs(value) and os.path.commonpath([here, value]) == here:
            value = os.path.relpath(value, here)
        return f"{flag}{equals}{value}"

    return shlex.join(shown(arg) for arg in shlex.split(command))


def machine() -> dict[str, Any]:
    """The command line, cores, load averages (1/5/15 min), date and commit of this run."""
    return {
        "command": relative_command(shlex.join(
            ["python", "-m", sys.modules["__main__"].__spec__.name
             if sys.modules["__main__"].__spec__ else sys.argv[0], *sys.argv[1:]])),
        "cores": os.cpu_count(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "commit": git_commit(),
    }


def header(made: dict[str, Any]) -> str:
    load = " / ".join(f"{value:g}" for value in made["load_average"])
    return (f"`{relative_command(made['command'])}` on {made['cores']} cores "
            f"(load average {load} at the end), {made['date']}, commit {made['commit']}")


def targets_text(targets: list[Target]) -> str:
    return "\n".join(["Targets:", *(f"  {target.line()}" for target in targets)])


def exit_code(targets: list[Target]) -> int:
    """1 when any target was missed, else 0."""
    return 0 if all(target.met for target in targets) else 1


def write_output(path: Path, text: str) -> None:
    """A benchmark's output file (its report or its numbers), its folder made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def finish(out: Path, sections: list[str], rows: Any, checked: list[Target],
           document: dict[str, Any] | None = None) -> int:
    """A benchmark's end: its report (how it was made, `sections`, its targets) printed and
    written to out/table.md, its rows to out/rows.json (and `document` to
    out/provenance.json); the exit code of its targets."""
    text = "\n\n".join([header(machine()), *sections, targets_text(checked)])
    print(text)
    write_output(out / "table.md", text + "\n")
    (out / "rows.json").write_text(json.dumps(rows, indent=2, default=str))
    if document is not None:
        (out / "provenance.json").write_text(json.dumps(document, indent=2, default=str))
    print(f"results: {out}")
    return exit_code(checked)
