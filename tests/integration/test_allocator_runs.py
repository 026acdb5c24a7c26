"""--allocator in real worker processes (issue 31 item 3): the worker really maps jemalloc / tcmalloc (read back
from its /proc/self/maps into run.allocator), this process does not; a sweep runs the allocator as an axis.
Debian's libjemalloc2 and libtcmalloc-minimal4: .ci/run installs them (scripts/install_allocators.sh)."""

from __future__ import annotations

import pytest

from inferperf.config import BenchConfig, StopOptions, WarmupOptions
from inferperf.measure.allocator import find_allocator, loaded_allocator
from inferperf.measure.bench import bench
from inferperf.results.model import SystemInfo
from inferperf.sweep.run import run_sweep
from inferperf.sweep.space import Axes, Matrix, ModelEntry, expand

QUICK = {"backend": "null", "null_latency_ms": [0.2], "warmup": WarmupOptions(iterations=2),
         "stop": StopOptions(min_iterations=20, min_duration_s=0.05, max_duration_s=10)}


@pytest.fixture(scope="module", autouse=True)
def _libraries() -> None:
    from inferperf.errors import UsageError

    for name in ("jemalloc", "tcmalloc"):
        try:
            find_allocator(name)
        except UsageError as e:
            pytest.skip(str(e))


@pytest.mark.parametrize("name", ["jemalloc", "tcmalloc"])
def test_the_worker_runs_the_allocator_asked_for(name: str) -> None:
    r = bench("null", BenchConfig(allocator=name, **QUICK))
    assert r.run["runs"][0]["allocator"] == name and r.config.allocator == name
    assert not any("asked for" in n for n in r.notes)
    assert loaded_allocator() == "system"  # never preloaded into this process


def test_a_sweep_runs_the_allocator_axis(tmp_path) -> None:
    info = SystemInfo(logical_cores=2, physical_cores=2, smt_active=False, cpu_affinity=[0, 1], effective_cpus=2,
                      os="x", python="3.11")
    m = Matrix(models=[ModelEntry(path="null")], settings={"backend": "null", "null_latency_ms": [0.2],
                                                          "warmup": {"iterations": 2},
                                                          "stop": {"min_iterations": 20, "min_duration_s": 0.05}},
               axes=Axes(intra_op_num_threads=[1], allocator=["system", "jemalloc"]))
    cases, _ = expand(m, info)
    assert [c.config.allocator for c in cases] == ["system", "jemalloc"] and cases[1].label.endswith("jemalloc")
    out = run_sweep(cases, tmp_path, repeat=1)
    got = sorted((r.config.allocator, r.run["runs"][0]["allocator"]) for r in out.results.values())
    assert got == [("jemalloc", "jemalloc"), ("system", "system")]
    assert len({r.case_key for r in out.results.values()}) == 2


def test_serve_reexecutes_itself_with_the_allocator_and_records_it(tmp_path) -> None:
    """The same PID maps jemalloc after the re-exec; the serve Result says so."""
    import json
    import signal

    import httpx

    from tests.e2e.test_serve_cli import _banner, _start, _url
    from tests.models import seeded_mlp_onnx

    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    out = tmp_path / "serve.json"
    proc = _start(str(mlp), "--port", "0", "--allocator", "jemalloc", "--intra-op-num-threads", "1",
                  "--output", str(out))
    try:
        url = _url(_banner(proc))
        assert "libjemalloc.so.2" in open(f"/proc/{proc.pid}/maps").read()  # same PID, re-executed
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": [0.5] * 32}]}
        assert httpx.post(f"{url}/v2/models/mlp/infer", json=body, timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    doc = json.loads(out.read_text())
    assert doc["config"]["allocator"] == "jemalloc" and doc["run"]["allocator"] == "jemalloc"


def test_an_in_process_serve_call_cannot_reexecute(monkeypatch) -> None:
    from inferperf.errors import UsageError
    from inferperf.measure.allocator import reexec_with_allocator

    monkeypatch.setattr("sys.argv", ["/usr/bin/pytest", "-q"])
    with pytest.raises(UsageError, match="run inferperf serve as its own process"):
        reexec_with_allocator("jemalloc")
    reexec_with_allocator("system")  # nothing to do: returns
