"""Sweeps run end to end in worker processes; resume re-measures nothing; a failing case does not stop the rest."""

from __future__ import annotations

import csv
import json

import pytest

import inferperf.sweep.run as sweep_run
from inferperf.errors import UsageError
from inferperf.results.model import SystemInfo
from inferperf.sweep.run import run_sweep
from inferperf.sweep.space import Axes, Matrix, ModelEntry, expand

FAST = {"warmup": {"iterations": 2}, "stop": {"min_iterations": 10, "min_duration_s": 0.1}}
INFO = SystemInfo(logical_cores=2, physical_cores=2, smt_active=False, cpu_affinity=[0, 1], effective_cpus=2,
                  os="x", python="3.11")


def four_cases():
    m = Matrix(models=[ModelEntry(path="zoo:tiny-cnn")],
               axes=Axes(intra_op_num_threads=[1, 2], batch_size=[1, 2]), settings=FAST)
    cases, _ = expand(m, INFO)
    assert len(cases) == 4
    return cases


def check_findings(doc, out):
    """findings.json states the thread and batch scaling of the four cases, with the Results' own figures."""
    by_key = {r.case_key: r for r in out.results.values()}
    assert len(by_key) == 4
    assert isinstance(doc, list) and all(set(f) == {"kind", "text", "values", "case_keys"} for f in doc)
    # two thread groups (one per batch), two batch groups (one per thread count); one run per case means
    # no CI, so no trade-off claim (stats.intervals_separate needs intervals)
    assert sorted(f["kind"] for f in doc) == ["batch-scaling"] * 2 + ["thread-scaling"] * 2
    assert {k for f in doc for k in f["case_keys"]} == set(by_key)
    for f in doc:
        rs = [by_key[k] for k in f["case_keys"]]
        v = f["values"]
        assert len(rs) == 2 and f["text"].startswith("tiny-cnn") and f["text"].endswith(".")
        if f["kind"] == "thread-scaling":
            assert v["threads"] == [r.config.session.requested["intra_op_num_threads"] for r in rs] == [1, 2]
            assert len({r.config.workload.batch_size for r in rs}) == 1
            qps = [r.metrics.throughput.queries_per_s for r in rs]
            assert v["queries_per_s"] == pytest.approx(qps)
            assert v["speedup"] == pytest.approx([1.0, qps[1] / qps[0]])
            assert v["best_throughput"] == pytest.approx(max(qps)) and v["best"] == v["threads"][qps.index(max(qps))]
            assert "one run per case: no CI" in f["text"]
        else:
            assert v["batch"] == [r.config.workload.batch_size for r in rs] == [1, 2]
            assert len({r.config.session.requested["intra_op_num_threads"] for r in rs}) == 1
            assert v["samples_per_s"] == pytest.approx([r.metrics.throughput.samples_per_s for r in rs])
            assert v["p50_ms_per_sample"] == pytest.approx(
                [r.metrics.latency_ms.p50 / r.config.workload.batch_size for r in rs])


def test_four_case_sweep_finishes_with_csv_and_findings(tmp_path):
    out = run_sweep(four_cases(), tmp_path, repeat=1)
    assert len(out.results) == 4 and not out.failures and out.measured_runs == 4
    rows = list(csv.DictReader(open(tmp_path / "sweep.csv")))
    assert len(rows) == 4 and all(float(r["queries_per_s"]) > 0 for r in rows)
    qps = [float(r["queries_per_s"]) for r in rows]
    assert qps == sorted(qps, reverse=True)
    check_findings(json.loads((tmp_path / "findings.json").read_text()), out)
    assert len(list((tmp_path / "cases").glob("*.json"))) == 4
    pids = {r.run["pids"][0] for r in out.results.values()}
    assert len(pids) == 4  # each case in its own process
    for r in out.results.values():  # issue 31 item 2: every sweep case says what energy it measured, or why not
        assert r.metrics.energy["domains"] and all(d["status"] in ("measured", "unavailable")
                                                   for d in r.metrics.energy["domains"])


def test_interrupted_sweep_resumes_without_remeasuring(tmp_path, monkeypatch):
    cases = four_cases()
    real = sweep_run.run_in_worker
    calls = {"n": 0}

    def flaky(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # Ctrl-C during the third run
        return real(*a, **kw)

    monkeypatch.setattr(sweep_run, "run_in_worker", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cases, tmp_path, repeat=1)
    index = json.loads((tmp_path / "index.json").read_text())
    done = {cid: e["runs"]["0"] for cid, e in index["cases"].items() if e["runs"]}
    assert len(done) == 2
    first_pids = {cid: json.loads((tmp_path / rel).read_text())["run"]["pid"] for cid, rel in done.items()}
    monkeypatch.setattr(sweep_run, "run_in_worker", real)
    with pytest.raises(UsageError, match="--resume"):
        run_sweep(cases, tmp_path, repeat=1)
    out = run_sweep(cases, tmp_path, repeat=1, resume=True)
    assert not out.failures, out.failures  # a run that failed says why (seen once on a loaded machine)
    assert out.skipped_runs == 2 and out.measured_runs == 2 and len(out.results) == 4
    for cid, pid in first_pids.items():
        rel = json.loads((tmp_path / "index.json").read_text())["cases"][cid]["runs"]["0"]
        assert json.loads((tmp_path / rel).read_text())["run"]["pid"] == pid  # kept, not re-measured


def test_failing_case_recorded_others_complete(tmp_path):
    m = Matrix(models=[ModelEntry(path="zoo:tiny-cnn"), ModelEntry(path="zoo:resnet50")],
               axes=Axes(intra_op_num_threads=[1], batch_size=[2]), settings=FAST)
    cases, _ = expand(m, INFO)
    out = run_sweep(cases, tmp_path, repeat=1)
    assert len(out.results) == 1 and len(out.failures) == 1
    failure = next(iter(out.failures.values()))[0]
    assert failure["type"] == "UsageError" and "Reshape node" in failure["message"]
    rows = list(csv.DictReader(open(tmp_path / "sweep.csv")))
    failed = [r for r in rows if r["runs"] == "0"]
    assert len(failed) == 1 and "Reshape" in failed[0]["failures"]


def test_resume_refuses_a_different_sweep(tmp_path):
    cases = four_cases()
    run_sweep(cases[:1], tmp_path, repeat=1)
    with pytest.raises(UsageError, match="different sweep"):
        run_sweep(cases[1:2], tmp_path, repeat=1, resume=True)
