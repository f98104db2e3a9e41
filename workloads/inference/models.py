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
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from vocab.errors import UserError

MODEL_SIZES: dict[str, tuple[int, ...]] = {"small": (32,), "medium": (256, 256),
                                           "large": (512, 512, 512)}
"""Hidden layer widths per model name."""


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
        try:
            archive = np.load(io.BytesIO(data), allow_pickle=False)
            if not isinstance(archive, np.lib.npyio.NpzFile):
                raise ValueError("an array, not an .npz archive of layers")
            with archive:
                layers = len([key for key in archive.files if key.startswith("w")])
                weights = tuple(np.asarray(archive[f"w{i}"], np.float32) for i in range(layers))
                biases = tuple(np.asarray(archive[f"b{i}"], np.float32) for i in range(layers))
        except (ValueError, KeyError, OSError, EOFError) as error:
            raise ModelFileError(f"{name}: not a model file ({error})") from None
        if not weights:
            raise ModelFileError(f"{name}: not a model file (no layers)")
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


def array_from_bytes(data: bytes, name: str) -> np.ndarray:
    try:
        array: np.ndarray = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError) as error:
        raise ModelFileError(f"{name}: not a .npy array ({error})") from None
    return array


def array_shape(data: bytes, name: str) -> tuple[int, ...]:
    """The shape of the `.npy` array in `data`, from its header alone (checking a command's
    files must not copy a test set of a hundred megabytes); refuses what np.load would."""
    buffer = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buffer)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, _, dtype = read_header(buffer)
    except (ValueError, OSError, SyntaxError) as error:
        raise ModelFileError(f"{name}: not a .npy array ({error})") from None
    if dtype.hasobject:
        raise ModelFileError(f"{name}: not a .npy array (objects would need unpickling)")
    return tuple(int(size) for size in shape)


@dataclass(frozen=True)
class Bundle:
    """What `make_bundle` writes: file name -> bytes, ready for the file store."""

    files: dict[str, bytes]
    test_accuracy: dict[str, float]


@functools.cache
def train_mlp(size: str, seed: int = 0) -> tuple[Mlp, np.ndarray, np.ndarray, float]:
    """A `size` network trained on 75 % of digits; returns it, the other 25 % (features
    scaled to [0, 1], float32) with their labels, and its accuracy on them. Deterministic in
    (size, seed), so trained once per process (the large one takes a minute on a busy
    machine; the benchmark's five runs share it). Callers must not modify what it returns."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    features = (digits.data / 16.0).astype(np.float32)
    train_x, test_x, train_y, test_y = train_test_split(
        features, digits.target, test_size=0.25, random_state=seed, stratify=digits.target)
    network = MLPClassifier(hidden_layer_sizes=MODEL_SIZES[size], max_iter=60,
                            random_state=seed)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a capped max_iter warns that it did not converge
        network.fit(train_x, train_y)
    mlp = Mlp(tuple(np.asarray(w, np.float32) for w in network.coefs_),
              tuple(np.asarray(b, np.float32) for b in network.intercepts_))
    accuracy = float(np.mean([mlp.predict_one(x) == y for x, y in zip(test_x, test_y,
                                                                       strict=True)]))
    return mlp, test_x, test_y.astype(np.int64), accuracy


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
