"""The models the cluster serves: ONNX files run by ONNX Runtime (nothing is ever unpickled
from the file store), with test sets and labels as `.npy` arrays.

A model is any ONNX file (opset 13 or newer) whose first input takes a batch of queries on
its first axis; the answer to a query is the argmax of the model's first output over its
last axis (a first output of one integer per query, as scikit-learn's converters write, is
the answer itself). A test set is an `.npy` array of shape (queries, *the input's shape
after the batch axis*) whose element type converts to the input's without loss.

The demo's models are built here without PyTorch, from weights trained in seconds on
scikit-learn's bundled digits and written as ONNX graphs with `onnx.helper`: `small` and
`medium` ReLU networks (one hidden layer of 32, two of 256) on the 64 pixels, and `large` a
small convolutional network on the 1x8x8 image (random convolutions of 128 and 256 channels,
a linear layer trained on their features) that costs ONNX Runtime over 0.1 ms a query on one
core, hundreds of times the small network.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vocab.errors import UserError

MODEL_SIZES: dict[str, tuple[int, ...]] = {"small": (32,), "medium": (256, 256)}
"""Hidden layer widths of the demo's ReLU networks; `large` is the convolutional one."""
DEMO_SIZES = ("small", "medium", "large")
TRAINING_EPOCHS = {"small": 60, "medium": 30}
"""Enough for ≥ 95 % held-out accuracy."""
MAX_MODEL_BYTES = 256 * 1024 * 1024
"""A model file: what a worker holds beside the test set."""
MIN_OPSET = 13
CHECK_TIMEOUT_S = 60.0
CHECK_MEMORY_BYTES = 4 * 1024 * 1024 * 1024
"""The address space a model's check may take beside the model (a graph that asks for more
is refused, not the coordinator's process taken down)."""
PROBE_ROWS = 2
"""Test set rows the check runs the model on."""


class ModelFileError(UserError, ValueError):
    """A file in the store is not a model, test set or label array this cluster can read."""


