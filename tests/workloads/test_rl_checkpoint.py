"""RL checkpoints: weights round-trip through a storage bit for bit, and a file that would
need unpickling or holds anything but plain numbers is refused (nothing from a bucket is ever
unpickled)."""

from __future__ import annotations

import pickle
from pathlib import Path

import msgpack
import numpy as np
import pytest
import torch

from workloads.common.storage import LocalStorage
from workloads.rl.checkpoint import (
    CheckpointError,
    best_name,
    checkpoint_names,
    iteration_name,
    pack_state,
    read_checkpoint,
    unpack_state,
    write_checkpoint,
)


def learner_like_state() -> dict[str, object]:
    """The shapes of RLlib's learner state: module weights (numpy and torch), optimizer
    moments keyed by integers, hyper-parameters, None."""
    rng = np.random.default_rng(0)
    return {
        "learner": {
            "rl_module": {"default_policy": {
                "pi.net.mlp.0.weight": rng.standard_normal((32, 3)).astype(np.float32),
                "qf.net.mlp.0.bias": torch.arange(5, dtype=torch.float64),
                "log_alpha": np.float32(-1.6),
            }},
            "optimizer": {"state": {0: {"step": torch.tensor(12.0),
                                        "exp_avg": torch.ones(2, 2)}},
                          "param_groups": [{"lr": 5e-4, "betas": (0.9, 0.999),
                                            "amsgrad": False, "foreach": None,
                                            "params": [0, 1]}]},
            "counters": np.array([1, 2, 3], dtype=np.int64),
            "mask": np.array([True, False]),
        }
    }


def test_weights_round_trip_through_a_folder(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    state = learner_like_state()
    files = write_checkpoint(storage, iteration_name(10), pack_state(state),
                             {"iteration": 10, "env_steps": 2000})
    write_checkpoint(storage, best_name(-153.26, 12), pack_state(state), {"iteration": 12})

    assert files == ["checkpoints/iter_10/state.msgpack", "checkpoints/iter_10/meta.json"]
    assert checkpoint_names(storage) == ["checkpoints/best_-153.3_12", "checkpoints/iter_10"]
    back = read_checkpoint(storage, "checkpoints/iter_10")
    assert back.meta["env_steps"] == 2000
    learner = back.state["learner"]
    module = learner["rl_module"]["default_policy"]
    original = state["learner"]["rl_module"]["default_policy"]  # type: ignore[index]
    np.testing.assert_array_equal(module["pi.net.mlp.0.weight"],
                                  original["pi.net.mlp.0.weight"])
    assert module["pi.net.mlp.0.weight"].dtype == np.float32
    np.testing.assert_array_equal(module["qf.net.mlp.0.bias"], np.arange(5, dtype=np.float64))
    assert module["log_alpha"] == pytest.approx(-1.6)
    assert learner["optimizer"]["state"][0]["exp_avg"].shape == (2, 2)  # integer keys kept
    assert learner["optimizer"]["param_groups"][0]["betas"] == [0.9, 0.999]
    assert learner["mask"].dtype == np.bool_
    # the file is plain msgpack: no pickle opcode stream, readable without our code
    raw = (tmp_path / "checkpoints/iter_10/state.msgpack").read_bytes()
    assert msgpack.unpackb(raw, strict_map_key=False)["format"].startswith("spotburst-rl")


def test_a_checkpoint_without_its_meta_is_not_one(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    storage.write_bytes("checkpoints/iter_3/state.msgpack", pack_state({"a": 1}))
    assert checkpoint_names(storage) == []
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        read_checkpoint(storage, "checkpoints/iter_3")


def test_objects_are_refused_when_writing() -> None:
    with pytest.raises(TypeError, match="dtype object"):
        pack_state({"bad": np.array([object()], dtype=object)})
    with pytest.raises(TypeError, match="Path cannot be checkpointed"):
        pack_state({"bad": Path("/etc")})


@pytest.mark.parametrize("document, problem", [
    ({"format": "spotburst-rl-checkpoint/1",
      "state": {"w": {"__ndarray__": ["|O", [1], pickle.dumps(object())]}}}, "not a plain number"),
    ({"format": "spotburst-rl-checkpoint/1",
      "state": {"w": {"__ndarray__": ["<f4", [3], b"\x00" * 4]}}}, "bad array entry"),
    ({"format": "spotburst-rl-checkpoint/1",
      "state": {"w": msgpack.ExtType(1, pickle.dumps(object()))}}, "extension type 1"),
    ({"format": "pickle", "state": {}}, "not a spotburst-rl-checkpoint/1"),
])
def test_a_crafted_file_is_refused_not_unpickled(document: object, problem: str) -> None:
    data = msgpack.packb(document, use_bin_type=True)
    with pytest.raises(CheckpointError, match=problem):
        unpack_state(data)


def test_a_pickle_is_not_a_checkpoint() -> None:
    with pytest.raises(CheckpointError):
        unpack_state(pickle.dumps({"format": "spotburst-rl-checkpoint/1", "state": {}}))
