"""Triton's example model repository, made servable: its configs (tests/fixtures/triton_model_repository)
beside ONNX models generated here with the tensors and graphs of Triton's own ``model.onnx`` files.

``simple`` / ``simple_int8`` / ``simple_string``: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1
over [batch, 16] (INT32, INT8, and BYTES holding decimal integers: Cast to INT32 and back, as Triton's
simple_string does); ``simple_sequence`` / ``simple_dyna_sequence``: the sequence models' inputs
(INPUT, START, READY[, END, CORRID]) -> OUTPUT; ``densenet_onnx``: data_0 [1, 3, 224, 224] -> fc6_1
[1, 1000, 1, 1] (a per-channel mean times a seeded 3 x 1000 matrix); ``inception_onnx``: input:0
[1, 299, 299, 3] -> InceptionV3/Predictions/Softmax:0 [1, 1001] (the same over NHWC, then Softmax).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "triton_model_repository"


def _save(graph: object, path: Path) -> None:
    import onnx

    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _add_sub(path: Path, elem: int) -> None:
    """Triton's simple / simple_int8 / simple_string graph: Cast to INT32, Add and Sub, Cast back."""
    from onnx import TensorProto, helper

    i32 = TensorProto.INT32
    io = [helper.make_tensor_value_info(n, elem, ["batch", 16]) for n in ("INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1")]
    nodes = [helper.make_node("Cast", ["INPUT0"], ["a"], to=i32), helper.make_node("Cast", ["INPUT1"], ["b"], to=i32),
             helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Sub", ["a", "b"], ["diff"]),
             helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=elem),
             helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=elem)]  # fmt: skip
    _save(helper.make_graph(nodes, "simple", io[:2], io[2:]), path)


def _sequence(path: Path, names: list[str]) -> None:
    """The sequence models of Triton's examples (its src/custom/sequence and dyna_sequence backends, as the
    sequence clients check them): OUTPUT = READY * (INPUT + START), and with END and CORRID (dyna) plus
    END * CORRID: the correlation id added to a sequence's last answer."""
    from onnx import TensorProto, helper

    ins = [helper.make_tensor_value_info(n, TensorProto.UINT64 if n == "CORRID" else TensorProto.INT32, ["batch", 1])
           for n in names]
    out = helper.make_tensor_value_info("OUTPUT", TensorProto.INT32, ["batch", 1])
    nodes = [helper.make_node("Add", ["INPUT", "START"], ["s"]), helper.make_node("Mul", ["READY", "s"], ["r"])]
    if "CORRID" in names and "END" in names:
        nodes += [helper.make_node("Cast", ["CORRID"], ["c"], to=TensorProto.INT32),
                  helper.make_node("Mul", ["END", "c"], ["e"]), helper.make_node("Add", ["r", "e"], ["OUTPUT"])]
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["OUTPUT"]))
    _save(helper.make_graph(nodes, "sequence", ins, [out]), path)


def classifier_weights(classes: int) -> np.ndarray:
    """The seeded [3, classes] float32 matrix of the image models."""
    return np.random.default_rng(classes).standard_normal((3, classes)).astype(np.float32)


def _image(path: Path, input_name: str, output_name: str, nhwc: bool, classes: int, out_shape: list[int]) -> None:
    from onnx import TensorProto, helper, numpy_helper

    shape = [1, 299, 299, 3] if nhwc else [1, 3, 224, 224]
    x = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info(output_name, TensorProto.FLOAT, out_shape)
    w = numpy_helper.from_array(classifier_weights(classes), "w")
    target = numpy_helper.from_array(np.array(out_shape, np.int64), "shape")
    nodes = [helper.make_node("ReduceMean", [input_name], ["m"], axes=[1, 2] if nhwc else [2, 3], keepdims=0),
             helper.make_node("MatMul", ["m", "w"], ["logits"])]  # fmt: skip
    if nhwc:
        nodes.append(helper.make_node("Softmax", ["logits"], ["p"], axis=-1))
    nodes.append(helper.make_node("Reshape", ["p" if nhwc else "logits", "shape"], [output_name]))
    _save(helper.make_graph(nodes, "image", [x], [y], initializer=[w, target]), path)


def make_repository(dest: Path) -> Path:
    """Copy the fixture configs to ``dest`` and write each ONNX model's ``1/model.onnx``; returns ``dest``."""
    from onnx import TensorProto

    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("README.md"))
    _add_sub(dest / "simple" / "1" / "model.onnx", TensorProto.INT32)
    _add_sub(dest / "simple_int8" / "1" / "model.onnx", TensorProto.INT8)
    _add_sub(dest / "simple_string" / "1" / "model.onnx", TensorProto.STRING)
    _sequence(dest / "simple_sequence" / "1" / "model.onnx", ["INPUT", "START", "READY"])
    _sequence(dest / "simple_dyna_sequence" / "1" / "model.onnx", ["INPUT", "START", "END", "READY", "CORRID"])
    _image(dest / "densenet_onnx" / "1" / "model.onnx", "data_0", "fc6_1", False, 1000, [1, 1000, 1, 1])
    _image(dest / "inception_onnx" / "1" / "model.onnx", "input:0", "InceptionV3/Predictions/Softmax:0", True, 1001,
           [1, 1001])
    return dest
