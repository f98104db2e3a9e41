"""Which environments the RL workload takes: a registered Gymnasium id (Gymnasium's
`module:EnvId` form too), or your own `gymnasium.Env` subclass from a file (`my_env.py:MyEnv`),
whose actions are continuous (a Box space), checked before anything starts. A file's class
reaches every env runner and the learner as `FileEnv` (an importable wrapper that imports the
file on the node, from the copy shipped with the job): never pickled from the driver."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from vocab.errors import UserError
from workloads.common.options import OptionError
from workloads.common.user_code import parsed, place, top_level_names
from workloads.rl.options import ENV_FLAG as FLAG


def env_file(env: str) -> tuple[Path | None, str]:
    """`my_env.py:MyEnv` -> (the file, the class name); anything else -> (None, the id)."""
    head, separator, tail = env.rpartition(":")
    if separator and head.endswith(".py"):
        return Path(head), tail
    return None, env


def names_code(env: str) -> bool:
    """`env` makes this process import code beyond Gymnasium's own registry: a file
    (`FILE.py:CLASS`) or a module (`module:EnvId`)."""
    return ":" in env


def env_descriptor(env: str, shipped: Path | None = None) -> tuple[Any, dict[str, Any]]:
    """What RLlib's `.environment()` takes for `env`: the Gymnasium id, or FileEnv and the
    env_config that finds the file on every node (`shipped`: the copy the job carries)."""
    path, name = env_file(env)
    if path is None:
        return env, {}
    from workloads.rl.user_env import FileEnv

    return FileEnv, {"file": place(shipped or path), "class": name}


def make_env(descriptor: Any, env_config: dict[str, Any] | None = None) -> Any:
    """A new env of a descriptor (see env_descriptor)."""
    import gymnasium

    if isinstance(descriptor, str):
        return gymnasium.make(descriptor)
    return descriptor(env_config or {})


def check_env_file(env: str) -> None:
    """Read, not run (a cluster installs its --requirements): the file defines the class."""
    path, name = env_file(env)
    if path is None:
        return
    try:
        names = top_level_names(parsed(path, FLAG))
    except UserError as error:
        raise OptionError(FLAG, str(error).removeprefix(f"{FLAG}: ")) from None
    if name not in names:
        raise OptionError(FLAG, f"{path} defines no {name!r} (expected FILE.py:CLASS, a "
                          "gymnasium.Env subclass in FILE.py)")


def check_env(name: str, shipped: Path | None = None) -> None:
    """OptionError naming --env unless `name` is a Gymnasium id, or a file's gymnasium.Env
    subclass, with a Box action space (made here once to see it)."""
    import gymnasium

    path, class_name = env_file(name)
    if path is not None:
        if not (shipped or path).is_file():
            raise OptionError(FLAG, f"{path}: no such file (expected FILE.py:CLASS)")
        from workloads.rl.user_env import env_class

        env_class(shipped or path, class_name)
    else:
        module, _, env_id = name.rpartition(":")
        try:
            if module:  # Gymnasium's module:EnvId: the module registers the id
                importlib.import_module(module)
            gymnasium.spec(env_id)
        except ImportError as error:
            raise OptionError(FLAG, f"{name!r}: its module {module!r} cannot be imported here "
                              f"({type(error).__name__}: {error})") from None
        except gymnasium.error.Error as error:
            raise OptionError(FLAG, f"{name!r} is not a Gymnasium environment "
                              f"({' '.join(str(error).split())})") from None
    try:
        env = make_env(*env_descriptor(name, shipped))
    except Exception as error:  # a missing simulator package, a broken env
        raise OptionError(FLAG, f"{name!r} cannot be made here: "
                          f"{type(error).__name__}: {' '.join(str(error).split())}") from None
    try:
        space = env.action_space
    finally:
        env.close()
    if not isinstance(space, gymnasium.spaces.Box):
        raise OptionError(FLAG, f"{name!r} has {type(space).__name__} actions; SAC here "
                          f"needs continuous (Box) actions, e.g. Pendulum-v1")
