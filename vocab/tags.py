"""The tags that mark what a stack owns on AWS: one key, read by the leftover listing.

Components tag every resource with `stack_tags(stack)`, so `invoke destroy` can list exactly
what of this stack is still billable. Stacks deployed before this key existed carry the pair
`project=spotburst, stack=<name>` (stacks/program.py); that pair is recognised too.
"""

from __future__ import annotations

from collections.abc import Mapping

STACK_TAG_KEY = "spotburst:stack"
_PROJECT = "spotburst"


def stack_tags(stack: str) -> dict[str, str]:
    """The tags every resource of `stack` carries."""
    return {STACK_TAG_KEY: stack}


def carries_stack_tag(tags: Mapping[str, str], stack: str) -> bool:
    """Does a resource with `tags` belong to `stack`?"""
    if tags.get(STACK_TAG_KEY) == stack:
        return True
    return tags.get("project") == _PROJECT and tags.get("stack") == stack
