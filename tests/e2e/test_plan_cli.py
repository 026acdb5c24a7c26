"""``inferperf plan`` as a subprocess: a plan from Results, its Result, --json, exit 2/3, and the deployable
files accepted by ``inferperf serve`` (``--config`` and ``--model-repository``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from inferperf.results.io import load, save
from tests.e2e.test_serve_cli import _banner, _start
from tests.plan_results import base_result, measured, write_ladder


def _plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferperf", "plan", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip


@pytest.fixture(scope="module")
def measured_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plan-cli")
    base = base_result(folder)
    d = write_ladder(base, folder / "results")
    for b, ms in ((1, 1.3), (4, 2.0)):  # two instances side by side, slower each
        save(measured(base, b, 1, 2, ms, seed=10 + b), d / f"i2-b{b}.json")
    return d


def test_plan_from_results_prints_the_plan_and_writes_result_and_deployable_files(measured_dir: Path,
                                                                                   tmp_path: Path) -> None:
    out = tmp_path / "plan"
    p = _plan("mlp", "--target-rate", "1500", "--slo-p99-ms", "20", "--burst", "1.2", "--from", str(measured_dir),
              "--sim-requests", "4000", "--rounds", "3", "--price-per-core-hour", "0.05", "-o", str(out))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("plan for mlp: 1800 req/s (target 1500 x burst 1.2), p99 <= 20 ms")
    assert "[predicted, not validated]" in lines[0] and "ranked by cost" in lines[0]
    chosen = next(ln for ln in lines if ln.startswith("chosen:"))
    assert "replica(s)" in chosen and "cost " in chosen and "per hour (cores x 0.05 per core-hour)" in chosen
    runner_ups = [i for i, ln in enumerate(lines) if ln.startswith("runner-up:")]
    assert runner_ups and sum(ln.lstrip().startswith("from batch") for ln in lines) == 1  # the chosen one's sources
    assert any("p99 dominated by" in ln for ln in lines) and any("stops meeting the SLO at" in ln for ln in lines)
    assert any("server overhead (HTTP, decode, encode) not measured" in ln for ln in lines)
    r = load(out / "plan.json")
    assert r.kind == "plan" and r.metrics.plan is not None and r.metrics.latency_ms.count == 0
    doc = r.metrics.plan
    assert doc["validation"] == "not validated" and doc["chosen"] == 0
    best = doc["options"][0]
    assert best["meets_slo"] and best["validation"] == "not validated" and best["measured_from"]["1"]
    assert best["at_planned_rate"]["latency_ms"]["p99"] <= 20 and best["curve"]
    pr = best["p99_precision"]  # issue 39 item 3: the printed p99 with the simulation's own interval
    assert pr["met"] and pr["half_width"] <= 0.05 and pr["interval"][0] <= pr["p99_ms"] <= pr["interval"][1]
    assert any(ln.strip().startswith(f"p99 over 5 longer runs {pr['p99_ms']:.3g} ms +-") for ln in lines)
    assert all(o["p99_precision"] is None for o in doc["options"][1:])
    assert (out / "serve-config.yaml").is_file() and (out / "triton" / "mlp" / "config.pbtxt").is_file()
    assert (out / "triton" / "mlp" / "1" / "model.onnx").is_file()

    j = _plan("mlp", "--target-rate", "1500", "--slo-p99-ms", "20", "--from", str(measured_dir), "--json",
              "--sim-requests", "2000", "--rounds", "2", "-o", str(tmp_path / "j"))
    assert j.returncode == 0, j.stderr
    assert json.loads(j.stdout)["inputs"]["planned_rate_per_s"] == 1500

    cfg = out / "serve-config.yaml"
    model = out / "triton" / "mlp" / "1" / "model.onnx"
    for args, expect in (([str(model), "--config", str(cfg), "--port", "0"], "dynamic_batching"),
                         (["--model-repository", str(out / "triton"), "--port", "0"], "mlp")):
        proc = _start(*args)
        try:
            banner = _banner(proc)
            assert expect in banner
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err


def test_no_option_meeting_the_slo_exits_3_and_bad_flags_exit_2(measured_dir: Path, tmp_path: Path) -> None:
    p = _plan("mlp", "--target-rate", "100", "--slo-p99-ms", "0.5", "--from", str(measured_dir),
              "--sim-requests", "2000", "--rounds", "2", "-o", str(tmp_path / "x"))
    assert p.returncode == 3, p.stderr
    assert "no option meets the SLO" in p.stdout and "over the SLO" in p.stdout
    assert p.stderr.strip().splitlines()[-1].startswith("error: no option meets p99 <= 0.5 ms")
    assert (tmp_path / "x" / "plan.json").is_file()
    for args, text in ((["--slo-p99-ms", "20", "--from", str(measured_dir)], "--target-rate"),
                       (["--target-rate", "10", "--slo-p99-ms", "20", "--batch-sizes", "1,x"], "--batch-sizes"),
                       (["--target-rate", "10", "--slo-p99-ms", "20", "--from", str(measured_dir), "--burst", "0.5"],
                        "--burst"),
                       (["--target-rate", "10", "--slo-p99-ms", "20", "--from", str(tmp_path / "none")], "not found"),
                       (["--target-rate", "10", "--slo-p99-ms", "20", "--from", str(measured_dir),
                         "--price-per-core-hour", "-1"], "--price-per-core-hour"),
                       (["--target-rate", "10", "--slo-p99-ms", "20", "--max-replicas", "0"], "--max-replicas"),
                       (["--target-rate", "10", "--slo-p99-ms", "20", "-o", str(measured_dir / "b1.json")],
                        "a file of that name exists")):
        p = _plan("mlp", *args, *([] if "-o" in args else ["-o", str(tmp_path / "y")]))
        assert p.returncode == 2 and text in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1


def test_measure_runs_the_ladder_in_fresh_workers_and_plans_from_it(tmp_path: Path) -> None:
    from inferperf.config import BenchConfig
    from inferperf.analysis.candidates import candidates
    from inferperf.plan.ladder import ladder_configs, measure
    from tests.models import seeded_mlp_onnx

    model = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    base = BenchConfig.model_validate({"backend": "null", "null_latency_ms": [1.0], "warmup": {"iterations": 1},
                                       "stop": {"min_iterations": 20}})
    cfgs = ladder_configs([1, 2], [1], cpus=1, duration_s=0.2, base=base, rounds=2)
    seen: list[str] = []
    got = measure(str(model), cfgs, tmp_path / "measured", rounds=2, progress=seen.append)
    names = [p.name for p, _ in got]  # interleaved rounds: every config once a round, the order shuffled per round
    assert sorted(names[:2]) == ["b1-i1-t1-r1.json", "b2-i1-t1-r1.json"]
    assert sorted(names[2:]) == ["b1-i1-t1-r2.json", "b2-i1-t1-r2.json"]
    assert seen[0].startswith("measure 1/4 (round 1/2): batch ") and seen[3].startswith("measure 4/4 (round 2/2)")
    assert all(p.is_file() and r.kind == "bench" and r.samples.latency_ns for p, r in got)
    (c,) = candidates(got, str(model))
    assert c.service.sizes == (1, 2) and c.threads == 1 and c.instances == 1
    assert c.service.mean_ns(1) >= 1e6  # the null backend's scripted 1 ms per call
    assert {b: v["runs"] for b, v in c.spread().items()} == {1: 2, 2: 2}


def test_without_from_the_cli_measures_what_it_needs_with_the_base_settings_given(tmp_path: Path) -> None:
    from tests.models import seeded_mlp_onnx

    model = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    out = tmp_path / "plan"
    p = _plan(str(model), "--target-rate", "100", "--slo-p99-ms", "50", "--backend", "null", "--batch-sizes", "1,2",
              "--instances", "1", "--measure-duration-s", "0.2", "--measure-rounds", "1", "--sim-requests", "2000",
              "--rounds", "2", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "measure 1/2 (round 1/1): batch " in p.stderr and "measure 2/2 (round 1/1): batch " in p.stderr
    t = _cpus()  # one instance: threads = the effective CPUs
    assert sorted(f.name for f in (out / "measured").glob("*.json")) == [f"b1-i1-t{t}-r1.json", f"b2-i1-t{t}-r1.json"]
    assert load(out / "measured" / f"b1-i1-t{t}-r1.json").config.backend == "null"
    assert "chosen:" in p.stdout and load(out / "plan.json").kind == "plan"


def _cpus() -> int:
    from inferperf.system import collect_system

    return collect_system().effective_cpus


def test_runs_that_disagree_make_the_plan_invalid_first_and_fail_on_invalid_exits_3(tmp_path: Path) -> None:
    """Issue 36 item 3: a ladder measured while the machine's load changed (batch 1 at 1.0 and 1.4 ms in two
    rounds) was planned as if it were true; the disagreement now leads the headline, and --fail-on-invalid exits 3.
    Runs within the limit (1.0 and 1.05 ms) plan VALID."""
    base = base_result(tmp_path)
    for name, ms in (("noisy", 1.4), ("quiet", 1.05)):
        d = tmp_path / name
        d.mkdir()
        save(measured(base, 1, 1, 1, 1.0, seed=1), d / "b1-r1.json")
        save(measured(base, 1, 1, 1, ms, seed=2), d / "b1-r2.json")
        save(measured(base, 4, 1, 1, 1.6, seed=4), d / "b4-r1.json")
    args = ["--target-rate", "500", "--slo-p99-ms", "20", "--sim-requests", "2000", "--rounds", "2"]
    p = _plan("mlp", *args, "--from", str(tmp_path / "noisy"), "-o", str(tmp_path / "p1"))
    assert p.returncode == 0, p.stderr  # INVALID still exits 0 unless asked
    first = p.stdout.splitlines()[0]
    assert first.startswith("INVALID: the measured runs disagree beyond 10 %: batch 1 p50 ") and "runs (40." in first
    assert not load(tmp_path / "p1" / "plan.json").validity.valid
    p = _plan("mlp", *args, "--from", str(tmp_path / "noisy"), "-o", str(tmp_path / "p2"), "--fail-on-invalid")
    assert p.returncode == 3 and "the plan is INVALID (--fail-on-invalid): the measured runs disagree" in p.stderr
    q = _plan("mlp", *args, "--from", str(tmp_path / "quiet"), "-o", str(tmp_path / "p3"), "--fail-on-invalid")
    assert q.returncode == 0, q.stderr
    assert q.stdout.startswith("plan for mlp") and load(tmp_path / "p3" / "plan.json").validity.valid
