"""`python -m workloads.rl.evaluate_checkpoint --run results/rl/<timestamp>`: how good is the
policy a run saved? The checkpoint (msgpack, never unpickled) is loaded into the run's
RLModule, built from the options the checkpoint recorded, in this process without Ray; it then
acts deterministically (tanh(μ), as the run's own evaluations) for one episode per env seed.

Results (`--out`, default `results/rl-evaluate/<timestamp>/`): summary.json (the checkpoint,
its iteration and env steps, the return its run recorded, and the returns now: each, mean,
std, min, max), provenance.json (the checkpoint's files and their sha256) and
records/episodes.jsonl (seed, return).
"""

from __future__ import annotations

import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workloads.common.options import OptionError, fail
from workloads.common.provenance import package_version, provenance
from workloads.common.results import ResultsWriter
from workloads.common.storage import LocalStorage, Storage
from workloads.rl.checkpoint import (
    META_FILE,
    STATE_FILE,
    Checkpoint,
    CheckpointError,
    checkpoint_names,
    read_checkpoint,
)
from workloads.rl.envs import check_env, env_descriptor, names_code
from workloads.rl.options import ENV_FLAG, RL_EVALUATE_SPEC, RlEvaluateOptions, RlOptions

WORKLOAD = "rl-evaluate"
PREFIX = "checkpoints/"


RANKED = {"best": re.compile(r"best_(-?\d+(?:\.\d+)?)_(\d+)"), "last": re.compile(r"iter_(\d+)")}
"""best ranks best_<return>_<iteration> by return, then iteration; last ranks iter_<n> by n."""


def choose(names: list[str], wanted: str) -> str:
    """The checkpoint `wanted` names among `names`: best (the highest return, the later on a
    tie), last (the highest iter_<n>) or a name, with or without its checkpoints/ prefix."""
    short = [name.removeprefix(PREFIX) for name in names]
    pattern = RANKED.get(wanted)
    if pattern is not None:
        ranked = [(tuple(float(g) for g in m.groups()), s)
                  for s in short if (m := pattern.fullmatch(s))]
        if not ranked:
            kind = "best_<return>_<iteration>" if wanted == "best" else "iter_<n>"
            raise OptionError("--checkpoint", f"the run has no {kind} checkpoint "
                              f"(it has: {', '.join(short) or 'none'})")
        return PREFIX + max(ranked)[1]
    name = wanted.removeprefix(PREFIX).strip("/")
    if name not in short:
        raise OptionError("--checkpoint", f"no checkpoint {name!r} in the run "
                          f"(it has: {', '.join(short) or 'none'})")
    return PREFIX + name


def run_options(checkpoint: Checkpoint) -> RlOptions:
    """The options the run recorded in the checkpoint (those this version still knows)."""
    recorded = checkpoint.meta.get("options")
    if not isinstance(recorded, dict):
        raise CheckpointError(f"{checkpoint.name}: {META_FILE} records no run options")
    # a file env's shipped copy was the job's; here its --env FILE.py is read as given
    known = set(RlOptions.__dataclass_fields__) - {"env_file"}
    try:
        return RlOptions(**{key: value for key, value in recorded.items() if key in known})
    except (OptionError, TypeError) as error:
        raise CheckpointError(f"{checkpoint.name}: its run options are not valid here: "
                              f"{error}") from None


def check_env_named(recorded: str, given: str | None, name: str) -> None:
    """The checkpoint's env is made here only if it imports no code, or the user named the
    same env with --env: a checkpoint is data, and what its meta.json names is not a choice
    to run code (a file beside it, any importable module). OptionError naming --env if not."""
    if given is not None and given != recorded:
        raise OptionError(ENV_FLAG, f"{name}: its run recorded the environment {recorded!r}, "
                          f"not {given!r}")
    if given is None and names_code(recorded):
        raise OptionError(ENV_FLAG, f"{name}: its run's environment {recorded!r} is code to "
                          f"import, never imported on a checkpoint's word: give --env "
                          f"{recorded} to run it")


