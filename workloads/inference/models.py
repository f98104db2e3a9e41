"""The models the cluster serves: multi-layer perceptrons trained on scikit-learn's bundled
digits in seconds, stored as plain arrays (`.npz`, read with `allow_pickle=False`: nothing is
ever unpickled from the file store), and test sets / labels as `.npy` arrays.

Sizes of clearly different cost per query: `small` (one hidden layer of 32), `medium` (two
of 256) and `large` (three of 512). A worker answers one query at a time, so a query's latency is
one forward pass of one image.
"""

from __future__ import annotations

import functools
import io
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from vocab.errors import UserError

MODEL_SIZES: dict[str, tuple[int, ...]] = {"small": (32,), "medium": (256, 256),
                                           "large": (512, 512, 512)}
"""Hidden layer widths per model name."""
TRAINING_EPOCHS = {"small": 60, "medium": 30, "large": 20}
"""Enough for ≥ 95 % held-out accuracy; the wide networks learn in fewer epochs."""
MAX_LAYERS = 32
MAX_MODEL_BYTES = 256 * 1024 * 1024
"""A model's arrays, uncompressed: what a worker holds beside the test set."""


class ModelFileError(UserError, ValueError):
    """A file in the store is not a model, test set or label array this cluster can read."""


@dataclass(frozen=True)
class Mlp:
    """A ReLU network ending in a linear layer; `predict` returns class indices."""

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]

    def predict_one(self, query: np.ndarray) -> int:
        activation = query
        last = len(self.weights) - 1
        for index, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            activation = activation @ weight + bias
            if index < last:
                activation = np.maximum(activation, 0.0)
        return int(np.argmax(activation))

    def to_bytes(self) -> bytes:
        arrays = {f"w{i}": w for i, w in enumerate(self.weights)}
        arrays |= {f"b{i}": b for i, b in enumerate(self.biases)}
        buffer = io.BytesIO()
        np.savez(buffer, **cast(dict[str, Any], arrays))  # the stubs' **kwargs are bools
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "model") -> Mlp:
        """The network in an `.npz` of arrays w0, b0, w1, b1, ... (docs/inference.md);
        each array's declared size is checked against the archive before it is read."""
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                members = archive.infolist()
                declared = sum(member.file_size for member in members)
                if declared > MAX_MODEL_BYTES:
                    raise ValueError(f"its arrays take {declared} bytes, more than "
                                     f"{MAX_MODEL_BYTES}")
                keys = {member.filename.removesuffix(".npy") for member in members}
                layers = len([key for key in keys if key.startswith("w")])
                if not 0 < layers <= MAX_LAYERS or keys != (
                        {f"w{i}" for i in range(layers)} | {f"b{i}" for i in range(layers)}):
                    raise ValueError(f"expected arrays w0, b0, ... of 1 to {MAX_LAYERS} "
                                     f"layers, got {', '.join(sorted(keys))[:120]}")
                arrays = {key: _member_array(archive, key) for key in sorted(keys)}
        except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as error:
            raise ModelFileError(f"{name}: not a model file ({error})") from None
        weights = tuple(arrays[f"w{i}"].astype(np.float32) for i in range(layers))
        biases = tuple(arrays[f"b{i}"].astype(np.float32) for i in range(layers))
        for index, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
            if weight.ndim != 2 or bias.shape != (weight.shape[1],) or 0 in weight.shape:
                raise ModelFileError(f"{name}: layer {index} has weights {weight.shape} and "
                                     f"biases {bias.shape}; expected (IN, OUT) and (OUT,)")
        for before, after in zip(weights, weights[1:], strict=False):
            if before.shape[1] != after.shape[0]:
                raise ModelFileError(f"{name}: layer shapes {before.shape} and {after.shape} "
                                     "do not chain")
        return cls(weights, biases)

    @property
    def inputs(self) -> int:
        return int(self.weights[0].shape[0])


def array_to_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _member_array(archive: zipfile.ZipFile, key: str) -> np.ndarray:
    """One array of an .npz, its header checked against the member's real size first."""
    return array_from_bytes(archive.read(f"{key}.npy"), key)


def array_from_bytes(data: bytes, name: str) -> np.ndarray:
    """The numeric `.npy` array in `data` (its header checked against its size first)."""
    array_shape(data, name)
    try:
        array: np.ndarray = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ModelFileError(f"{name}: not a .npy array ({error})") from None
    return array


