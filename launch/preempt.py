"""Real spot interruptions on a deployed stack now, through AWS FIS (`invoke preempt`).

Each spot node pool of a stack has an experiment template (components/spot_interruptions.py,
the stack output `spotInterruptionTemplates`); `preempt(options)` starts the pool's template
`--count` times. Each start interrupts one running spot instance of the pool, picked by FIS:
a rebalance recommendation and the two-minute notice, then the end. On a pool several
experiments share, FIS may pick a node of any of their RayClusters.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launch.options import AwsStackOptions
from stacks.outputs import REGION, read_interruption_templates
from vocab.errors import UserError
from workloads.common.options import OptionSpec, option

EXPERIMENT_TAG = "spotburst:run"
"""On every experiment this launcher starts: which `invoke preempt` (or run) started it."""


@dataclass(frozen=True, kw_only=True)
class PreemptOptions(AwsStackOptions):
    """`invoke preempt`: which stack, which spot pool, how many instances."""

    pool: str = option("spot-cpu", "the spot node pool whose running instances to interrupt "
                                   "(the dev stack's: spot-cpu, spot-gpu)")
    count: int = option(1, "instances to interrupt now: one FIS experiment each, FIS picks "
                           "the instance", minimum=1, maximum=100)


PREEMPT_SPEC = OptionSpec(PreemptOptions)


class PreemptError(UserError, ValueError):
    """A pool without a template, a stack without templates: one line naming the flag."""


class TemplateMissing(PreemptError):
    """The stack names a template that AWS does not have (destroyed outside Pulumi?)."""


@dataclass(frozen=True)
class Started:
    """One FIS experiment this launcher started."""

    pool: str
    template_id: str
    experiment_id: str
    scheduled_at: float
    started_at: float


class FisInterrupter:
    """Starts a stack's spot pools' experiment templates: one interrupted instance per
    start."""

    def __init__(self, stack: str, templates: dict[str, str], client: Any,
                 clock: Callable[[], float] = time.time, run_label: str | None = None) -> None:
        self.stack = stack
        self.templates = dict(templates)
        self.client = client
        self.clock = clock
        self.run_label = run_label or f"preempt-{uuid.uuid4().hex[:8]}"

    @classmethod
    def for_stack(cls, stack: str, outputs: dict[str, Any] | None = None,
                  endpoint_url: str | None = None, client: Any = None) -> FisInterrupter:
        """From the stack's outputs (`pulumi stack output`): its templates and region."""
        if outputs is None:
            from launch.pulumi_cli import stack_outputs

            outputs = stack_outputs(stack)
        templates = read_interruption_templates(outputs, stack)
        if client is None:
            import boto3

            client = boto3.client("fis", region_name=str(outputs.get(REGION) or ""),
                                  endpoint_url=endpoint_url)
        return cls(stack, templates, client)

    def template(self, pool: str) -> str:
        if pool not in self.templates:
            raise PreemptError(f"--pool: stack {self.stack!r} has no interruption template for "
                               f"{pool!r} (its spot pools: {', '.join(sorted(self.templates))})")
        return self.templates[pool]

    def interrupt(self, pool: str, count: int = 1, scheduled_at: float | None = None
                  ) -> list[Started]:
        """Start the pool's template `count` times (FIS picks each instance)."""
        from botocore.exceptions import ClientError

        template = self.template(pool)
        started = []
        for _ in range(count):
            try:
                reply = self.client.start_experiment(
                    clientToken=str(uuid.uuid4()), experimentTemplateId=template,
                    tags={EXPERIMENT_TAG: self.run_label})
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                    raise TemplateMissing(
                        f"--pool: stack {self.stack!r}'s interruption template {template} for "
                        f"{pool!r} does not exist in AWS (deleted outside Pulumi? `invoke up` "
                        "declares it again)") from None
                raise
            now = self.clock()
            started.append(Started(pool, template, reply["experiment"]["id"],
                                   now if scheduled_at is None else scheduled_at, now))
        return started


def preempt(options: PreemptOptions, outputs: dict[str, Any] | None = None,
            client: Any = None) -> list[Started]:
    """`invoke preempt`: interrupt `count` running spot instances of the pool now."""
    interrupter = FisInterrupter.for_stack(options.stack, outputs, options.endpoint_url, client)
    return interrupter.interrupt(options.pool, options.count)


def format_started(started: list[Started]) -> str:
    lines = [f"started FIS experiment {one.experiment_id} on pool {one.pool} (template "
             f"{one.template_id}): one running spot instance gets its rebalance "
             "recommendation and two-minute notice now" for one in started]
    return "\n".join(lines)
