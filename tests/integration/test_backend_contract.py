"""The backend contract: one set of tests run against every installed runtime.

The model is ``tests.models:seeded_cnn`` (seeded weights, outputs depend on inputs),
exported to ONNX with ``torch.onnx.export(dynamo=False)`` for ONNX Runtime and
OpenVINO and to a ``torch.export`` program for PyTorch. Each backend must load it,
report the same input spec, give ONNX Runtime's outputs within tolerance on the
same inputs, honour the thread setting, split its cold start, and fail with
one-line errors of the right class. The ``test`` extra installs openvino and
torch, so none of these is skipped in CI; on an install without an extra, that
runtime's tests skip with the ``pip install`` as the reason, and without torch
the ONNX runtimes run the contract on the zoo's seeded ``tiny-cnn`` (the same
signature: ``x`` [batch, 3, 32, 32] -> [batch, 10]) instead of the export.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferperf import BenchConfig, SessionOptions, StopOptions, WarmupOptions, bench
from inferperf.backends.base import create_backend
from inferperf.errors import ModelError, UsageError
from inferperf.measure.agreement import agreement
from tests.conftest import has_module, requires_extra

NEEDS_OPENVINO = requires_extra("openvino")
NEEDS_TORCH = requires_extra("torch")
BACKENDS = ["onnxruntime", pytest.param("openvino", marks=NEEDS_OPENVINO), pytest.param("torch", marks=NEEDS_TORCH)]
QUICK = {"warmup": WarmupOptions(iterations=2), "stop": StopOptions(min_iterations=5, min_duration_s=0.0)}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not has_module("torch"):  # the ONNX runtimes' contract must not depend on the torch extra
        from inferperf import zoo

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("INFERPERF_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "zoo-cache"))
            return {"onnx": zoo.resolve("zoo:tiny-cnn")}
    import torch

    from inferperf.backends.torch_backend import export_onnx, load_callable, save_torchscript

    d = tmp_path_factory.mktemp("contract")
    onnx_path = export_onnx("tests.models:seeded_cnn", d / "seeded.onnx")
    module, named = load_callable("tests.models:seeded_cnn")
    ep = torch.export.export(module, tuple(named.values()))
    torch.export.save(ep, str(d / "seeded.pt2"))
    save_torchscript(module, named, d / "seeded.pt")
    return {"onnx": onnx_path, "pt2": d / "seeded.pt2", "pt": d / "seeded.pt"}


def model_for(backend: str, models: dict[str, Path]) -> Path:
    return models["pt2"] if backend == "torch" else models["onnx"]


def feeds(n: int = 3, batch: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [{"x": rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)} for _ in range(n)]


@pytest.fixture(scope="module")
def ort_outputs(models: dict[str, Path]) -> list[list[np.ndarray]]:
    b = create_backend("onnxruntime", SessionOptions())
    b.load(models["onnx"])
    return [b.fetch(f) for f in feeds()]


@pytest.mark.parametrize("name", BACKENDS)
def test_load_and_input_spec(name: str, models: dict[str, Path]) -> None:
    b = create_backend(name, SessionOptions())
    b.load(model_for(name, models))
    (spec,) = b.inputs()
    assert spec.name == "x" and spec.dtype == "float32"
    assert len(spec.shape) == 4 and spec.shape[1:] == [3, 32, 32]
    assert b.requested_settings() and b.effective_settings()
    b.close()


@pytest.mark.parametrize("name", BACKENDS)
def test_outputs_equal_onnxruntime_within_tolerance(name: str, models: dict[str, Path], ort_outputs) -> None:
    b = create_backend(name, SessionOptions())
    b.load(model_for(name, models))
    got = [b.fetch(f) for f in feeds()]
    a = agreement(ort_outputs, got, rtol=1e-4)
    assert a["agrees"], a
    assert got[0][0].shape == (1, 10)
    assert not np.allclose(got[0][0], got[1][0])  # real weights: outputs follow the inputs


@pytest.mark.parametrize("name", BACKENDS)
def test_threads_honoured(name: str, models: dict[str, Path]) -> None:
    b = create_backend(name, SessionOptions(intra_op_num_threads=1))
    b.load(model_for(name, models))
    eff = b.effective_settings()
    key = "INFERENCE_NUM_THREADS" if name == "openvino" else "intra_op_num_threads"
    assert eff[key] == 1
    b.close()


@pytest.mark.parametrize("name", BACKENDS)
def test_bench_result_with_cold_start_split(name: str, models: dict[str, Path]) -> None:
    r = bench(str(model_for(name, models)), BenchConfig(backend=name, **QUICK))
    assert r.config.backend == name and r.metrics.latency_ms.count >= 5
    cs = r.metrics.cold_start
    assert cs.session_create_ms > 0 and cs.first_inference_ms > 0
    if name == "openvino":
        assert cs.phases["read_ms"] > 0 and cs.phases["compile_ms"] > 0
        assert cs.phases["read_ms"] + cs.phases["compile_ms"] <= cs.session_create_ms * 1.01
        eff = r.config.session.effective
        assert eff["PERFORMANCE_HINT"] == "LATENCY" and eff["INFERENCE_PRECISION_HINT"] == "f32"
        assert r.config.session.requested["INFERENCE_NUM_THREADS"] == str(r.system.effective_cpus)
        assert eff["static_shapes"] == {"x": [1, 3, 32, 32]}  # the dynamic batch compiled static, as benchmark_app -shape
    if name == "torch":
        assert cs.phases["read_ms"] > 0
        assert r.config.session.effective["inference_mode"] is True
    assert r.config.workload.shapes == {"x": [1, 3, 32, 32]}


@pytest.mark.parametrize("name", BACKENDS)
def test_missing_and_garbage_model_files_are_model_errors(name: str, tmp_path: Path) -> None:
    garbage = tmp_path / ("junk.pt2" if name == "torch" else "junk.onnx")
    garbage.write_bytes(b"not a model at all")
    b = create_backend(name, SessionOptions())
    with pytest.raises(ModelError) as e:
        b.load(garbage)
    assert "\n" not in str(e.value)


@NEEDS_OPENVINO
def test_openvino_settings_under_openvino_names(models: dict[str, Path]) -> None:
    s = SessionOptions(session_config={"PERFORMANCE_HINT": "THROUGHPUT", "openvino.NUM_STREAMS": "2",
                                       "session.intra_op.allow_spinning": "0"})
    b = create_backend("openvino", s)
    assert b.requested_settings()["NUM_STREAMS"] == "2"
    assert "session.intra_op.allow_spinning" not in b.requested_settings()
    b.load(models["onnx"])
    eff = b.effective_settings()
    assert eff["PERFORMANCE_HINT"] == "THROUGHPUT" and eff["NUM_STREAMS"] == 2


@NEEDS_OPENVINO
def test_openvino_keeps_dynamic_shapes_when_asked(models: dict[str, Path]) -> None:
    s = SessionOptions(session_config={"openvino.reshape": "0"})
    b = create_backend("openvino", s, static_shapes={"x": [2, 3, 32, 32]})
    b.load(models["onnx"])
    assert b.effective_settings()["static_shapes"] is None and b.inputs()[0].shape[0] == "batch"
    b = create_backend("openvino", SessionOptions(), static_shapes={"x": [2, 3, 32, 32]})
    b.load(models["onnx"])
    assert b.inputs()[0].shape == [2, 3, 32, 32] and b.fetch(feeds(1, batch=2)[0])[0].shape == (2, 10)


@NEEDS_OPENVINO
def test_openvino_refused_property_is_a_usage_error(models: dict[str, Path]) -> None:
    b = create_backend("openvino", SessionOptions(session_config={"PERFORMANCE_HINT": "FASTEST"}))
    with pytest.raises(UsageError) as e:
        b.load(models["onnx"])
    assert "PERFORMANCE_HINT" in str(e.value) and "\n" not in str(e.value)


@NEEDS_OPENVINO
def test_openvino_concurrent_runs_on_async_infer_queue(models: dict[str, Path]) -> None:
    r = bench(str(models["onnx"]), BenchConfig(backend="openvino", concurrency=2, **QUICK))
    eff = r.config.session.effective
    assert eff["concurrent_executor"].startswith("openvino AsyncInferQueue (2 requests)")
    assert eff["PERFORMANCE_HINT"] == "THROUGHPUT"
    assert len(r.metrics.throughput.per_stream) == 2 and set(r.samples.stream_ids) <= {0, 1}
    assert r.metrics.latency_ms.count >= 5


@NEEDS_TORCH
def test_torch_model_forms(models: dict[str, Path], tmp_path: Path) -> None:
    for model in (str(models["pt"]), "tests.models:seeded_cnn"):
        b = create_backend("torch", SessionOptions(intra_op_num_threads=1))
        b.load(model)
        assert [i.name for i in b.inputs()] == ["x"]
        assert b.fetch(feeds(1)[0])[0].shape == (1, 10)
    bare = tmp_path / "bare.pt"
    import torch

    from tests.models import seeded_cnn

    m, (x,) = seeded_cnn()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.trace(m, (x,)), str(bare))
    with pytest.raises(ModelError, match="no input signature"):
        create_backend("torch", SessionOptions()).load(bare)
    with pytest.raises(ModelError, match="does not run ONNX"):
        create_backend("torch", SessionOptions()).load(models["onnx"])


@NEEDS_TORCH
def test_torch_settings_refused_clearly() -> None:
    with pytest.raises(UsageError, match="unknown torch setting"):
        create_backend("torch", SessionOptions(session_config={"torch.threads": "2"}))
    with pytest.raises(UsageError, match="torch.compile"):
        create_backend("torch", SessionOptions(session_config={"torch.compile": "fastest"}))
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="no CUDA device"):
            create_backend("torch", SessionOptions(session_config={"torch.device": "cuda"}))


def test_ort_provider_missing_from_build_names_the_package() -> None:
    with pytest.raises(UsageError) as e:
        create_backend("onnxruntime", SessionOptions(providers=["CUDAExecutionProvider", "CPUExecutionProvider"]))
    assert "onnxruntime-gpu" in str(e.value)
    with pytest.raises(UsageError, match="not a provider name"):
        create_backend("onnxruntime", SessionOptions(providers=["CudaProvider"]))


def test_ort_provider_options_and_node_placement(models: dict[str, Path]) -> None:
    from inferperf.backends.ort import parse_providers

    assert parse_providers(["CUDAExecutionProvider:device_id=0:gpu_mem_limit=1024", "CPUExecutionProvider"]) == [
        ("CUDAExecutionProvider", {"device_id": "0", "gpu_mem_limit": "1024"}), ("CPUExecutionProvider", {})]
    with pytest.raises(UsageError):
        parse_providers(["CPUExecutionProvider:oops"])
    b = create_backend("onnxruntime", SessionOptions(providers=["CPUExecutionProvider:use_arena=1"]))
    b.load(models["onnx"])
    assert "CPUExecutionProvider" in b.effective_settings()["provider_options"]
    assert b.requested_settings()["providers"] == ["CPUExecutionProvider:use_arena=1"]
    assert b.node_placement(feeds(1)[0]) is None  # CPU only: not worth a second session
    placed = b.node_placement(feeds(1)[0], force=True)
    assert set(placed) == {"CPUExecutionProvider"} and placed["CPUExecutionProvider"] >= 3


def test_session_config_entries_go_to_their_runtime() -> None:
    from inferperf.backends.settings import entries_for

    sc = {"session.intra_op.allow_spinning": "0", "PERFORMANCE_HINT": "LATENCY", "openvino.NUM_STREAMS": "1",
          "torch.compile": "default"}
    assert entries_for("onnxruntime", sc) == {"session.intra_op.allow_spinning": "0"}
    assert entries_for("openvino", sc) == {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"}
    assert entries_for("torch", sc) == {"compile": "default"}