def locate(options: RlEvaluateOptions) -> tuple[Path, Checkpoint, RlOptions]:
    """The run's folder, the checkpoint read from it and the run's options; OptionError
    naming --run or --checkpoint for anything that is not there or not a checkpoint."""
    folder = Path(str(options.run))
    if not folder.is_dir():
        raise OptionError("--run", f"no folder {str(folder)!r}")
    storage = LocalStorage(folder)
    names = checkpoint_names(storage)
    if not names:
        raise OptionError("--run", f"{str(folder)!r} holds no checkpoints/ (is it an RL run's "
                          "results folder?)")
    name = choose(names, options.checkpoint)
    try:
        checkpoint = read_checkpoint(storage, name)
        rl_options = run_options(checkpoint)
    except CheckpointError as error:
        raise OptionError("--checkpoint", str(error)) from None
    check_env_named(rl_options.env, options.env, name)
    try:
        check_env(rl_options.env)
    except OptionError as error:  # the recorded env cannot be made here
        raise OptionError("--checkpoint", f"{name}: its {error}") from None
    return folder, checkpoint, rl_options


def evaluate(options: RlEvaluateOptions, say: Callable[[str], None]) -> Storage:
    """Evaluate the chosen checkpoint and write the results; returns their storage."""
    from workloads.rl.algorithm import policy_module, sac_config
    from workloads.rl.evaluation import policy_returns

    run_folder, checkpoint, rl_options = locate(options)
    meta = checkpoint.meta
    recorded = meta.get("eval_return")
    say(f"{checkpoint.name}: iteration {meta.get('iteration')}, {meta.get('env_steps')} env "
        f"steps, its evaluation then "
        f"{'none' if recorded is None else format(recorded, '.1f')}; building the "
        f"{rl_options.env} policy (hidden {rl_options.hidden})")
    try:
        module = policy_module(rl_options, checkpoint.state)
    except (KeyError, RuntimeError, ValueError) as error:  # a state of other shapes or keys
        raise OptionError("--checkpoint", f"{checkpoint.name}: its state does not fit the "
                          f"run's network: {' '.join(str(error).split())[:300]}") from None
    seeds = [options.seed + episode for episode in range(options.episodes)]

    def progress(index: int, episode_return: float) -> None:
        say(f"episode {index + 1}/{len(seeds)} (env seed {seeds[index]}): return "
            f"{episode_return:.1f}")

    normalize = bool(sac_config(rl_options).normalize_actions)  # as the run's env runners
    descriptor, env_config = env_descriptor(rl_options.env)
    returns = policy_returns(module, descriptor, normalize, seeds, progress,
                             env_config=env_config)
    summary: dict[str, Any] = {
        "run": str(options.run),
        "checkpoint": checkpoint.name,
        "env": rl_options.env,
        "iteration": meta.get("iteration"),
        "env_steps": meta.get("env_steps"),
        "recorded_eval_return": meta.get("eval_return"),
        "episodes": len(returns),
        "returns": returns,
        "mean_return": statistics.fmean(returns),
        "std_return": statistics.pstdev(returns),
        "min_return": min(returns),
        "max_return": max(returns),
    }
    writer = ResultsWriter(WORKLOAD, options.out)
    writer.add_records("episodes", [{"seed": seed, "return": value}
                                    for seed, value in zip(seeds, returns, strict=True)])
    files = run_folder / checkpoint.name
    document = provenance(
        options.parameters(),
        {"checkpoint_state": files / STATE_FILE, "checkpoint_meta": files / META_FILE},
        "local",
        {"first_env_seed": options.seed},
    )
    document["torch"] = package_version("torch")
    document["gymnasium"] = package_version("gymnasium")
    document["run_options"] = rl_options.parameters()
    results = writer.finish(summary, document)
    say(f"mean return {summary['mean_return']:.1f} ± {summary['std_return']:.1f} over "
        f"{len(returns)} episodes (min {summary['min_return']:.1f}, max "
        f"{summary['max_return']:.1f}); results: {results.uri}")
    return results


def run(options: RlEvaluateOptions) -> int:
    try:
        evaluate(options, lambda line: print(line, flush=True))
    except OptionError as error:
        return fail(error)
    return 0


def main(argv: list[str] | None = None) -> int:
    return RL_EVALUATE_SPEC.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
