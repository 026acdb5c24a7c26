"""Issue 16 (compare): the CLI gate end to end, and docs/ci.md's workflow commands on the null backend.

Real runs in separate processes: the workflow's ABBA slots (8 ``bench --repeat 1`` calls of one
configuration) must not be called ``regressed``. A planted 30 % slowdown must exit 3: judged on runs whose
figures are scripted (the null backend on a FakeClock), since real runs on a loaded machine move by more.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from inferperf.clock import FakeClock
from inferperf.config import BenchConfig
from inferperf.measure.bench import run_once
from inferperf.results.io import save

ROOT = Path(__file__).resolve().parents[2]
CLI = f"{sys.executable} -m inferperf"
FAST = "--backend null --duration-s 0.3 --iterations 50 --warmup 2"


def workflow_steps() -> dict[str, str]:
    """The ``run`` scripts of docs/ci.md's workflow, by step id."""
    text = (ROOT / "docs" / "ci.md").read_text()
    block = re.search(r"```yaml\n(name: performance.*?)```", text, re.S).group(1)
    steps = yaml.safe_load(block)["jobs"]["perf"]["steps"]
    return {s["id"]: s["run"] for s in steps if "id" in s}


def sh(script: str, cwd: Path, env: dict[str, str], timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.timeout(300)
def test_ci_workflow_on_null_backend(tmp_path: Path) -> None:
    steps = workflow_steps()
    env = {"INFERPERF_BASE": CLI, "INFERPERF_HEAD": CLI, "MODEL": "zoo:resnet50",
           "BENCH_FLAGS": f"{FAST} --null-latency-ms 1"}
    bench = sh(steps["bench"], tmp_path, env)
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert len(list((tmp_path / "perf" / "base").glob("*.json"))) == 4
    comp = sh(steps["compare"], tmp_path, env)
    assert comp.returncode == 0, comp.stderr[-2000:]
    # two sets of real runs of the same config, each run its own process: not regressed
    assert (tmp_path / "perf" / "exit_code").read_text().strip() == "0"
    doc = json.loads((tmp_path / "perf" / "compare.json").read_text())
    assert doc["passed"] and not [r for r in doc["rows"] if r["verdict"] == "regressed"]
    assert {r["runs"][0] for r in doc["rows"] if r["metric"] == "throughput"} == {4}
    assert "95 % CI of change" in (tmp_path / "perf" / "comment.md").read_text()


def scripted_runs(folder: Path, level_ms: float, seed: int, runs: int = 4) -> None:
    """``runs`` bench Results of the null backend on a FakeClock, written to ``folder`` as the workflow's slots
    are: run k replays a seeded script of latencies centred on ``level_ms`` x (1 + 2 % between-run noise), so
    every figure compare reads (latencies, durations, throughput) is scripted, none is wall time. The script
    is the code under test, not the configuration: it is left out of the recorded settings, as base and head
    of a CI job record one configuration."""
    rng = np.random.default_rng(seed)
    cfg = BenchConfig.model_validate({"backend": "null", "sampler": False, "warmup": {"iterations": 2},
                                      "stop": {"min_iterations": 300, "min_duration_s": 0.3}})
    for k in range(runs):
        level_s = level_ms / 1e3 * (1 + 0.02 * rng.standard_normal())
        script = (level_s * rng.lognormal(0.0, 0.05, 600)).tolist()
        r = run_once("zoo:resnet50", cfg, clock=FakeClock(), backend_kwargs={"latencies_s": script}, repeat_index=k)
        for settings in (r.config.session.requested, r.config.session.effective):
            settings.pop("latencies_s", None)
        save(r, folder / f"run{k}.json")


def test_planted_slowdown_of_scripted_runs_exits_3_and_the_same_level_passes(tmp_path: Path) -> None:
    """The gate at the command level on runs whose every figure is scripted (no wall time, so machine load
    cannot move it): 4 runs a side at 1 ms vs 4 at 1.3 ms (a planted 30 % slowdown) is regressed, exit 3;
    4 runs vs 4 other runs at 1 ms is not, exit 0."""
    scripted_runs(tmp_path / "base", 1.0, seed=1)
    scripted_runs(tmp_path / "slow", 1.3, seed=2)
    scripted_runs(tmp_path / "same", 1.0, seed=3)
    # the scripted figures (peak RSS is this process's); by configuration: the case key hashes the script
    metrics = "--match config --metrics throughput,p50,p99 --format json"
    gate = sh(f"{CLI} compare base slow {metrics}", tmp_path, {}, timeout=120)
    assert gate.returncode == 3, gate.stdout[-3000:] + gate.stderr[-2000:]
    rows = {r["metric"]: r for r in json.loads(gate.stdout)["rows"]}
    assert {m: rows[m]["verdict"] for m in rows} == {"throughput": "regressed", "p50": "regressed", "p99": "regressed"}
    assert rows["p50"]["change_pct"] > 20 and rows["throughput"]["change_pct"] < -15
    same = sh(f"{CLI} compare base same {metrics}", tmp_path, {}, timeout=120)
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-2000:]
    doc = json.loads(same.stdout)
    assert doc["passed"] and not [r for r in doc["rows"] if r["verdict"] == "regressed"]
    assert max(abs(r["change_pct"]) for r in doc["rows"]) < 5


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    missing = sh(f"{CLI} compare nowhere also-nowhere", tmp_path, {}, timeout=60)
    assert missing.returncode == 2 and "not found" in missing.stderr
    (tmp_path / "empty").mkdir()
    bad = sh(f"{CLI} compare empty empty --format xml", tmp_path, {}, timeout=60)
    assert bad.returncode == 2 and "--format" in bad.stderr


