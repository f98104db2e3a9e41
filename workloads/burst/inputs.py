"""Deterministic generated inputs: one manifest of tasks plus the image files it names.

Written once to the on-prem directory (nfs) or uploaded to the bucket (s3) by the driver;
a later run with the same parameters finds the manifest and reuses the files.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from workloads.burst.options import OWN, BurstOptions, entry_files, own_entries
from workloads.common.storage import LocalStorage, Storage

MANIFEST = "manifest.json"
CLASSES = 10
JPEG_QUALITY = 90
NOISE_SIGMA = 16.0
PROGRESS_EVERY_S = 2.0
"""How often a line says how far the inputs are while they are written (48 default images
take about 40 s to generate on a loaded two-core machine)."""
Say = Callable[[str], None]


@dataclass(frozen=True)
class TaskSpec:
    """One unit of work: its files (relative to the data location) and their total bytes."""

    name: str
    index: int
    files: tuple[str, ...]
    nbytes: int
    labels: tuple[int, ...] = ()
    root: str = ""  # own inputs: the entry's path relative to the data location


def generated_image(side_w: int, side_h: int, label: int, rng: np.random.Generator) -> bytes:
    """A JPEG: a colour gradient tinted by `label`, with noise (so it compresses like a photo)."""
    y, x = np.mgrid[0:side_h, 0:side_w].astype(np.float32)
    tint = np.array([(label * 37) % 256, (label * 91) % 256, (label * 53) % 256], np.float32)
    base = np.stack([x * 255 / side_w, y * 255 / side_h, (x + y) * 127 / (side_w + side_h)], -1)
    pixels = 0.6 * base + 0.4 * tint + rng.normal(0, NOISE_SIGMA, (side_h, side_w, 3))
    buffer = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(
        buffer, "JPEG", quality=JPEG_QUALITY
    )
    return buffer.getvalue()


class InputsProgress:
    """`inputs: 12/48 tasks generated, 40.1 MB` once `every_s` has passed since the last
    line, told after each file written; none once every task is done (the caller's summary
    line follows)."""

    def __init__(self, total: int, doing: str, say: Say, every_s: float = PROGRESS_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.doing = doing
        self.say = say
        self.every_s = every_s
        self.clock = clock
        self.shown_at = clock()
        self.nbytes = 0

    def wrote(self, nbytes: int, tasks_done: int) -> None:
        self.nbytes += nbytes
        now = self.clock()
        if tasks_done < self.total and now - self.shown_at >= self.every_s:
            self.shown_at = now
            self.say(f"inputs: {tasks_done}/{self.total} tasks {self.doing}, "
                     f"{self.nbytes / 1e6:.1f} MB")


def input_parameters(config: BurstOptions) -> dict[str, int | str]:
    if config.workload == "image":
        return {
            "workload": "image",
            "images": config.images,
            "side": config.image_side,
            "seed": config.seed,
        }
    return {
        "workload": "param-server",
        "directories": config.directories,
        "images_per_directory": config.images_per_directory,
        "side": config.ps_image_side,
        "seed": config.seed,
    }


def _generate(
    params: dict[str, int | str], storage: Storage, progress: InputsProgress
) -> list[TaskSpec]:
    seed = int(params["seed"])
    side = int(params["side"])
    tasks: list[TaskSpec] = []
    if params["workload"] == "image":
        for index in range(int(params["images"])):
            rng = np.random.default_rng([seed, index])
            name = f"images/img-{index:04d}.jpg"
            data = generated_image(side, side, index % CLASSES, rng)
            storage.write_bytes(name, data)
            tasks.append(TaskSpec(f"img-{index:04d}", index, (name,), len(data)))
            progress.wrote(len(data), len(tasks))
        return tasks
    per_dir = int(params["images_per_directory"])
    for index in range(int(params["directories"])):
        files, labels, total = [], [], 0
        for j in range(per_dir):
            rng = np.random.default_rng([seed, index, j])
            label = int(rng.integers(CLASSES))
            name = f"batches/dir-{index:03d}/img-{j:03d}.jpg"
            data = generated_image(side, side * 5 // 4, label, rng)
            storage.write_bytes(name, data)
            progress.wrote(len(data), index + int(j == per_dir - 1))
            files.append(name)
            labels.append(label)
            total += len(data)
        tasks.append(TaskSpec(f"dir-{index:03d}", index, tuple(files), total, tuple(labels)))
    return tasks


def cache_folder(cache: Path, params: dict[str, int | str]) -> LocalStorage:
    """The cache's folder for inputs of these parameters (one per set of parameters)."""
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    return LocalStorage(cache / f"{params['workload']}-{key}")


