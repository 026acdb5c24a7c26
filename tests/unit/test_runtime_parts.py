"""Pure parts of the runtime comparison: agreement, runtime lists, the async executor loop, NVML sampling."""

from __future__ import annotations

import types

import numpy as np
import pytest

from inferperf.clock import FakeClock
from inferperf.errors import UsageError
from inferperf.measure.agreement import agreement, compare_arrays
from inferperf.measure.async_exec import measure_async
from inferperf.measure.loop import StopRule
from inferperf.measure.gpu import GpuSampler
from inferperf.measure.runtimes import parse_backends, resolve_models


def test_agreement_catches_a_wrong_runtime_and_passes_a_right_one() -> None:
    rng = np.random.default_rng(0)
    ref = [[rng.standard_normal((2, 10)).astype(np.float32)] for _ in range(3)]
    close = [[o[0] + np.float32(1e-6)] for o in ref]
    wrong = [[o[0][:, ::-1].copy()] for o in ref]
    assert agreement(ref, close)["agrees"]
    a = agreement(ref, wrong)
    assert not a["agrees"] and a["cosine_min"] < 0.9 and a["max_abs_error"] > 0.1
    assert agreement(ref, [[o[0][:1]] for o in ref])["mismatch"].startswith("output 0: shape")
    assert agreement(ref, [[o[0], o[0]] for o in ref])["mismatch"] == "2 outputs vs reference 1"


def test_agreement_waives_cosine_for_tiny_outputs_and_flags_nan() -> None:
    ref = [[np.full((4,), 1e-9, np.float32)]]
    noisy = [[np.array([1e-9, -1e-9, 2e-9, 0], np.float32)]]
    assert agreement(ref, noisy)["agrees"]
    bad = compare_arrays(np.ones(3), np.array([1.0, np.nan, 1.0]))
    assert "NaN" in bad["mismatch"]


def test_parse_backends() -> None:
    assert parse_backends("ort, ov ,pytorch=m.pt2") == [("onnxruntime", None), ("openvino", None), ("torch", "m.pt2")]
    for bad in ("onnxruntime", "onnxruntime,onnxruntime", "onnxruntime,null", "onnxruntime,tf"):
        with pytest.raises(UsageError):
            parse_backends(bad)


def test_resolve_models_refuses_mismatched_formats() -> None:
    with pytest.raises(UsageError, match="torch=MODEL.pt2"):
        resolve_models("m.onnx", [("onnxruntime", None), ("torch", None)])
    with pytest.raises(UsageError, match="reads ONNX"):
        resolve_models("m.pt2", [("openvino", None), ("torch", None)])
    assert resolve_models("m.onnx", [("onnxruntime", None), ("torch", "m.pt2")]) == {"onnxruntime": "m.onnx",
                                                                                      "torch": "m.pt2"}


class FakeExecutor:
    """Completes each request on the caller's thread, ``step_ns`` of fake time after it starts."""

    description = "fake"

    def __init__(self, jobs: int, clock: FakeClock, step_ns: int = 1_000_000) -> None:
        self.jobs = jobs
        self.next = 0
        self.started: list[int] = []
        self.clock, self.step_ns = clock, step_ns

    def set_callback(self, fn):
        self.fn = fn

    def idle_job(self) -> int:
        k = self.next
        self.next = (self.next + 1) % self.jobs
        return k

    def start(self, feed, userdata) -> None:
        self.started.append(feed["i"])
        self.clock.advance_ns(self.step_ns)
        self.fn(None, userdata)

    def wait_all(self) -> None:
        pass


