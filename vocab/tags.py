"""The tags that mark what a stack owns on AWS: one key, read by the leftover listing.

Components tag every resource with `stack_tags(stack)`, so `invoke destroy` can list exactly
what of this stack is still billable. Stacks deployed before this key existed carry the pair
`project=spotburst, stack=<name>` (stacks/program.py); that pair is recognised too.
"""

from __future__ import annotations

from collections.abc import Mapping

STACK_TAG_KEY = "spotburst:stack"
NODE_POOL_TAG_KEY = "spotburst:node-pool"
"""On the spot cluster's EC2 instances: the node pool that launched them (what a FIS
experiment template selects its targets by)."""
_PROJECT = "spotburst"


def stack_tags(stack: str) -> dict[str, str]:
    """The tags every resource of `stack` carries."""
    return {STACK_TAG_KEY: stack}


def node_pool_instance_tags(stack: str, pool: str) -> dict[str, str]:
    """The tags every EC2 instance of a node pool of `stack` carries."""
    return {STACK_TAG_KEY: stack, NODE_POOL_TAG_KEY: pool}


def carries_stack_tag(tags: Mapping[str, str], stack: str) -> bool:
    """Does a resource with `tags` belong to `stack`?"""
    if tags.get(STACK_TAG_KEY) == stack:
        return True
    return tags.get("project") == _PROJECT and tags.get("stack") == stack