class ModelMemoryError(ModelFileError):
    """ONNX Runtime ran out of the memory its process may take on a batch (the model's
    memory grows with the batch or with the queries' values)."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- ONNX models --------------------------------------------------------------------------

ONNX_TO_NUMPY = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
                 7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32",
                 13: "uint64"}
"""ONNX tensor element types a test set can feed (onnx.TensorProto's numbers)."""


@dataclass(frozen=True)
class Signature:
    """What a model takes: its first input's name, element type, and shape after the batch
    axis (an int for a fixed size, None for a free one)."""

    input: str
    dtype: str
    shape: tuple[int | None, ...]
    output: str

    def shown(self) -> str:
        return f"{self.dtype} of shape {shape_text(('N', *self.shape))}"

    def accepts(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> str | None:
        """Why a test set of this shape and element type does not fit, or None."""
        rows = shape[1:]
        if len(rows) != len(self.shape) or any(
                want is not None and want != have for want, have in zip(self.shape, rows,
                                                                         strict=False)):
            return "shape"
        if not np.can_cast(dtype, np.dtype(self.dtype), "safe"):
            return "dtype"
        return None


def shape_text(shape: tuple[int | str | None, ...]) -> str:
    """(N, 1, 8, 8), a free size shown as ?."""
    sizes = ["?" if size is None else str(size) for size in shape]
    return f"({sizes[0]},)" if len(sizes) == 1 else f"({', '.join(sizes)})"


def read_signature(data: bytes, name: str) -> Signature:
    """The model's signature from the file alone (no ONNX Runtime): ModelFileError unless it
    is an ONNX model of opset ≥ 13 with one fed input that takes a batch on its first axis."""
    import onnx
    from google.protobuf.message import DecodeError

    if len(data) > MAX_MODEL_BYTES:
        raise ModelFileError(f"{name}: {len(data)} bytes, more than the {MAX_MODEL_BYTES} a "
                             "model may take")
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as error:
        raise ModelFileError(f"{name}: not an ONNX model ({_short(error)})") from None
    if not model.graph.node or not model.graph.input or not model.graph.output:
        raise ModelFileError(f"{name}: not an ONNX model (no graph: nodes, inputs, outputs)")
    opset = next((entry.version for entry in model.opset_import
                  if entry.domain in ("", "ai.onnx")), None)
    if opset is None or opset < MIN_OPSET:
        raise ModelFileError(f"{name}: ONNX opset {opset}; the service runs opset "
                             f"{MIN_OPSET} or newer (export with opset_version={MIN_OPSET}+)")
    outside = external_tensors(model)
    if outside:
        more = f", and {len(outside) - 1} more" if len(outside) > 1 else ""
        raise ModelFileError(f"{name}: {outside[0]} keeps its data outside the model file "
                             f"(ONNX external data{more}); the service runs self-contained "
                             "models only (save_as_external_data=False)")
    initialized = {tensor.name for tensor in model.graph.initializer}
    fed = [value for value in model.graph.input if value.name not in initialized]
    if len(fed) != 1:
        raise ModelFileError(f"{name}: the model takes {len(fed)} inputs "
                             f"({', '.join(v.name for v in fed)[:80]}); the service feeds one")
    first = fed[0]
    tensor = first.type.tensor_type
    if not first.type.HasField("tensor_type") or tensor.elem_type not in ONNX_TO_NUMPY:
        raise ModelFileError(f"{name}: its input {first.name!r} is not a tensor of numbers")
    dims = list(tensor.shape.dim) if tensor.HasField("shape") else None
    if not dims:
        raise ModelFileError(f"{name}: its input {first.name!r} has no batch axis (it "
                             "takes a scalar or an unknown rank)")
    if dims[0].HasField("dim_value"):
        raise ModelFileError(f"{name}: its input {first.name!r} has a fixed first axis of "
                             f"{dims[0].dim_value}, no batch axis (export it with a dynamic "
                             "first axis)")
    shape = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in dims[1:])
    return Signature(first.name, ONNX_TO_NUMPY[tensor.elem_type], shape,
                     model.graph.output[0].name)


def external_tensors(model: Any) -> list[str]:
    """Every tensor of the model whose bytes live outside the model file (ONNX "external
    data": a location, offset and length), named by where it sits: initializers and sparse
    initializers, Constant and other nodes' tensor attributes (sparse too), subgraphs of
    If/Loop/Scan at any depth, model-local functions (their nodes and attribute defaults),
    training_info's graphs. Walked here over the proto itself: onnx's own
    `_get_all_tensors` skips several of these."""
    from onnx import TensorProto

    found: list[str] = []

    def tensor(value: Any, where: str) -> None:
        if value.data_location == TensorProto.EXTERNAL or len(value.external_data):
            found.append(f"{where} {value.name!r}" if value.name else where)

    def sparse(value: Any, where: str) -> None:
        tensor(value.values, f"{where} (values)")
        tensor(value.indices, f"{where} (indices)")

    graphs: list[tuple[Any, str]] = [(model.graph, "graph")]
    nodes: list[tuple[Any, str]] = []
    for index, function in enumerate(model.functions):
        where = f"function {function.name or index!r}"
        nodes += [(node, where) for node in function.node]
        for attribute in function.attribute_proto:
            nodes.append((_AttributeHolder(attribute), f"{where} attribute default"))
    for index, info in enumerate(model.training_info):
        graphs += [(info.initialization, f"training_info[{index}] initialization"),
                   (info.algorithm, f"training_info[{index}] algorithm")]
    while graphs or nodes:
        if graphs:
            graph, where = graphs.pop()
            for value in graph.initializer:
                tensor(value, f"{where} initializer")
            for value in graph.sparse_initializer:
                sparse(value, f"{where} sparse initializer {value.values.name!r}")
            nodes += [(node, f"{where} node {node.name or node.op_type!r}")
                      for node in graph.node]
            continue
        node, where = nodes.pop()
        for attribute in node.attribute:
            at = f"{where} attribute {attribute.name!r}"
            if attribute.HasField("t"):
                tensor(attribute.t, at)
            for value in attribute.tensors:
                tensor(value, at)
            if attribute.HasField("sparse_tensor"):
                sparse(attribute.sparse_tensor, at)
            for value in attribute.sparse_tensors:
                sparse(value, at)
            if attribute.HasField("g"):
                graphs.append((attribute.g, f"{at} subgraph"))
            graphs += [(graph, f"{at} subgraph") for graph in attribute.graphs]
    return found


@dataclass(frozen=True)
class _AttributeHolder:
    """An attribute on its own, walked as a node's attribute (a function's defaults)."""

    only: Any

    @property
    def attribute(self) -> list[Any]:
        return [self.only]


def _out_of_memory(error: BaseException) -> bool:
    """An allocation that failed, as Python or ONNX Runtime's native code says it."""
    text = str(error).lower()
    return isinstance(error, MemoryError) or "bad_alloc" in text or "allocat" in text


def _short(error: BaseException) -> str:
    return " ".join(str(error).split())[:200] or type(error).__name__


class OnnxModel:
    """A model in an ONNX Runtime session of `threads` threads (CPU; the CUDA provider
    first where ONNX Runtime has it), checked first by `read_signature` (self-contained
    among others) and given the very bytes checked. The session keeps no memory arena and
    no memory patterns: what a batch allocates goes back when it ends, so a process's
    memory is its models plus the batch it runs, not the largest batch it ever ran."""

    def __init__(self, data: bytes, name: str = "model", threads: int = 1) -> None:
        import onnxruntime as ort

        self.name = name
        self.signature = read_signature(data, name)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        options.log_severity_level = 3
        providers = [provider for provider in ("CUDAExecutionProvider", "CPUExecutionProvider")
                     if provider in ort.get_available_providers()]
        try:
            self.session = ort.InferenceSession(data, options, providers=providers)
        except Exception as error:  # onnxruntime's own exceptions share no public base
            if _out_of_memory(error):
                raise ModelMemoryError(f"{name}: ONNX Runtime ran out of memory loading it: "
                                       f"{_short(error)}") from None
            raise ModelFileError(f"{name}: ONNX Runtime cannot run it: "
                                 f"{_short(error)}") from None
        self.dtype = np.dtype(self.signature.dtype)

    def predict(self, batch: np.ndarray) -> np.ndarray:
        """One answer (int64) per row of `batch`: argmax of the first output over its last
        axis, or the first output itself when it is one integer per row."""
        try:
            output = self.session.run([self.signature.output],
                                      {self.signature.input: batch.astype(self.dtype,
                                                                          copy=False)})[0]
        except Exception as error:  # onnxruntime's own exceptions share no public base
            if _out_of_memory(error):
                raise ModelMemoryError(f"{self.name}: ONNX Runtime ran out of memory on a "
                                       f"batch of {len(batch)}: {_short(error)}") from None
            raise ModelFileError(f"{self.name}: ONNX Runtime failed on a batch of "
                                 f"{len(batch)}: {_short(error)}") from None
        output = np.asarray(output)
        if output.ndim == 1 and output.dtype.kind in "iu" and len(output) == len(batch):
            return output.astype(np.int64)
        if output.ndim < 2 or output.shape[0] != len(batch) or math.prod(
                output.shape[1:-1]) != 1 or output.shape[-1] < 1:
            raise ModelFileError(f"{self.name}: its first output has shape {output.shape} "
                                 f"for a batch of {len(batch)}; expected (N, classes)")
        return np.argmax(output.reshape(len(batch), -1), axis=1).astype(np.int64)


# --- arrays ---------------------------------------------------------------------------------


def array_to_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def array_from_bytes(data: bytes, name: str) -> np.ndarray:
    """The numeric `.npy` array in `data` (its header checked against its size first), a
    read-only view of `data` itself: no second copy of a large test set."""
    header = npy_header(data, len(data), name)
    array = np.frombuffer(data, header.dtype, math.prod(header.shape), header.offset)
    if header.fortran:
        return array.reshape(header.shape[::-1]).T
    return array.reshape(header.shape)


def array_shape(data: bytes, name: str, kinds: str = "biuf") -> tuple[int, ...]:
    """The shape of the `.npy` array in `data` (array_header)."""
    return array_header(data, name, kinds)[0]


def array_header(data: bytes, name: str,
                 kinds: str = "biuf") -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and element type of the `.npy` array in `data` (npy_header)."""
    header = npy_header(data, len(data), name, kinds)
    return header.shape, header.dtype


@dataclass(frozen=True)
class NpyHeader:
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fortran: bool
    offset: int
    """Where the array's bytes begin in the file."""

    @property
    def row_bytes(self) -> int:
        return math.prod(self.shape[1:]) * self.dtype.itemsize


def npy_header(start: bytes, file_size: int, name: str, kinds: str = "biuf") -> NpyHeader:
    """The header of a `.npy` file of `file_size` bytes from its first bytes (`start`, the
    whole file or a prefix holding the header), refused unless the file really holds that
    many elements (a header can claim anything) and its element kind is one of `kinds`
    (numpy's: b bool, i/u integers, f floats)."""
    buffer = io.BytesIO(start)
    try:
        version = np.lib.format.read_magic(buffer)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(buffer)
    except (ValueError, OSError, SyntaxError, EOFError) as error:
        raise ModelFileError(f"{name}: not a .npy array ({error})") from None
    if dtype.hasobject or dtype.kind not in kinds:
        raise ModelFileError(f"{name}: a .npy array of {dtype}; expected "
                             f"{' or '.join(KIND_WORDS[kind] for kind in kinds)}")
    claimed = math.prod(int(size) for size in shape) * dtype.itemsize
    present = file_size - buffer.tell()
    if claimed != present:
        raise ModelFileError(f"{name}: its header claims an array of shape {tuple(shape)} "
                             f"({claimed} bytes) but the file holds {present} bytes after it")
    return NpyHeader(tuple(int(size) for size in shape), dtype, bool(fortran), buffer.tell())


def first_rows(data: bytes, name: str, rows: int, file_size: int | None = None) -> np.ndarray:
    """The first `rows` rows of the `.npy` array in `data` (the file, or a prefix of a file
    of `file_size` bytes that holds them), without reading the rest."""
    header = npy_header(data, len(data) if file_size is None else file_size, name)
    count = min(rows, header.shape[0] if header.shape else 0)
    if header.fortran and count and len(header.shape) > 1:
        return array_from_bytes(data, name)[:count]  # rows are not contiguous: the whole
    array = np.frombuffer(data, header.dtype, count * math.prod(header.shape[1:]),
                          header.offset)
    return array.reshape((count, *header.shape[1:]))


KIND_WORDS = {"b": "booleans", "i": "integers", "u": "unsigned integers", "f": "floats"}


# --- the demo's models ----------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """What `make_bundle` writes: file name -> bytes, ready for the file store."""

    files: dict[str, bytes]
    test_accuracy: dict[str, float]


IMAGE = (1, 8, 8)
CONV_CHANNELS = (128, 256)


def _onnx_model(nodes: list[Any], inputs: list[Any], outputs: list[Any],
                initializers: list[Any], name: str) -> bytes:
    from onnx import checker, helper

    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="spotburst")
    model.ir_version = 8  # what every ONNX Runtime since 1.10 reads
    checker.check_model(model)
    return bytes(model.SerializeToString())


