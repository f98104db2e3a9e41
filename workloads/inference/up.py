"""`python -m workloads.inference.up --action up|down`: the long-running service brought up
or down by a short Ray Job on the cluster it runs on (`invoke infer-up --stack` and its
infer-down: the stack path's Ray Job through the head's port-forward). Up starts the
detached coordinator, which starts its workers, and outlives the job; its settings come in
a file that travels with the job's code (never on its command line), the command token in
the job's environment (COMMAND_TOKEN_ENV: never a file in the code folder, which is every
worker's working folder); the coordinator and its workers run without it in theirs. The
results folder's summary.json says where the store and the command endpoint are (no
token)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workloads.common.options import OptionError, OptionSpec, check_fields, option
from workloads.common.provenance import provenance
from workloads.common.ray_session import ray_session
from workloads.common.results import ResultsOptions, ResultsWriter
from workloads.common.storage import open_storage
from workloads.inference.endpoint import COMMAND_TOKEN_ENV, read_endpoint

ACTIONS = ("up", "down")


@dataclass(frozen=True, kw_only=True)
class ServiceJobOptions(ResultsOptions):
    action: str = option("up", "up: start the coordinator and its workers; down: stop them",
                         choices=ACTIONS)
    settings: Path | None = option(None, "JSON file of the coordinator's settings (for up); "
                                   "a null store means <out>/store")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.action == "up" and self.settings is None:
            raise OptionError("--settings", "required with --action up")

    def parameters(self) -> dict[str, Any]:
        return {**asdict(self), "settings": None if self.settings is None else str(self.settings)}


SERVICE_JOB_SPEC = OptionSpec(ServiceJobOptions, prog="python -m workloads.inference.up",
                              description="Bring the inference service up or down on this "
                              "Ray cluster.")


def run(options: ServiceJobOptions) -> int:
    from workloads.inference import service

    writer = ResultsWriter("inference", options.out, options.s3_endpoint)
    with ray_session():
        if options.action == "down":
            stopped = service.stop_coordinator()
            summary: dict[str, Any] = {"action": "down", "workers_stopped": stopped}
        else:
            assert options.settings is not None
            settings = json.loads(options.settings.read_text())
            settings["command_token"] = (os.environ.pop(COMMAND_TOKEN_ENV, None)
                                         or settings.get("command_token"))
            settings["store"] = settings.get("store") or f"{writer.location.rstrip('/')}/store"
            service.start_on_this_cluster(settings)
            published = read_endpoint(open_storage(settings["store"],
                                                   settings.get("s3_endpoint")))
            summary = {"action": "up", "store": settings["store"], "endpoint": published}
    print(json.dumps(summary), flush=True)
    writer.finish(summary, provenance(options.parameters(), {}, options.target, {}),
                  to_log=options.results_to_log)
    return 0


def main(argv: list[str] | None = None) -> int:
    return SERVICE_JOB_SPEC.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
