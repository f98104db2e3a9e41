"""A driver of a spot lab for the tests: `python tests/spotlab/spot_driver.py OUT`.

A task on a spot node records, every 0.1 s, what it sees: the notice on its node's metadata
endpoint (through the one notice watcher) and whether Ray lists its node as draining. When
its node dies the driver asks for spot capacity again and reports where that task ran.
Prints one JSON line.
"""

from __future__ import annotations

import json
import logging
import sys
import time

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
def where() -> str:
    return ray.get_runtime_context().get_node_id()


def main(out: str) -> None:
    ray.init(log_to_driver=False, logging_level=logging.ERROR)
    result: dict[str, object] = {}
    try:
        ray.get(observe.remote(out))
    except RayError as error:
        result["observe_error"] = type(error).__name__
    result["next_spot_node"] = ray.get(where.remote(), timeout=120)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