def test_measure_async_closed_loop_counts_streams_and_warmup() -> None:
    clock = FakeClock()
    ex = FakeExecutor(3, clock)
    pools = [[{"i": 10 * k + j} for j in range(2)] for k in range(3)]
    starts = []
    s = measure_async(ex, pools, clock, StopRule(2, 0.0, 30, 0.0, 5.0), on_start=lambda: starts.append(1))
    assert starts == [1]
    assert s.warmup_latency_ns == [[1_000_000] * 2] * 3  # 2 warm-up calls per request, 1 ms each
    # 30 queries of 1 ms back to back, round robin over 3 requests: exactly the minimum, no more
    assert s.latency_ns == [1_000_000] * 30 and s.per_stream_counts == [10, 10, 10]
    assert s.stream_ids == [0] * 10 + [1] * 10 + [2] * 10
    assert s.start_offsets_ns[:10] == [3_000_000 * j for j in range(10)]
    assert s.duration_ns == 30_000_000 and s.stopped_by == "rule" and s.errors == {}
    assert ex.started[:6] == [0, 10, 20, 1, 11, 21]  # each request cycles its own pool


def test_measure_async_cap_on_the_fake_clock() -> None:
    clock = FakeClock()
    ex = FakeExecutor(2, clock, step_ns=400_000_000)
    s = measure_async(ex, [[{"i": 0}]], clock, StopRule(1, 0.0, 100, 0.0, 1.0))
    # 0.4 s per query: the 1 s cap ends it after 3 queries (at 1.2 s), far short of 100
    assert s.stopped_by == "cap" and len(s.latency_ns) == 3 and s.duration_ns == 1_200_000_000


def fake_nvml(n: int = 1, power_fails: bool = False) -> types.SimpleNamespace:
    def power(h):
        if power_fails:
            raise RuntimeError("not supported")
        return 150_000

    return types.SimpleNamespace(
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: n,
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: b"NVIDIA Fake",
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=40 + h),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=2**30, total=2**34),
        nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980 if kind == 1 else 2619,
    )


def test_gpu_sampler_series_and_summary() -> None:
    g = GpuSampler.open(fake_nvml(2))
    assert g is not None and g.names == ["NVIDIA Fake", "NVIDIA Fake"]
    g.read()
    g.read()
    t = g.timeline()
    assert t["utilization_percent"] == [[40.0, 41.0], [40.0, 41.0]]
    assert t["power_w"][0] == [150.0, 150.0] and t["sm_clock_mhz"][0] == [1980, 1980]
    assert t["summary"][1]["utilization_percent_mean"] == 41.0 and t["summary"][0]["memory_used_bytes_peak"] == 2**30
    g2 = GpuSampler.open(fake_nvml(1, power_fails=True))
    g2.read()
    assert g2.timeline()["power_w"] == [[None]]
    assert GpuSampler.open(fake_nvml(0)) is None


def test_no_nvml_means_no_gpu_block() -> None:
    broken = types.SimpleNamespace(nvmlInit=lambda: (_ for _ in ()).throw(RuntimeError("no driver")))
    assert GpuSampler.open(broken) is None


@pytest.mark.parametrize("module,cls,handle", [("inferperf.backends.ort", "OnnxRuntimeBackend", "_session"),
                                               ("inferperf.backends.openvino_backend", "OpenVinoBackend", "_compiled"),
                                               ("inferperf.backends.torch_backend", "TorchBackend", "_module")])
def test_runtime_backends_share_one_base(module, cls, handle) -> None:
    """Issue 11: settings, notes, load phases and close live once, in backends.base.RuntimeBackend."""
    import importlib

    from inferperf.backends.base import RuntimeBackend
    from inferperf.config import SessionOptions

    pytest.importorskip({"_session": "onnxruntime", "_compiled": "openvino", "_module": "torch"}[handle])
    klass = getattr(importlib.import_module(module), cls)
    assert issubclass(klass, RuntimeBackend)
    for shared in ("effective_settings", "notes", "load_phases", "close"):
        assert shared not in vars(klass), f"{cls} redefines {shared}"
    b = klass(SessionOptions())
    setattr(b, handle, object())
    b._notes.append("n")
    notes = b.notes()
    notes.append("caller's own")
    assert b.notes() == ["n"] and b.effective_settings() == {} and b.load_phases() == {}
    b.close()
    assert getattr(b, handle) is None
