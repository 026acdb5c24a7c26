"""One Result builder (issue 25 item 1): every producer's envelope from ``results.build.new_result``, one empty
latency summary, and a content hash that is the same for the same document wherever it was saved."""

from __future__ import annotations

import ast
import datetime as _dt
import json
import shutil
import sys
from pathlib import Path

import pytest

import inferperf
from inferperf.clock import FakeClock
from inferperf.config import BenchConfig, StopOptions, WarmupOptions
from inferperf.loadgen.locust_import import locust_results
from inferperf.measure.bench import bench
from inferperf.pipeline.result import assemble as pipeline_assemble
from inferperf.pipeline.run import PipelineOptions
from inferperf.pipeline.simulate import fixed, simulate
from inferperf.pipeline.spec import parse
from inferperf.results import case_key, content_hash, load, new_result, save, utc_now
from inferperf.results.model import LatencySummary, ModelInfo, Result
from inferperf.system import collect_system

SRC = Path(inferperf.__file__).parent
FIX = Path(__file__).parents[1] / "fixtures" / "locust"
MS = 1_000_000


def _bench(n: int = 40, command: list[str] | None = None) -> Result:
    cfg = BenchConfig(backend="null", null_latency_ms=[1.0, 2.0, 3.0], warmup=WarmupOptions(iterations=1),
                      stop=StopOptions(min_iterations=n, min_duration_s=0, max_duration_s=1e6))  # fmt: skip
    return bench("null", cfg, clock=FakeClock(), command=command or ["inferperf", "bench"])


def _pipeline(command: list[str] | None = None) -> Result:
    spec = parse({"name": "toy", "source": {"generator": "m:g"}, "stages": [{"name": "a", "function": "m:a"}]})
    tr = simulate(["a"], [1], fixed([2 * MS]), sizes=[4], items=50, concurrency=2)
    return pipeline_assemble(tr, spec, PipelineOptions(), collect_system(), {}, {}, command=command)


def test_no_producer_builds_a_result_by_hand():
    """``Result(...)`` is called in results/build.py only: every other module goes through ``new_result``."""
    calls = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name == "Result":
                    calls.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert calls and all(c.startswith("results/build.py:") for c in calls), calls


def test_envelope_defaults_and_given_values():
    b = _bench()
    body = {"model": ModelInfo(path="m", sha256="ab", size_bytes=0, inputs=[], outputs=[]), "config": b.config,
            "metrics": b.metrics, "samples": {}, "validity": {"valid": True}}  # fmt: skip
    r = new_result(kind="load", model_sha256="ab", key_doc={"x": 1}, **body)
    assert r.kind == "load" and r.schema_version == inferperf.results.SCHEMA_VERSION
    assert r.tool.name == "inferperf" and r.tool.version == inferperf.__version__
    assert r.command == sys.argv and r.case_key == case_key("ab", {"x": 1})
    assert r.system.logical_cores == collect_system().logical_cores
    assert _dt.datetime.fromisoformat(r.created_at).utcoffset() == _dt.timedelta(0)
    given = new_result(kind="serve", model_sha256="", key_doc={}, command=["a"], created_at="2026-01-01T00:00:00+00:00",
                       system=collect_system().model_copy(update={"effective_cpus": 3}), **body)  # fmt: skip
    assert given.command == ["a"] and given.created_at == "2026-01-01T00:00:00+00:00"
    assert given.system.effective_cpus == 3


@pytest.mark.parametrize("make", [
    lambda: _bench(),
    lambda: _pipeline(command=["inferperf", "pipeline"]),
    lambda: locust_results(FIX / "tiny_binary", command=["locust"])[0],
], ids=["bench", "pipeline", "locust"])  # fmt: skip
def test_every_producer_writes_created_at_the_same_way(make):
    """One format for every kind (the pipeline wrote ``...Z`` before, the others ``...+00:00``)."""
    r = make()
    assert len(r.created_at) == len(utc_now()) and r.created_at.endswith("+00:00"), r.created_at
    assert r.tool.version == inferperf.__version__


def test_latency_summary_empty():
    e = LatencySummary.empty()
    assert e.count == 0 and e.p99 == 0.0 and e.max == 0.0 and e.percentile_method == "linear" and e.p50_ci95 == []
    assert LatencySummary.empty("nearest-rank").percentile_method == "nearest-rank"


def test_content_hash_same_document_same_hash_wherever_saved(tmp_path):
    r = _bench(n=120)
    h = content_hash(r)
    assert len(h) == 64 and int(h, 16) >= 0
    a = save(r, tmp_path / "a" / "r.json")
    assert content_hash(load(a)) == h  # saved and read back
    big = save(r, tmp_path / "b" / "big.json", sidecar_threshold=100)  # samples in a sidecar of another name
    assert json.loads(big.read_text())["samples"]["sidecar"] == "big.samples.npz"
    assert content_hash(load(big)) == h
    shutil.copytree(tmp_path / "b", tmp_path / "c")
    assert content_hash(load(tmp_path / "c" / "big.json")) == h  # copied elsewhere


def test_content_hash_differs_for_a_rerun_and_for_a_changed_figure():
    r = _bench()
    again = _bench()  # on the fake clock a rerun in this process measures the very same samples
    again.created_at = r.created_at
    assert content_hash(again) == content_hash(r)  # so only the run's identity can tell the two apart:
    again.run["pid"] = r.run["pid"] + 1  # another process
    assert content_hash(again) != content_hash(r)
    later = r.model_copy(update={"created_at": "2030-01-01T00:00:00+00:00"})  # another time
    assert content_hash(later) != content_hash(r)
    changed = r.model_copy(deep=True)
    changed.samples.latency_ns[0] += 1  # one sample 1 ns longer
    assert content_hash(changed) != content_hash(r)
