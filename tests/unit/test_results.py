import json

import pytest

import inferperf
from inferperf.clock import FakeClock
from inferperf.config import BenchConfig, StopOptions, WarmupOptions
from inferperf.errors import UsageError
from inferperf.measure.bench import bench
from inferperf.results import SCHEMA_VERSION, case_key, load, save, sidecar_path


def make(n=50, lat=(1.0, 2.0, 3.0)):
    cfg = BenchConfig(
        backend="null",
        null_latency_ms=list(lat),
        warmup=WarmupOptions(iterations=1),
        stop=StopOptions(min_iterations=n, min_duration_s=0, max_duration_s=1e6),
    )
    return bench("null", cfg, clock=FakeClock(), command=["inferperf", "bench"])


def test_round_trip_and_recompute(tmp_path):
    r = make()
    p = save(r, tmp_path / "r.json")
    doc = json.loads(p.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and doc["tool"]["name"] == "inferperf"
    assert len(doc["samples"]["latency_ns"]) == 50
    # tamper with the stored summary: load() recomputes it from the raw samples
    doc["metrics"]["latency_ms"]["p99"] = 999.0
    p.write_text(json.dumps(doc))
    back = load(p)
    assert back.metrics.latency_ms.p99 == pytest.approx(r.metrics.latency_ms.p99)
    assert back.samples.latency_ns == r.samples.latency_ns
    assert back.case_key == r.case_key and back.command == ["inferperf", "bench"]


def test_sidecar_past_threshold(tmp_path):
    r = make(n=120)
    p = save(r, tmp_path / "big.json", sidecar_threshold=100)
    side = sidecar_path(p)
    assert side.exists() and side.name == "big.samples.npz"
    doc = json.loads(p.read_text())
    assert doc["samples"]["latency_ns"] == [] and doc["samples"]["sidecar"] == "big.samples.npz"
    back = load(p)
    assert back.samples.latency_ns == r.samples.latency_ns
    assert back.metrics.latency_ms.count == 120
    side.unlink()
    with pytest.raises(UsageError, match="samples file"):
        load(p)


def test_newer_or_foreign_documents_refused(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(UsageError, match="upgrade inferperf"):
        load(p)
    p.write_text(json.dumps({"hello": 1}))
    with pytest.raises(UsageError, match="not an inferperf Result"):
        load(p)
    p.write_text("{")
    with pytest.raises(UsageError):
        load(p)
    with pytest.raises(UsageError, match="not found"):
        load(tmp_path / "missing.json")


def test_case_key_stable_order_insensitive_and_config_sensitive():
    a = case_key("ab" * 32, {"x": 1, "y": {"b": 2, "a": 1}})
    b = case_key("ab" * 32, {"y": {"a": 1, "b": 2}, "x": 1})
    assert a == b and len(a) == 16
    assert case_key("ab" * 32, {"x": 2, "y": {"a": 1, "b": 2}}) != a
    assert case_key("cd" * 32, {"x": 1, "y": {"a": 1, "b": 2}}) != a
    # same case measured twice -> same key; a different setting -> different key
    assert make().case_key == make().case_key
    assert make(lat=(1.0,)).case_key != make().case_key


def test_public_api_loads_and_saves(tmp_path):
    r = make()
    inferperf.save(r, tmp_path / "a.json")
    assert inferperf.load(tmp_path / "a.json").metrics.latency_ms.count == 50


def test_load_refuses_non_results_with_usage_error(tmp_path):
    p = tmp_path / "list.json"
    p.write_text("[1, 2]")
    with pytest.raises(UsageError, match="not an inferperf Result"):
        load(p)
    p.write_text(json.dumps({"schema_version": 1, "tool": {"version": "0"}}))
    with pytest.raises(UsageError, match="not a valid Result"):
        load(p)


def test_case_key_ignores_measurement_length():
    short = make(n=10)
    long = make(n=40)
    assert short.case_key == long.case_key
