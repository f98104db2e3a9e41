"""Elastic data-parallel training on spot nodes: any Ray Train V2 script, run elastic, with the
spot notice wired into the run (docs/elastic.md).

A script opts in to losing no step at a preemption with one call per step, on every rank:

    from workloads.elastic import checkpoint_due

    for step, batch in enumerate(loader):
        ...                                   # one optimizer step
        if checkpoint_due():                  # a notice came (or a resize, or --checkpoint-every)
            ray.train.report(metrics, checkpoint=...)   # the script's own checkpoint code
"""

from __future__ import annotations


def checkpoint_due() -> bool:
    """Call after each training step, on every rank. True when this step is to be checkpointed
    now — a spot notice reached a node of the run, the worker count is about to change, or
    `--checkpoint-every` steps passed — then report a checkpoint of this step with
    `ray.train.report`. After a notice (or resize) checkpoint the report holds the ranks until
    Ray Train restarts them from it, so no step is computed twice."""
    from workloads.elastic.worker import current

    run = current()
    run.mark_step()
    return run.due() is not None
