"""Repeats run in fresh worker processes: distinct PIDs, pooled samples, CIs over runs; placement recorded."""

from __future__ import annotations

import os

import pytest

from inferperf import BenchConfig, StopOptions, WarmupOptions, bench
from inferperf.config import Placement
from inferperf.errors import UsageError
from inferperf.measure.runner import aggregate, run_rounds

QUICK = {"warmup": WarmupOptions(iterations=2), "stop": StopOptions(min_iterations=20, min_duration_s=0.1)}


def test_three_runs_three_pids_and_a_ci():
    r = bench("zoo:tiny-cnn", BenchConfig(repeat=3, **QUICK))
    pids = r.run["pids"]
    assert len(pids) == 3 and len(set(pids)) == 3 and os.getpid() not in pids
    tp = r.metrics.throughput
    assert len(tp.per_run) == 3 and len(tp.queries_per_s_ci95) == 2
    assert tp.queries_per_s_ci95[0] <= tp.queries_per_s <= tp.queries_per_s_ci95[1]
    assert len(r.metrics.cold_start.per_run) == 3 and len(r.metrics.cold_start.session_create_ms_ci95) == 2
    # samples are pooled, never percentiles averaged
    assert r.metrics.latency_ms.count == len(r.samples.latency_ns) == len(r.samples.run_ids)
    assert set(r.samples.run_ids) == {0, 1, 2} and r.config.repeat == 3


def test_rounds_are_interleaved_and_shuffled_with_a_seed():
    a = BenchConfig(**QUICK)
    b = BenchConfig(**{**QUICK, "stop": StopOptions(min_iterations=21, min_duration_s=0.1)})
    seen = []
    out = run_rounds([("zoo:tiny-cnn", a), ("zoo:tiny-cnn", b)], 2, seed=5, on_result=lambda i, r, res: seen.append((r, i)))
    assert [r for r, _ in seen] == [0, 0, 1, 1]  # every case once per round
    assert len(out[0]) == len(out[1]) == 2
    assert out[0][0].run["shuffle_seed"] == 5
    with pytest.raises(ValueError):
        aggregate([], a)


def test_worker_errors_keep_their_class_and_line():
    with pytest.raises(UsageError, match="unresolved dims"):
        bench("zoo:ppocr-det", BenchConfig(repeat=2, **QUICK))


def test_cpus_pin_recorded():
    cpu = sorted(os.sched_getaffinity(0))[-1]
    r = bench("zoo:tiny-cnn", BenchConfig(repeat=2, placement=Placement(cpus=[cpu]), **QUICK))
    assert r.config.placement.cpus == [cpu]
    assert r.system.effective_cpus == 1 and r.system.cpu_affinity == [cpu]
    assert r.config.session.effective["intra_op_num_threads"] == 1


def test_numa_node_binding_recorded():
    import shutil

    r = bench("zoo:tiny-cnn", BenchConfig(placement=Placement(numa_node=0), **QUICK))
    assert r.config.placement.numa_node == 0 and r.config.placement.cpus
    assert r.run["pids"][0] != os.getpid()  # bound in a worker process
    if shutil.which("numactl"):
        assert r.config.placement.memory_bound is True
    else:
        assert r.config.placement.memory_bound is False and any("numactl not found" in n for n in r.notes)
    with pytest.raises(UsageError, match="NUMA node"):
        bench("zoo:tiny-cnn", BenchConfig(placement=Placement(numa_node=99), **QUICK))


def planted_bug_env(folder):
    """A sitecustomize that plants a bug (KeyError) in every worker process's measurement code."""
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import os\n"
        "if os.environ.get('INFERPERF_WORKER') == '1':\n"
        "    import inferperf.measure.assemble as a\n"
        "    def planted_bug(*args, **kwargs):\n"
        "        raise KeyError('planted bug')\n"
        "    a.summarize = planted_bug\n"
    )
    return {"PYTHONPATH": str(folder)}


def test_worker_bug_is_internal_with_its_traceback(tmp_path):
    """A bug in the worker (not an InferperfError) comes back as an internal error under its own name, with the
    worker's traceback chained, instead of a MeasurementError without one (issue 10 item 6)."""
    from inferperf.measure.jobs import WorkerInternalError, WorkerTraceback

    cfg = BenchConfig(repeat=2, env=planted_bug_env(tmp_path / "site"), **QUICK)
    with pytest.raises(WorkerInternalError) as info:
        bench("zoo:tiny-cnn", cfg)
    assert type(info.value).__name__ == "KeyError" and "planted bug" in str(info.value)
    cause = info.value.__cause__
    assert isinstance(cause, WorkerTraceback)
    assert "planted_bug" in str(cause) and "sitecustomize.py" in str(cause) and "run_once" in str(cause)


def test_worker_errors_carry_the_worker_traceback():
    from inferperf.measure.jobs import WorkerTraceback

    with pytest.raises(UsageError) as info:
        bench("no-such-model.onnx", BenchConfig(repeat=2, **QUICK))
    assert isinstance(info.value.__cause__, WorkerTraceback) and "Traceback" in str(info.value.__cause__)


def test_worker_jobs_leave_no_temp_folders(tmp_path, monkeypatch):
    """Runs and output-agreement jobs remove their temporary folders (issue 11: outputs.py left one per call)."""
    import tempfile

    from inferperf.measure.outputs import outputs_in_worker
    from inferperf.measure.runner import run_in_worker

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    cfg = BenchConfig(**QUICK)
    run_in_worker("zoo:tiny-cnn", cfg)
    doc, kept = outputs_in_worker("zoo:tiny-cnn", cfg, 2)
    assert len(doc["outputs"]) == 2 and kept is None
    keep = tmp_path / "keep"
    keep.mkdir()
    _, kept = outputs_in_worker("zoo:tiny-cnn", cfg, 2, keep_in=keep)
    assert kept is not None and kept.parent == keep
    again, _ = outputs_in_worker("zoo:tiny-cnn", cfg.model_copy(update={"workload": cfg.workload.model_copy(
        update={"seed": 99})}), 2, feeds_from=kept)
    assert all((a == b).all() for a, b in zip(doc["feeds"][0].values(), again["feeds"][0].values()))
    assert list(scratch.iterdir()) == []
