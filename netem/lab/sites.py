"""How a command runs at one site of a lab: the prefix that puts it there.

`ip netns exec <site namespace>` plus, in the private mount namespace that `ip netns exec`
creates, an empty read-only tmpfs over the OTHER site's storage directory, so a process at
one site cannot read the other site's files (as with two separate file systems). Then `env`
with the lab's variables (its marker, Ray token authentication), then `taskset` with the
site's CPUs (netem.lab.cpus), which every process started from there inherits.
"""

from __future__ import annotations

HIDE_AND_EXEC = 'mount -t tmpfs -o ro,size=4k spotburst-hidden "$1" && shift && exec "$@"'


def site_prefix(namespace: str, hidden_dir: str | None, env: dict[str, str],
                pinned: list[str]) -> list[str]:
    """The argv prefix that runs a command at a site (see the module docstring); `pinned`
    is the taskset prefix of the site's CPUs (empty: every CPU)."""
    prefix = ["ip", "netns", "exec", namespace]
    if hidden_dir is not None:
        prefix += ["sh", "-c", HIDE_AND_EXEC, "sh", hidden_dir]
    return prefix + ["env", *(f"{key}={value}" for key, value in sorted(env.items())), *pinned]