def array_shape(data: bytes, name: str, kinds: str = "biuf") -> tuple[int, ...]:
    """The shape of the `.npy` array in `data`, from its header, refused unless the data
    really holds that many elements (a header can claim anything) and its element kind is
    one of `kinds` (numpy's: b bool, i/u integers, f floats)."""
    buffer = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buffer)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, _, dtype = read_header(buffer)
    except (ValueError, OSError, SyntaxError, EOFError) as error:
        raise ModelFileError(f"{name}: not a .npy array ({error})") from None
    if dtype.hasobject or dtype.kind not in kinds:
        raise ModelFileError(f"{name}: a .npy array of {dtype}; expected "
                             f"{' or '.join(KIND_WORDS[kind] for kind in kinds)}")
    claimed = math.prod(int(size) for size in shape) * dtype.itemsize
    present = len(data) - buffer.tell()
    if claimed != present:
        raise ModelFileError(f"{name}: its header claims an array of shape {tuple(shape)} "
                             f"({claimed} bytes) but the file holds {present} bytes after it")
    return tuple(int(size) for size in shape)


KIND_WORDS = {"b": "booleans", "i": "integers", "u": "unsigned integers", "f": "floats"}


@dataclass(frozen=True)
class Bundle:
    """What `make_bundle` writes: file name -> bytes, ready for the file store."""

    files: dict[str, bytes]
    test_accuracy: dict[str, float]


@functools.cache
def train_mlp(size: str, seed: int = 0) -> tuple[Mlp, np.ndarray, np.ndarray, float]:
    """A `size` network trained on 75 % of digits; returns it, the other 25 % (the raw
    pixels 0-16 as uint8: a test set of one byte per feature; the network's first layer
    takes the 1/16 scale it was trained at) with their labels, and its accuracy on them.
    Deterministic in
    (size, seed), so trained once per process (the large one takes a minute on a busy
    machine; the benchmark's five runs share it). Callers must not modify what it returns."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    pixels = digits.data.astype(np.uint8)
    train_x, test_x, train_y, test_y = train_test_split(
        pixels, digits.target, test_size=0.25, random_state=seed, stratify=digits.target)
    network = MLPClassifier(hidden_layer_sizes=MODEL_SIZES[size],
                            max_iter=TRAINING_EPOCHS[size], random_state=seed)
    import warnings

    from threadpoolctl import threadpool_limits

    # one BLAS thread: on a machine whose cores are busy, more only queue behind each other
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")  # a capped max_iter warns that it did not converge
        network.fit(train_x / 16.0, train_y)
    weights = [np.asarray(w, np.float32) for w in network.coefs_]
    weights[0] = weights[0] / np.float32(16.0)  # raw pixels in, as trained on pixels / 16
    mlp = Mlp(tuple(weights), tuple(np.asarray(b, np.float32) for b in network.intercepts_))
    accuracy = float(np.mean([mlp.predict_one(x) == y for x, y in zip(test_x, test_y,
                                                                       strict=True)]))
    return mlp, test_x, test_y.astype(np.uint8), accuracy


def make_bundle(sizes: tuple[str, ...] = ("small", "large"), repeat: int = 1,
                seed: int = 0) -> Bundle:
    """`<size>_model`, `<size>_testset`, `<size>_label` per size (like the seed's
    `vit_model` / `vit_testset` / `vit_label`); the test set is the held-out digits
    repeated `repeat` times, so a job can be as long as a run needs."""
    files: dict[str, bytes] = {}
    accuracy: dict[str, float] = {}
    for size in sizes:
        mlp, test_x, test_y, accuracy[size] = train_mlp(size, seed)
        files[f"{size}_model"] = mlp.to_bytes()
        files[f"{size}_testset"] = array_to_bytes(np.tile(test_x, (repeat, 1)))
        files[f"{size}_label"] = array_to_bytes(np.tile(test_y, repeat))
    return Bundle(files, accuracy)


DEMO_SUFFIXES = {"_model": ".npz", "_testset": ".npy", "_label": ".npy"}


def write_demo_files(folder: Path, sizes: tuple[str, ...] = ("small",),
                     repeat: int = 1, seed: int = 0) -> list[Path]:
    """The demo's model, test set and labels per size as local files (`small_model.npz`,
    `small_testset.npy`, `small_label.npy`), ready for files-put; returns them."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in make_bundle(sizes, repeat, seed).files.items():
        suffix = next(end for key, end in DEMO_SUFFIXES.items() if name.endswith(key))
        path = folder / f"{name}{suffix}"
        path.write_bytes(data)
        written.append(path)
    return written