@pytest.mark.timeout(200)
def test_bench_ab_writes_both_sides_then_compare(tmp_path: Path) -> None:
    run = sh(f"{CLI} bench --ab zoo:resnet50 zoo:squeezenet {FAST} --null-latency-ms 1 --repeat 2 -o ab", tmp_path, {})
    assert run.returncode == 0, run.stderr[-2000:]
    assert len(list((tmp_path / "ab" / "base" / "runs").glob("*.json"))) == 2
    sides = [json.loads(next((tmp_path / "ab" / s).glob("*.json")).read_text()) for s in ("base", "current")]
    assert [d["run"]["runs"][0]["ab_side"] for d in sides] == ["base", "current"]
    assert [r["round_order"] for r in sides[0]["run"]["runs"]] == [[0, 1], [1, 0]]
    # both sides replay the same scripted 1 ms null latency: their p50 (the figure the script fixes; throughput
    # from 2 runs of 0.3 s on a shared machine is the harness's noise) may not be called regressed
    gate = sh(f"{CLI} compare ab/base ab/current --metrics p50 --format json", tmp_path, {})
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-2000:]
    doc = json.loads(gate.stdout)
    assert doc["match"] == "config" and doc["cases"][0]["runs"] == {"baseline": 2, "current": 2}
    assert doc["passed"] and not [r for r in doc["rows"] if r["verdict"] == "regressed"]


def test_real_onnxruntime_runs_of_one_config_are_not_regressed(tmp_path: Path) -> None:
    """Issue 16's test on a real runtime: one configuration (zoo:tiny-cnn on ONNX Runtime, one thread) on both
    sides of `bench --ab`, 4 runs a side in fresh processes, ABBA order; compare must call nothing regressed,
    and the run-level p50/p99 it compares are the runs' own (listed in run.pooled_runs by the pooling)."""
    cmd = (f"{CLI} bench --ab zoo:tiny-cnn zoo:tiny-cnn --intra-op-num-threads 1 --duration-s 0.4 --warmup 20 "
           "--repeat 4 -o ab")
    run = sh(cmd, tmp_path, {})
    assert run.returncode == 0, run.stderr[-2000:]
    pooled = json.loads(next((tmp_path / "ab" / "base").glob("*.json")).read_text())
    singles = sorted((json.loads(f.read_text()) for f in (tmp_path / "ab" / "base" / "runs").glob("*.json")),
                     key=lambda d: d["created_at"])
    listed = sorted(pooled["run"]["pooled_runs"], key=lambda x: x["created_at"])
    assert [x["p50_ms"] for x in listed] == [d["metrics"]["latency_ms"]["p50"] for d in singles]
    gate = sh(f"{CLI} compare ab/base ab/current --format json", tmp_path, {})
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-2000:]
    doc = json.loads(gate.stdout)
    assert doc["cases"][0]["runs"] == {"baseline": 4, "current": 4}
    assert not [r for r in doc["rows"] if r["verdict"] == "regressed"]


def test_holm_correction_over_several_metrics_at_the_command_level(tmp_path: Path) -> None:
    """Issue 24 item 12: one drop whose interval lies past the threshold (one-sided p ~0.017) regresses when
    throughput is the only metric tested, and is inconclusive, naming Holm's correction over 4 tests, when
    p50, p99 and cold start are tested beside it (Holm multiplies the smallest p-value by 4)."""
    from tests.unit.test_compare import make_result, with_throughput, write

    base = with_throughput(make_result(2.0, runs=2, seed=1), [112.26, 103.87])
    cur = with_throughput(make_result(2.0, runs=2, seed=1), [71.83, 68.89])
    a, b = write(tmp_path, "a", base), write(tmp_path, "b", cur)

    def run(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "inferperf", "compare", str(a), str(b), "--format", "json",
                               *flags], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    alone = run("--metrics", "throughput")
    assert alone.returncode == 3, alone.stderr
    (row,) = json.loads(alone.stdout)["rows"]
    assert row["verdict"] == "regressed" and row["ci95_pct"][1] < -5
    several = run()
    assert several.returncode == 0, several.stderr
    rows = {r["metric"]: r for r in json.loads(several.stdout)["rows"]}
    t = rows["throughput"]
    assert t["verdict"] == "inconclusive" and t["ci95_pct"][1] < -5
    assert "not after Holm's correction over 4 tests" in t["why"]
    assert t["p_regressed_adjusted"] == pytest.approx(4 * row["p_regressed_adjusted"])
    assert {rows[m]["verdict"] for m in ("p50", "p99", "cold_start")} <= {"unchanged", "inconclusive"}
