"""FileEnv: your own environment class, imported from its file on the node that makes it
(an env runner, the learner, rl-evaluate): RLlib builds it from env_config
{"file": a shipped path (workloads.common.user_code.place), "class": its name}."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium

from vocab.errors import UserError
from workloads.common.options import OptionError
from workloads.common.user_code import import_file, local_path
from workloads.rl.options import ENV_FLAG as FLAG


def env_class(path: Path, name: str) -> Any:
    """The class `name` of the file, imported here: a gymnasium.Env subclass, or one line
    naming --env."""
    try:
        module = import_file(path, FLAG)
    except UserError as error:
        raise OptionError(FLAG, str(error).removeprefix(f"{FLAG}: ")) from None
    found = getattr(module, name, None)
    if found is None:
        raise OptionError(FLAG, f"{path} defines no {name!r} (expected FILE.py:CLASS, a "
                          "gymnasium.Env subclass in FILE.py)")
    if not (isinstance(found, type) and issubclass(found, gymnasium.Env)):
        raise OptionError(FLAG, f"{name} in {path} is not a gymnasium.Env subclass "
                          f"(a {type(found).__name__})")
    return found


class FileEnv(gymnasium.Wrapper):  # type: ignore[type-arg]
    """The user's env, wrapped unchanged (its spaces, reset, step, render, close)."""

    def __init__(self, config: dict[str, Any]) -> None:
        cls = env_class(local_path(config["file"]), config["class"])
        super().__init__(cls())
