"""A driver of a spot lab for the tests: `python tests/spotlab/spot_driver.py OUT`.

A task on a spot node records, every 0.1 s, what it sees: the notice on its node's metadata
endpoint (through the one notice watcher) and whether Ray lists its node as draining. When
its node dies the driver asks for spot capacity again and reports where that task ran and
what it read of the file named by its second argument in the lab's shared folder
(SPOTBURST_SHARED). Prints one JSON line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import ray
from ray.exceptions import RayError


@ray.remote(num_cpus=1, resources={"spot": 1}, max_retries=0)
def observe(out: str) -> None:
    from workloads.common.ray_private import draining_nodes
    from workloads.common.spot_notice import NoticeWatcher

    node_id = ray.get_runtime_context().get_node_id()
    watcher = NoticeWatcher(timeout_s=1.0)
    with open(out, "a") as log:
        log.write(json.dumps({"t": time.time(), "node": node_id, "endpoint": watcher.endpoint})
                  + "\n")
        log.flush()
        while True:
            notice = watcher.check()
            draining = node_id in draining_nodes()
            log.write(json.dumps({"t": time.time(), "notice": notice is not None,
                                  "notice_time": notice.time.timestamp() if notice else None,
                                  "draining": draining}) + "\n")
            log.flush()
            time.sleep(0.1)


@ray.remote(num_cpus=1, resources={"spot": 1})
def where(staged: str, example: str) -> dict[str, Any]:
    """This node's id, its shared folder, the SHA-256 of `staged` read from there, and how
    many samples the example script's loader (`example`'s load_dataset) reads of it."""
    import hashlib
    import os
    import runpy

    shared = os.environ.get("SPOTBURST_SHARED")
    found: dict[str, Any] = {"next_spot_node": ray.get_runtime_context().get_node_id(),
                             "shared": shared, "staged_sha256": None, "samples": None}
    if shared and os.path.exists(os.path.join(shared, staged)):
        with open(os.path.join(shared, staged), "rb") as data:
            found["staged_sha256"] = hashlib.sha256(data.read()).hexdigest()
        found["samples"] = len(runpy.run_path(example)["load_dataset"](staged))
    return found


def main(out: str, staged: str, example: str) -> None:
    ray.init(log_to_driver=False, logging_level=logging.ERROR)
    result: dict[str, Any] = {}
    try:
        ray.get(observe.remote(out))
    except RayError as error:
        result["observe_error"] = type(error).__name__
    found: dict[str, Any] = ray.get(where.remote(staged, example), timeout=240)
    result.update(found)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
