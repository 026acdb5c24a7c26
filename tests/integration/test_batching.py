"""Batching a fixed-batch model: made batchable and verified, or refused naming the node."""

from __future__ import annotations

import onnx
import pytest

from inferperf import BenchConfig, StopOptions, WarmupOptions, WorkloadOptions, bench
from inferperf.errors import UsageError
from inferperf.workload.batching import batch_blockers, make_batch_dynamic
from inferperf.zoo import resolve

QUICK = {"warmup": WarmupOptions(iterations=1), "stop": StopOptions(min_iterations=5, min_duration_s=0)}


def test_fixed_batch_tiny_cnn_becomes_batchable_and_verified():
    src = resolve("zoo:tiny-cnn-fixed")
    assert onnx.load(str(src)).graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1
    r = bench("zoo:tiny-cnn-fixed", BenchConfig(workload=WorkloadOptions(batch_size=4), **QUICK))
    assert r.config.workload.shapes == {"x": [4, 3, 32, 32]}
    assert r.config.workload.batching.startswith("made-dynamic") and "verified at batch 4" in r.config.workload.batching
    assert r.metrics.throughput.samples_per_s == pytest.approx(4 * r.metrics.throughput.queries_per_s)
    assert r.model.path != str(src) and any("fixed batch of 1" in n for n in r.notes)


def test_native_dynamic_batch_is_untouched():
    r = bench("zoo:tiny-cnn", BenchConfig(workload=WorkloadOptions(batch_size=4), **QUICK))
    assert r.config.workload.batching is None and r.model.path == str(resolve("zoo:tiny-cnn"))


def test_resnet50_refused_naming_its_reshape_node():
    with pytest.raises(UsageError) as e:
        bench("zoo:resnet50", BenchConfig(workload=WorkloadOptions(batch_size=4), **QUICK))
    msg = str(e.value)
    assert "Reshape node 'n173'" in msg and "[1, 2048]" in msg and "\n" not in msg
    assert batch_blockers(onnx.load(str(resolve("zoo:resnet50"))))


def test_graph_mixing_samples_is_refused(tmp_path):
    """A model whose output sums over the batch would run batched but give different outputs: refused."""
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1, name="sum_all")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
    )
    p = tmp_path / "mix.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(p))
    with pytest.raises(UsageError, match="differ from per-sample outputs|does not run batched"):
        bench(str(p), BenchConfig(workload=WorkloadOptions(batch_size=3), **QUICK))


def test_make_batch_dynamic_rewrites_io_dims(tmp_path):
    dst = tmp_path / "dyn.onnx"
    assert make_batch_dynamic(resolve("zoo:tiny-cnn-fixed"), dst) == ["x"]
    m = onnx.load(str(dst))
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert m.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    with pytest.raises(ValueError):
        make_batch_dynamic(resolve("zoo:tiny-cnn"), tmp_path / "again.onnx")  # nothing fixed
