"""Where a task's input lives and how it reaches the node that computes it.

nfs: the on-prem directory, readable by on-prem nodes only; another node gets the files from
an on-prem reader task through Ray's object transfer (so the bytes cross the site link).
s3: a bucket every node downloads from. Moved files land in a per-task staging directory on
the destination node and are removed after the compute.
"""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from vocab.burst import SITE_ONPREM
from workloads.burst.inputs import TaskSpec
from workloads.common.storage import Storage, open_storage, reused_storage, write_atomically


@dataclass(frozen=True)
class DataSource:
    kind: str  # "nfs" or "s3"
    uri: str  # the on-prem directory, or s3://bucket/prefix
    endpoint_url: str | None = None

    def storage(self) -> Storage:
        """This process's one client of the data (see reused_storage)."""
        return reused_storage(self.uri, self.endpoint_url)

    def visible_at(self, site: str) -> bool:
        """Whether a node at `site` reads the inputs in place (no move needed)."""
        return self.kind == "nfs" and site == SITE_ONPREM


@dataclass(frozen=True)
class RunContext:
    """What every task of one scheduler run needs to find and move its data."""

    source: DataSource
    stage_root: str  # per run; on every node
    sites: dict[str, str]  # Ray node id -> site
    reader_node: str  # an on-prem node id that reads nfs inputs for other sites

    def site_of_this_node(self) -> str:
        return self.sites[ray.get_runtime_context().get_node_id()]

    def stage_dir(self, task: TaskSpec) -> Path:
        return Path(self.stage_root) / task.name


@ray.remote(num_cpus=0)
def read_files(uri: str, names: tuple[str, ...]) -> dict[str, bytes]:
    """Runs on an on-prem node: the named input files, to be moved to another node."""
    storage = open_storage(uri)
    return {name: storage.read_bytes(name) for name in names}


def get_keeping_resources(ref: ray.ObjectRef) -> Any:
    """`ray.get` from a helper thread. Ray lends a task's CPUs to other tasks while the
    task's main thread blocks in `ray.get`; a fetch inside a task must keep its node, as a
    copy program in the task would, so the wait happens in another thread."""
    box: dict[str, Any] = {}

    def wait() -> None:
        try:
            box["value"] = ray.get(ref)
        except BaseException as error:  # noqa: BLE001 - re-raised in the task's thread
            box["error"] = error

    thread = threading.Thread(target=wait, name="fetch")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def fetch(context: RunContext, task: TaskSpec) -> tuple[float, float, int]:
    """Move the task's files to this node's staging directory: (start, end, bytes)."""
    start = time.time()
    target = context.stage_dir(task)
    if context.source.kind == "nfs":
        reader = read_files.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(context.reader_node, soft=False)
        )
        files = get_keeping_resources(reader.remote(context.source.uri, task.files))
    else:
        storage = context.source.storage()
        files = {name: storage.read_bytes(name) for name in task.files}
    moved = 0
    for name, data in files.items():
        write_atomically(target / name, data)
        moved += len(data)
    return start, time.time(), moved


def read_inputs(context: RunContext, task: TaskSpec, site: str) -> list[bytes]:
    """The task's files, in place when this site sees them, else from the staging dir."""
    if context.source.visible_at(site):
        storage = context.source.storage()
        return [storage.read_bytes(name) for name in task.files]
    target = context.stage_dir(task)
    missing = [name for name in task.files if not (target / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"task {task.name}: {len(missing)} input files not staged "
            f"in {target} (first: {missing[0]})"
        )
    return [(target / name).read_bytes() for name in task.files]


def unstage(context: RunContext, task: TaskSpec) -> None:
    shutil.rmtree(context.stage_dir(task), ignore_errors=True)