def mlp_onnx(weights: list[np.ndarray], biases: list[np.ndarray], name: str) -> bytes:
    """A ReLU network (Gemm, Relu, ..., Gemm) on (N, inputs) float32 pixels as ONNX."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers = [], []
    current = "pixels"
    for index, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
        initializers += [numpy_helper.from_array(weight.astype(np.float32), f"w{index}"),
                         numpy_helper.from_array(bias.astype(np.float32), f"b{index}")]
        last = index == len(weights) - 1
        out = "scores" if last else f"z{index}"
        nodes.append(helper.make_node("Gemm", [current, f"w{index}", f"b{index}"], [out]))
        if not last:
            nodes.append(helper.make_node("Relu", [out], [f"a{index}"]))
            current = f"a{index}"
    return _onnx_model(
        nodes, [helper.make_tensor_value_info("pixels", TensorProto.FLOAT,
                                              ["N", weights[0].shape[0]])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT,
                                       ["N", weights[-1].shape[1]])], initializers, name)


def cnn_onnx(convolutions: list[tuple[np.ndarray, np.ndarray]],
             dense: tuple[np.ndarray, np.ndarray] | None, name: str) -> bytes:
    """Conv 3x3 + Relu layers, a 2x2 max pool, flattened, and (given `dense`) a linear
    layer to the class scores; without it the output is the flattened features."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers = [], []
    current = "image"
    for index, (weight, bias) in enumerate(convolutions):
        initializers += [numpy_helper.from_array(weight.astype(np.float32), f"k{index}"),
                         numpy_helper.from_array(bias.astype(np.float32), f"c{index}")]
        nodes += [helper.make_node("Conv", [current, f"k{index}", f"c{index}"],
                                   [f"conv{index}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"conv{index}"], [f"relu{index}"])]
        current = f"relu{index}"
    nodes += [helper.make_node("MaxPool", [current], ["pooled"], kernel_shape=[2, 2],
                               strides=[2, 2]),
              helper.make_node("Flatten", ["pooled"], ["features"], axis=1)]
    output = "features"
    if dense is not None:
        initializers += [numpy_helper.from_array(dense[0].astype(np.float32), "w"),
                         numpy_helper.from_array(dense[1].astype(np.float32), "b")]
        nodes.append(helper.make_node("Gemm", ["features", "w", "b"], ["scores"]))
        output = "scores"
    return _onnx_model(
        nodes, [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", *IMAGE])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N", None])],
        initializers, name)


def _digits(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    pixels = digits.data.astype(np.uint8)
    train_x, test_x, train_y, test_y = train_test_split(
        pixels, digits.target, test_size=0.25, random_state=seed, stratify=digits.target)
    return train_x, test_x, train_y, test_y


@functools.cache
def train_model(size: str, seed: int = 0) -> tuple[bytes, np.ndarray, np.ndarray, float]:
    """The demo's `size` model trained on 75 % of digits, as ONNX; returns it, the other
    25 % as its test set (the raw pixels 0-16 as uint8, shaped as the model takes them)
    with their labels, and its accuracy on them. Deterministic in (size, seed), so built
    once per process."""
    import warnings

    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    train_x, test_x, train_y, test_y = _digits(seed)
    # one BLAS thread: on a machine whose cores are busy, more only queue behind each other
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")  # a capped max_iter warns that it did not converge
        if size in MODEL_SIZES:
            network = MLPClassifier(hidden_layer_sizes=MODEL_SIZES[size],
                                    max_iter=TRAINING_EPOCHS[size], random_state=seed)
            network.fit(train_x / 16.0, train_y)
            weights = [np.asarray(w, np.float32) for w in network.coefs_]
            weights[0] = weights[0] / np.float32(16.0)  # raw pixels in, as trained on /16
            data = mlp_onnx(weights, [np.asarray(b) for b in network.intercepts_],
                            f"digits-{size}")
            test_x = np.ascontiguousarray(test_x)
        elif size == "large":
            # random convolutions (their features), a linear layer trained on them
            rng = np.random.default_rng(seed)
            convolutions, before = [], IMAGE[0]
            for index, channels in enumerate(CONV_CHANNELS):
                scale = np.sqrt(2.0 / (before * 9)) / (16.0 if index == 0 else 1.0)
                convolutions.append((rng.normal(0.0, scale, (channels, before, 3, 3)),
                                     rng.normal(0.0, 0.05, channels)))
                before = channels
            features = OnnxModel(cnn_onnx(convolutions, None, "features"), "features")
            images = train_x.reshape(-1, *IMAGE).astype(np.float32)
            found = features.session.run(None, {"image": images})[0]
            mean, std = found.mean(axis=0), found.std(axis=0) + 1e-3
            classifier = LogisticRegression(max_iter=300, C=0.5)
            classifier.fit((found - mean) / std, train_y)
            weight = (classifier.coef_ / std).T
            bias = classifier.intercept_ - (mean / std) @ classifier.coef_.T
            data = cnn_onnx(convolutions, (weight, bias), f"digits-{size}")
            test_x = np.ascontiguousarray(test_x.reshape(-1, *IMAGE))
        else:
            raise ValueError(f"no demo model {size!r}; expected one of {DEMO_SIZES}")
    answers = OnnxModel(data, size).predict(test_x)
    accuracy = float(np.mean(answers == test_y))
    return data, test_x, test_y.astype(np.uint8), accuracy


def tiled(array: np.ndarray, repeat: int) -> np.ndarray:
    """`array`'s rows repeated `repeat` times (a longer test set of the same queries)."""
    return np.tile(array, (repeat, *([1] * (array.ndim - 1))))


def make_bundle(sizes: tuple[str, ...] = ("small", "large"), repeat: int = 1,
                seed: int = 0) -> Bundle:
    """`<size>_model`, `<size>_testset`, `<size>_label` per size (like the original
    service's `vit_model` / `vit_testset` / `vit_label`); the test set is the held-out digits
    repeated `repeat` times, so a job can be as long as a run needs."""
    files: dict[str, bytes] = {}
    accuracy: dict[str, float] = {}
    for size in sizes:
        model, test_x, test_y, accuracy[size] = train_model(size, seed)
        files[f"{size}_model"] = model
        files[f"{size}_testset"] = array_to_bytes(tiled(test_x, repeat))
        files[f"{size}_label"] = array_to_bytes(tiled(test_y, repeat))
    return Bundle(files, accuracy)


DEMO_SUFFIXES = {"_model": ".onnx", "_testset": ".npy", "_label": ".npy"}


def write_demo_files(folder: Path, sizes: tuple[str, ...] = ("small", "large"),
                     repeat: int = 1, seed: int = 0) -> list[Path]:
    """The demo's models, test sets and labels per size as local files (`small_model.onnx`,
    `small_testset.npy`, `small_label.npy`, ...), ready for files-put; returns them."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in make_bundle(sizes, repeat, seed).files.items():
        suffix = next(end for key, end in DEMO_SUFFIXES.items() if name.endswith(key))
        path = folder / f"{name}{suffix}"
        path.write_bytes(data)
        written.append(path)
    return written


