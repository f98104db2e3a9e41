"""Which environments the RL workload takes: any registered Gymnasium environment whose
actions are continuous (a Box space), checked before anything starts."""

from __future__ import annotations

from workloads.common.options import OptionError


def check_env(name: str) -> None:
    """OptionError naming --env unless `name` is a Gymnasium id with a Box action space."""
    import gymnasium

    try:
        gymnasium.spec(name)
    except gymnasium.error.Error as error:
        raise OptionError("--env", f"{name!r} is not a Gymnasium environment "
                          f"({' '.join(str(error).split())})") from None
    try:
        env = gymnasium.make(name)
    except Exception as error:  # a missing simulator package, a broken env
        raise OptionError("--env", f"{name!r} cannot be made here: "
                          f"{type(error).__name__}: {' '.join(str(error).split())}") from None
    try:
        space = env.action_space
    finally:
        env.close()
    if not isinstance(space, gymnasium.spaces.Box):
        raise OptionError("--env", f"{name!r} has {type(space).__name__} actions; SAC here "
                          f"needs continuous (Box) actions, e.g. Pendulum-v1")
