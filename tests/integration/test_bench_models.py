"""bench() on real ONNX models: light (speed-only) models, ORT's tiny datasets, PP-OCRv4, generated models."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from inferperf import BenchConfig, SessionOptions, StopOptions, WarmupOptions, WorkloadOptions, bench
from inferperf.errors import ModelError, UsageError
from tests.conftest import erf_double_model, ort_dataset

QUICK = {"warmup": WarmupOptions(iterations=2), "stop": StopOptions(min_iterations=5, min_duration_s=0.0)}


def quick(**kw) -> BenchConfig:
    return BenchConfig(**{**QUICK, **kw})


def test_squeezenet_result_is_complete():
    r = bench("zoo:squeezenet", quick(stop=StopOptions(min_iterations=30, min_duration_s=0.3)))
    assert r.model.zoo_name == "squeezenet" and len(r.model.sha256) == 64 and r.model.opset
    assert r.config.workload.shapes == {"data_0": [1, 3, 224, 224]}
    assert r.metrics.latency_ms.count == len(r.samples.latency_ns) >= 30
    assert r.metrics.cold_start.session_create_ms > 0 and r.metrics.cold_start.first_inference_ms > 0
    assert r.metrics.throughput.queries_per_s > 0
    assert r.system.logical_cores >= 1 and "onnxruntime" in r.system.packages
    eff = r.config.session.effective
    assert eff["providers"] == ["CPUExecutionProvider"] and eff["intra_op_num_threads"] == r.system.effective_cpus
    assert any("constant weights" in n for n in r.notes)
    assert r.config.workload.input_pool_size == 16


@pytest.mark.parametrize("name", ["mul_1.onnx", "sigmoid.onnx", "logreg_iris.onnx"])
def test_onnxruntime_dataset_models(name):
    r = bench(str(ort_dataset(name)), quick())
    assert r.metrics.latency_ms.count >= 5
    assert r.model.inputs and r.config.workload.shapes


def test_explicit_zero_threads_recorded_as_resolved():
    r = bench("zoo:tiny-cnn", quick(session=SessionOptions(intra_op_num_threads=0)))
    assert r.config.session.requested["intra_op_num_threads"] == 0
    eff = r.config.session.effective
    assert isinstance(eff["intra_op_num_threads"], int) and eff["intra_op_num_threads"] >= 1
    assert "onnxruntime default" in eff["intra_op_num_threads_source"]
    r1 = bench("zoo:tiny-cnn", quick(session=SessionOptions(intra_op_num_threads=1)))
    assert r1.config.session.effective["intra_op_num_threads"] == 1
    assert r1.case_key != r.case_key


def test_unknown_session_config_key_warned_known_key_silent():
    r = bench(
        "zoo:tiny-cnn",
        quick(session=SessionOptions(session_config={"session.intra_op.allow_spinning": "0", "session.bogus": "1"})),
    )
    assert r.config.session.effective["session_config"]["session.intra_op.allow_spinning"] == "0"
    warned = [n for n in r.notes if "session config key" in n]
    assert len(warned) == 1 and "session.bogus" in warned[0]


def test_ppocr_det_real_weights_at_640():
    r = bench("zoo:ppocr-det", quick(workload=WorkloadOptions(shapes={"x": [1, 3, 640, 640]}), stop=StopOptions(min_iterations=3, min_duration_s=0.0)))
    assert r.config.workload.shapes == {"x": [1, 3, 640, 640]}
    assert r.metrics.latency_ms.count >= 3 and r.model.size_bytes > 1_000_000
    assert not any("constant weights" in n for n in r.notes)


def test_tiny_bert_batch1_seq128_ids_inside_vocabulary():
    r = bench("zoo:tiny-bert", quick(workload=WorkloadOptions(dims={"seq": 128}, batch_size=1)))
    assert r.config.workload.shapes == {"input_ids": [1, 128], "attention_mask": [1, 128]}
    lo, hi = r.config.workload.int_ranges["input_ids"]
    assert lo == 0 and hi == 999  # the embedding table has 1000 rows
    assert r.config.workload.int_ranges["attention_mask"] == [1, 1]


def test_generated_pool_runs_and_outputs_depend_on_inputs():
    """The pool fed to ORT really differs per feed: a real-weight model gives different outputs."""
    from inferperf.workload.data import build_workload
    from inferperf.zoo import resolve

    sess = ort.InferenceSession(str(resolve("zoo:tiny-cnn")), providers=["CPUExecutionProvider"])
    from inferperf.results.model import TensorInfo

    w = build_workload([TensorInfo(name="x", dtype="float32", shape=["batch", 3, 32, 32])], pool_size=3)
    outs = [sess.run(None, f)[0] for f in w.feeds]
    assert not np.allclose(outs[0], outs[1])


def test_model_errors_from_the_runtime(tmp_path):
    p = erf_double_model(tmp_path / "erf_double.onnx")
    with pytest.raises(ModelError, match=r"op Erf \(opset 13, node 'erf0'\) has no kernel"):
        bench(str(p), quick())
    with pytest.raises(UsageError, match="not in this onnxruntime build"):
        bench("zoo:tiny-cnn", quick(session=SessionOptions(providers=["CUDAExecutionProvider"])))


def test_external_data_is_part_of_the_model_identity(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    p = tmp_path / "ext.onnx"
    onnx.save(m, str(p), save_as_external_data=True, location="ext.data", size_threshold=0)
    r1 = bench(str(p), quick())
    assert r1.model.size_bytes > 4096 * 4
    data = (tmp_path / "ext.data").read_bytes()
    (tmp_path / "ext.data").write_bytes(bytes(len(data)))  # same size, other weights
    r2 = bench(str(p), quick())
    assert r1.model.sha256 != r2.model.sha256 and r1.case_key != r2.case_key
    (tmp_path / "ext.data").unlink()
    with pytest.raises(ModelError, match="ext.data"):
        bench(str(p), quick())


def test_importing_the_ort_backend_leaves_ort_s_global_log_level_alone():
    """Issue 11: the ORT backend silences ORT per session (SessionOptions), never through the process-wide
    default logger a library caller may have set; a session still logs nothing to stderr."""
    import subprocess
    import sys

    code = (
        "import onnxruntime as ort\n"
        "calls = []\n"
        "ort.set_default_logger_severity = calls.append\n"
        "import inferperf.backends.ort\n"
        "from inferperf import BenchConfig, StopOptions, WarmupOptions, bench\n"
        "bench('zoo:tiny-cnn', BenchConfig(warmup=WarmupOptions(iterations=1),"
        " stop=StopOptions(min_iterations=3, min_duration_s=0)))\n"
        "assert calls == [], calls\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
