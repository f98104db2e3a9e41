"""Checkpoints that are safe to read back from a bucket: msgpack with numeric arrays only.

A bucket is a trust boundary, so nothing read from one is unpickled: a checkpoint is one
`state.msgpack` (the learner's state: network weights, optimizer moments, α) and one
`meta.json` (iteration, env steps, evaluation return, the run's options). Arrays travel as
`{"__ndarray__": [dtype, shape, bytes]}` and are rebuilt only for plain numeric dtypes; no
msgpack extension type, no object array, no class is ever instantiated from the file.
(RLlib's own `save_to_path` always pickles a `class_and_ctor_args.pkl`, and its msgpack
reader goes through msgpack_numpy, which unpickles object arrays: neither is used here.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from vocab.errors import UserError
from workloads.common.storage import Storage

FORMAT = "spotburst-rl-checkpoint/1"
STATE_FILE = "state.msgpack"
META_FILE = "meta.json"
ARRAY_KEY = "__ndarray__"
SAFE_KINDS = frozenset("biuf")  # bool, signed and unsigned integers, floats


class CheckpointError(UserError, ValueError):
    """A checkpoint that is missing, of another format, or holds something not allowed."""


def _to_plain(value: Any) -> Any:
    """msgpack's `default`: arrays and tensors as typed bytes, numpy scalars as numbers."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in SAFE_KINDS:
            raise TypeError(f"array of dtype {value.dtype} cannot be checkpointed")
        array = np.ascontiguousarray(value)
        return {ARRAY_KEY: [array.dtype.str, list(array.shape), array.tobytes()]}
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} cannot be checkpointed")


def _from_plain(document: dict[Any, Any]) -> Any:
    """msgpack's `object_hook`: an array entry back to a numpy array, checked."""
    if ARRAY_KEY not in document:
        return document
    if len(document) != 1:
        raise CheckpointError(f"{ARRAY_KEY} entry with other keys")
    try:
        dtype_text, shape, raw = document[ARRAY_KEY]
        dtype = np.dtype(dtype_text)
        if dtype.kind not in SAFE_KINDS or dtype.fields is not None:
            raise CheckpointError(f"array dtype {dtype_text!r} is not a plain number")
        return np.frombuffer(raw, dtype=dtype).reshape([int(n) for n in shape]).copy()
    except CheckpointError:
        raise
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"bad array entry: {error}") from None


def _refuse_extension(code: int, data: bytes) -> Any:
    raise CheckpointError(f"msgpack extension type {code} is not allowed in a checkpoint")


def pack_state(state: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb({"format": FORMAT, "state": state}, default=_to_plain,
                                  use_bin_type=True)
    return packed


def unpack_state(data: bytes) -> dict[str, Any]:
    try:
        document = msgpack.unpackb(data, raw=False, strict_map_key=False,
                                   object_hook=_from_plain, ext_hook=_refuse_extension)
    except CheckpointError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        raise CheckpointError(f"not a msgpack checkpoint: {error}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CheckpointError(f"not a {FORMAT} checkpoint")
    state = document["state"]
    if not isinstance(state, dict):
        raise CheckpointError("checkpoint state is not a mapping")
    return state


@dataclass(frozen=True)
class Checkpoint:
    name: str  # e.g. checkpoints/iter_10 or checkpoints/best_-153.2_12
    state: dict[str, Any]
    meta: dict[str, Any]


def iteration_name(iteration: int) -> str:
    return f"checkpoints/iter_{iteration}"


def best_name(evaluation_return: float, iteration: int) -> str:
    return f"checkpoints/best_{evaluation_return:.1f}_{iteration}"


def write_checkpoint(storage: Storage, name: str, packed_state: bytes,
                     meta: dict[str, Any]) -> list[str]:
    """Write the state (from `pack_state`) then its meta (a checkpoint with meta.json is
    complete); returns the file names written."""
    files = [f"{name}/{STATE_FILE}", f"{name}/{META_FILE}"]
    storage.write_bytes(files[0], packed_state)
    storage.write_bytes(files[1], (json.dumps({"format": FORMAT, **meta}, indent=2,
                                              sort_keys=True) + "\n").encode())
    return files


def read_checkpoint(storage: Storage, name: str) -> Checkpoint:
    if f"{name}/{META_FILE}" not in storage.names():
        raise CheckpointError(f"{name}: no such checkpoint (no {META_FILE})")
    try:
        meta = json.loads(storage.read_bytes(f"{name}/{META_FILE}"))
    except ValueError as error:  # not JSON, not UTF-8
        raise CheckpointError(f"{name}: {META_FILE} is not JSON: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{name}: {META_FILE} is not a {FORMAT} file")
    try:
        state = unpack_state(storage.read_bytes(f"{name}/{STATE_FILE}"))
    except CheckpointError as error:
        raise CheckpointError(f"{name}: {error}") from None
    except FileNotFoundError:
        raise CheckpointError(f"{name}: no {STATE_FILE} beside its {META_FILE}") from None
    return Checkpoint(name=name, state=state, meta=meta)


def checkpoint_names(storage: Storage) -> list[str]:
    """Complete checkpoints in the storage (those with a meta.json), sorted by name."""
    return sorted(n.removesuffix(f"/{META_FILE}") for n in storage.names()
                  if n.startswith("checkpoints/") and n.endswith(f"/{META_FILE}"))
