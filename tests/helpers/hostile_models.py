"""Models a hostile tenant would put into the inference service's store, built with
onnx.helper: tensors whose bytes name a file beside the worker (ONNX external data) in every
place a tensor can sit, a model whose memory grows with its queries' values, and one whose
time does. Each is a valid ONNX model of one (N, 2) float input and (N, 3) scores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

SECRET_NAME = "secret.txt"


def _external(tensor: Any, location: str = SECRET_NAME) -> Any:
    """`tensor` with its bytes moved out of the file: a location, an offset and a length."""
    size = len(tensor.raw_data) or 16
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(size))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _weights(name: str = "w") -> Any:
    return numpy_helper.from_array(np.ones((2, 3), np.float32), name)


def _model(nodes: list[Any], initializers: list[Any], **extra: Any) -> bytes:
    graph = helper.make_graph(
        nodes, "hostile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], initializers,
        sparse_initializer=extra.pop("sparse", None))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("local", 1)], **extra)
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _sparse(name: str) -> Any:
    values = numpy_helper.from_array(np.ones(2, np.float32), name)
    indices = numpy_helper.from_array(np.array([0, 4], np.int64), f"{name}_indices")
    return helper.make_sparse_tensor(values, indices, [2, 3])


def in_initializer() -> bytes:
    return _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_external(_weights())])


def in_sparse_initializer() -> bytes:
    sparse = _sparse("w")
    _external(sparse.values)
    return _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [], sparse=[sparse])


def in_constant() -> bytes:
    return _model([helper.make_node("Constant", [], ["w"], value=_external(_weights())),
                   helper.make_node("MatMul", ["x", "w"], ["y"])], [])


def in_sparse_constant() -> bytes:
    sparse = _sparse("w")
    _external(sparse.indices)
    return _model([helper.make_node("Constant", [], ["w"], sparse_value=sparse),
                   helper.make_node("MatMul", ["x", "w"], ["y"])], [])


def in_attribute_tensors() -> bytes:
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    node.attribute.append(helper.make_attribute("extra", [_external(_weights("t0"))]))
    return _model([node], [_weights()])


def _if_node(branch_graph: Any, name: str) -> Any:
    return helper.make_node("If", ["c"], ["y"], then_branch=branch_graph,
                            else_branch=branch_graph, name=name)


def in_nested_subgraph() -> bytes:
    """Two Ifs deep: the inner branch's initializer is external."""
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])]
    inner = helper.make_graph([helper.make_node("MatMul", ["x", "w2"], ["y"])], "inner", [],
                              out, [_external(_weights("w2"))])
    outer = helper.make_graph([_if_node(inner, "inner_if")], "outer", [], out)
    return _model([helper.make_node("Constant", [], ["c"],
                                    value=numpy_helper.from_array(np.array(True), "c_value")),
                   _if_node(outer, "outer_if")], [])


def in_function() -> bytes:
    function = helper.make_function(
        "local", "Scores", ["a"], ["b"],
        [helper.make_node("Constant", [], ["w"], value=_external(_weights())),
         helper.make_node("MatMul", ["a", "w"], ["b"])],
        [helper.make_opsetid("", 17)])
    return _model([helper.make_node("Scores", ["x"], ["y"], domain="local")], [],
                  functions=[function])


def in_function_default() -> bytes:
    function = helper.make_function(
        "local", "Scores", ["a"], ["b"], [helper.make_node("MatMul", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)])
    function.attribute_proto.append(helper.make_attribute("w", _external(_weights())))
    return _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_weights()],
                  functions=[function])


def in_training_info() -> bytes:
    data = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_weights()])
    from onnx import load_model_from_string

    model = load_model_from_string(data)
    info = model.training_info.add()
    info.initialization.CopyFrom(helper.make_graph(
        [], "init", [], [helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 3])],
        [_external(_weights())]))
    return bytes(model.SerializeToString())


EXTERNAL_DATA: dict[str, tuple[Callable[[], bytes], str]] = {
    "initializer": (in_initializer, "graph initializer 'w'"),
    "sparse initializer": (in_sparse_initializer, "graph sparse initializer 'w' (values)"),
    "Constant": (in_constant, "attribute 'value'"),
    "sparse Constant": (in_sparse_constant, "attribute 'sparse_value' (indices)"),
    "attribute tensors": (in_attribute_tensors, "attribute 'extra' 't0'"),
    "subgraph two deep": (in_nested_subgraph, "subgraph initializer 'w2'"),
    "model-local function": (in_function, "function 'Scores'"),
    "function attribute default": (in_function_default, "function 'Scores' attribute default"),
    "training_info": (in_training_info, "training_info[0] initialization initializer 'w'"),
}
"""Every place a tensor can sit, with what the refusal names."""


def hungry() -> bytes:
    """Scores x @ 1, plus 0 x the sum of a tensor of max(x) * 10^6 floats: memory grows with
    the queries' values (4 MB a query of value 1, gigabytes at 1000)."""
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
             helper.make_node("Mul", ["m", "million"], ["n"]),
             helper.make_node("Cast", ["n"], ["n64"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["n64", "one"], ["shape"]),
             helper.make_node("ConstantOfShape", ["shape"], ["big"],
                              value=numpy_helper.from_array(np.array([1.0], np.float32))),
             helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
             helper.make_node("Mul", ["s", "zero"], ["z"]),
             helper.make_node("MatMul", ["x", "w"], ["y0"]),
             helper.make_node("Add", ["y0", "z"], ["y"])]
    return _model(nodes, [numpy_helper.from_array(np.array(1e6, np.float32), "million"),
                          numpy_helper.from_array(np.array([1], np.int64), "one"),
                          numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
                          _weights()])


def spinning() -> bytes:
    """Scores x @ 1 after a Loop of max(x) * 10^9 turns that carry a zero along: time grows
    with the queries' values (nothing at 0, hours at 1)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["carried_in"], ["carried_out"])], "turn",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("carried_in", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("carried_out", TensorProto.FLOAT, [])])
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
             helper.make_node("Mul", ["m", "billion"], ["n"]),
             helper.make_node("Cast", ["n"], ["turns"], to=TensorProto.INT64),
             helper.make_node("Loop", ["turns", "yes", "zero"], ["carried"], body=body),
             helper.make_node("MatMul", ["x", "w"], ["y0"]),
             helper.make_node("Add", ["y0", "carried"], ["y"])]
    return _model(nodes, [numpy_helper.from_array(np.array(1e9, np.float32), "billion"),
                          numpy_helper.from_array(np.array(True), "yes"),
                          numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
                          _weights()])