def _read_manifest(storage: Storage, params: dict[str, int | str]) -> list[TaskSpec] | None:
    """The tasks in `storage`'s manifest if it was written for `params`, else None."""
    try:
        manifest = json.loads(storage.read_bytes(MANIFEST))
    except Exception:  # noqa: BLE001 - absent or unreadable: not there
        return None
    if manifest.get("parameters") != params:
        return None
    return [
        TaskSpec(**{**t, "files": tuple(t["files"]), "labels": tuple(t["labels"])})
        for t in manifest["tasks"]
    ]


def _write_manifest(storage: Storage, params: dict[str, int | str], tasks: list[TaskSpec]) -> None:
    document = {"parameters": params, "tasks": [asdict(task) for task in tasks]}
    storage.write_bytes(MANIFEST, json.dumps(document, indent=1).encode())


def ensure_inputs(
    config: BurstOptions,
    storage: Storage,
    say: Say = print,
    cache: Path | None = None,
    progress_every_s: float = PROGRESS_EVERY_S,
) -> list[TaskSpec]:
    """The tasks of this configuration, generating the inputs unless already there; with a
    `cache`, inputs of the same parameters are copied from it (generated there once). A
    line every `progress_every_s` says how far the generation or copy is."""
    params = input_parameters(config)
    tasks = _read_manifest(storage, params)
    if tasks is not None:
        say(f"inputs: reusing {len(tasks)} tasks at {storage.uri}")
        return tasks
    if cache is not None:
        cached = cache_folder(cache, params)
        tasks = ensure_inputs(config, cached, say, progress_every_s=progress_every_s)
        say(f"inputs: copying {len(tasks)} tasks from {cached.uri} to {storage.uri}")
        progress = InputsProgress(len(tasks), "copied", say, progress_every_s)
        for done, task in enumerate(tasks, start=1):
            for name in task.files:
                storage.write_bytes(name, cached.read_bytes(name))
            progress.wrote(task.nbytes, done)
        _write_manifest(storage, params, tasks)  # last: a half-copied folder has none
        return tasks
    say(f"inputs: generating {config.tasks} {config.workload} tasks at {storage.uri}")
    tasks = _generate(params, storage,
                      InputsProgress(config.tasks, "generated", say, progress_every_s))
    _write_manifest(storage, params, tasks)
    say(f"inputs: {sum(t.nbytes for t in tasks) / 1e6:.1f} MB in {len(tasks)} tasks")
    return tasks


# --- your own inputs (--script): every entry of --inputs is one task's input -----------------


def own_parameters(folder: Path) -> dict[str, int | str]:
    """What identifies a set of own inputs: a digest of every file's name, size and
    modification time (the same folder, unchanged, is not copied twice)."""
    listing = [
        [path.relative_to(folder).as_posix(), path.stat().st_size, path.stat().st_mtime_ns]
        for entry in own_entries(folder) for path in entry_files(entry)
    ]
    digest = hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:16]
    return {"workload": OWN, "inputs": digest}


def own_location(folder: Path) -> str:
    """The sub-folder (or key prefix) of the data location that holds these inputs: one per
    set of inputs, so no file of another set is ever seen beside an input."""
    return f"own-{own_parameters(folder)['inputs']}"


def ensure_own_inputs(folder: Path, storage: Storage, say: Say = print,
                      progress_every_s: float = PROGRESS_EVERY_S) -> list[TaskSpec]:
    """Every entry of `folder` as one task, its files copied to `storage` (the on-prem file
    system or the bucket) unless a manifest says they are there already."""
    params = own_parameters(folder)
    tasks = _read_manifest(storage, params)
    if tasks is not None:
        say(f"inputs: reusing {len(tasks)} tasks at {storage.uri}")
        return tasks
    entries = own_entries(folder)
    say(f"inputs: copying {len(entries)} inputs from {folder} to {storage.uri}")
    progress = InputsProgress(len(entries), "copied", say, progress_every_s)
    tasks = []
    for index, entry in enumerate(entries):
        files, total = [], 0
        for path in entry_files(entry):
            key = path.relative_to(folder).as_posix()
            data = path.read_bytes()
            storage.write_bytes(key, data)
            files.append(key)
            total += len(data)
            progress.wrote(len(data), index)
        tasks.append(TaskSpec(entry.name, index, tuple(files), total, root=entry.name))
    _write_manifest(storage, params, tasks)
    say(f"inputs: {sum(t.nbytes for t in tasks) / 1e6:.1f} MB in {len(tasks)} tasks")
    return tasks
