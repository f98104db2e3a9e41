"""Every private Ray API the launchers use, in one place: how a client process (the Jobs
client, a driver started after another in the same process) takes up the cluster's token.

Each says which public API it stands in for, or why there is none; errors from Ray come
through as Ray raises them. tests/workloads/test_ray_private.py imports every private name
listed in PRIVATE and checks the parameters we pass, so a Ray upgrade that moves or changes
one fails there, naming it. The workloads' own seam is workloads/common/ray_private.py.
"""

from __future__ import annotations

import logging

from workloads.common.ray_private import Private, load_private

PRIVATE: dict[str, Private] = {
    "maybe_enable_token_auth_if_token_available": Private(
        "ray._private.authentication.authentication_token_setup",
        "maybe_enable_token_auth_if_token_available", {"": ("warn_if_disabled",)},
        "none: ray.init() does this for a driver; a JobSubmissionClient does not, and sends "
        "no token unless the process is in token mode"),
    "AuthenticationTokenLoader": Private(
        "ray._raylet", "AuthenticationTokenLoader", {"instance": (), "reset_cache": ()},
        "none: Ray caches the token it found once per process"),
    "Config": Private(
        "ray._raylet", "Config", {"initialize": ("config_list",)},
        "none: Ray caches RAY_AUTH_MODE once per process, in its C++ config"),
}
"""Name here -> where Ray keeps it, what we call on it, and why it is not public."""


def use_token_auth_if_available() -> None:
    """Ray 2.60 clusters started locally require a token, and a Jobs client sends one only in
    token mode. When RAY_AUTH_MODE is unset and a token can be found (~/.ray/auth_token,
    RAY_AUTH_TOKEN_PATH, RAY_AUTH_TOKEN), switch this process to token mode the way
    `ray.init()` does when it joins a cluster (the mode is cached when Ray is imported, so
    setting the variable alone is too late). Ray's warning about it is left out: it would
    precede a task's one-line error."""
    enable = load_private(PRIVATE, "maybe_enable_token_auth_if_token_available")
    setup_logger = logging.getLogger(enable.__module__)
    level = setup_logger.level
    setup_logger.setLevel(logging.ERROR)
    try:
        enable(warn_if_disabled=False)
    finally:
        setup_logger.setLevel(level)


def reload_auth() -> None:
    """Make Ray read its auth mode and token from the environment again (a driver of one lab
    after another, or after `import ray` saw no token)."""
    load_private(PRIVATE, "Config").initialize("")
    load_private(PRIVATE, "AuthenticationTokenLoader").instance().reset_cache()
