"""Issue 16 (compare): verdicts, directions, thresholds, small samples, gate files, exit codes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from inferperf.analysis.compare import Gate, compare
from inferperf.analysis.compare.gate import build_gate
from inferperf.analysis.compare.render import to_dict, to_markdown
from inferperf.errors import UsageError
from inferperf.results.io import save
from inferperf.results.model import Result

SYSTEM = {"cpu_model": "X", "logical_cores": 2, "effective_cpus": 2, "os": "Linux", "python": "3.11",
          "packages": {"onnxruntime": "1.0"}}


def make_result(latency_ms: float, runs: int = 5, seed: int = 0, n: int = 400, sha: str = "a" * 64,
                qps_scale: float = 1.0, noise: float = 0.02, cpu: str = "X", sidecar: bool = False) -> Result:
    """A pooled Result of ``runs`` runs whose latencies centre on ``latency_ms`` with ``noise`` between runs."""
    rng = np.random.default_rng(seed)
    lat, ids, qps, cold, wins = [], [], [], [], []
    for k in range(runs):
        level = latency_ms * (1 + noise * rng.standard_normal())
        x = rng.gamma(20.0, level / 20.0, n) * 1e6
        lat.extend(x.astype(np.int64).tolist())
        ids.extend([k] * n)
        qps.append(1000.0 / level * qps_scale)
        cold.append({"session_create_ms": 50 * (1 + noise * rng.standard_normal()), "first_inference_ms": level})
        for w in range(10):
            chunk = x[w * n // 10:(w + 1) * n // 10] / 1e6
            wins.append({"run": k, "t_s": w * 0.1, "count": chunk.size, "queries_per_s": 1000 / chunk.mean(),
                         "p50_ms": float(np.median(chunk)), "p99_ms": float(np.percentile(chunk, 99))})
    doc = {"tool": {"version": "0"}, "created_at": "2026-12-01T00:00:00Z", "case_key": sha[:16],
           "system": {**SYSTEM, "cpu_model": cpu},
           "model": {"path": "m.onnx", "sha256": sha, "size_bytes": 1, "inputs": [], "outputs": []},
           "config": {"backend": "onnxruntime", "session": {}, "workload": {"shapes": {"x": [1, 3]}, "input_pool_size": 1},
                      "warmup": {"iterations": 1, "duration_s": 0}, "stop": {"min_iterations": 1, "min_duration_s": 0,
                                                                            "max_duration_s": 1}, "repeat": runs},
           "metrics": {"latency_ms": {"count": 1, "mean": 1, "std": 0, "min": 1, "p50": 1, "p90": 1, "p95": 1, "p99": 1,
                                      "p999": 1, "max": 1},
                       "throughput": {"queries_per_s": float(np.mean(qps)), "samples_per_s": float(np.mean(qps)),
                                      "duration_s": 1.0, "per_run": qps if runs > 1 else []},
                       "cold_start": {"session_create_ms": 50, "first_inference_ms": latency_ms,
                                      "per_run": cold if runs > 1 else []},
                       "windows": wins},
           "samples": {"latency_ns": lat, "run_ids": ids}, "validity": {"valid": True},
           "run": {"pids": list(range(runs))} if runs > 1 else {"pid": 1}}
    return Result.model_validate(doc)


def write(tmp: Path, name: str, *results: Result, sidecar_threshold: int = 100_000) -> Path:
    folder = tmp / name
    for i, r in enumerate(results):
        save(r, folder / f"r{i}.json", sidecar_threshold=sidecar_threshold)
    return folder


def verdicts(c) -> dict[str, str]:
    """Verdict per metric measured on both sides (peak RSS is not in these synthetic Results)."""
    return {r.metric: r.verdict for r in c.rows if r.baseline is not None}


def test_identical_results_are_unchanged_exit_0(tmp_path: Path) -> None:
    r = make_result(2.0)
    c = compare([write(tmp_path, "a", r)], [write(tmp_path, "b", r)])
    assert set(verdicts(c).values()) == {"unchanged"}
    assert c.exit_code == 0


def test_planted_20_percent_slowdown_regresses_exit_3(tmp_path: Path) -> None:
    c = compare([write(tmp_path, "a", make_result(2.0, seed=1))], [write(tmp_path, "b", make_result(2.4, seed=2))])
    v = verdicts(c)
    assert v["throughput"] == "regressed" and v["p50"] == "regressed"
    assert c.exit_code == 3
    assert "Holm" in c.notes[0]


def test_2_percent_change_under_5_percent_threshold_passes(tmp_path: Path) -> None:
    base = make_result(2.0, seed=1, noise=0.003, runs=8)
    cur = make_result(2.04, seed=2, noise=0.003, runs=8)
    c = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)],
                Gate(thresholds={"throughput": 0.05, "p50": 0.05}, metrics=("throughput", "p50")))
    assert c.exit_code == 0
    assert all(r.verdict in ("unchanged", "inconclusive") for r in c.rows)
    assert any(r.verdict == "unchanged" for r in c.rows)


def test_tiny_samples_are_inconclusive(tmp_path: Path) -> None:
    base, cur = make_result(2.0, runs=1, n=20), make_result(2.2, runs=1, n=20, seed=3)
    c = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)])
    v = verdicts(c)
    assert set(v.values()) == {"inconclusive"}, v
    assert "too few runs" in next(r.why for r in c.rows if r.metric == "cold_start")
    assert c.exit_code == 0
    strict = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)], Gate(strict=True))
    assert strict.exit_code == 3


def test_directions_per_metric(tmp_path: Path) -> None:
    # faster current: latency down and throughput up are both improvements, never regressions
    c = compare([write(tmp_path, "a", make_result(2.4, seed=1))], [write(tmp_path, "b", make_result(2.0, seed=2))])
    v = verdicts(c)
    assert v["throughput"] == "improved" and v["p50"] == "improved" and v["p99"] == "improved"
    assert c.exit_code == 0
    # the same pair the other way round: latency up and throughput down are regressions, p99 included
    back = verdicts(compare([write(tmp_path, "b2", make_result(2.0, seed=2))],
                            [write(tmp_path, "a2", make_result(2.4, seed=1))]))
    assert back["throughput"] == "regressed" and back["p50"] == "regressed" and back["p99"] == "regressed"
    # throughput up alone (same latency): improved, not regressed
    c2 = compare([write(tmp_path, "c", make_result(2.0, seed=1))],
                 [write(tmp_path, "d", make_result(2.0, seed=1, qps_scale=1.3))])
    assert verdicts(c2)["throughput"] == "improved"


def test_match_config_pairs_different_models_and_warns(tmp_path: Path) -> None:
    base = make_result(2.0, sha="a" * 64)
    cur = make_result(2.0, sha="b" * 64, cpu="Y")
    c = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)])
    assert c.match == "config"
    assert any("CPU model differs" in w for w in c.warnings)
    with pytest.raises(UsageError, match="no case matched"):
        compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)], match="case_key")


def test_sidecar_samples_and_json_markdown(tmp_path: Path) -> None:
    r = make_result(2.0)
    c = compare([write(tmp_path, "a", r, sidecar_threshold=10)], [write(tmp_path, "b", r, sidecar_threshold=10)])
    assert list((tmp_path / "a").glob("*.npz"))
    doc = to_dict(c)
    json.dumps(doc)
    assert doc["passed"] and doc["gate"]["directions"]["throughput"] == "higher is better"
    assert "95 % CI of change" in to_markdown(c)


def test_gate_file_and_flags(tmp_path: Path) -> None:
    f = tmp_path / "gate.yaml"
    f.write_text("max-p99-increase: 20%\nmetrics: [p99, throughput]\nstrict: true\ncorrection: bh\n")
    g = build_gate(f, {"max-throughput-drop": "3"})
    assert g.thresholds == {"p99": 0.2, "throughput": 0.03} and g.strict and g.correction == "bh"
    f.write_text("max-p98: 1%\n")
    with pytest.raises(UsageError, match="unknown key"):
        build_gate(f)
    with pytest.raises(UsageError, match="percentage"):
        build_gate(None, {"max-p99-increase": "ten"})


def test_abba_schedule_is_balanced() -> None:
    from inferperf.measure.ab import abba_slots, run_ab
    from inferperf.config import BenchConfig

    order = [s.case for s in abba_slots(4)]
    assert order == [0, 1, 1, 0, 0, 1, 1, 0]
    # each side holds the first position of a round equally often
    firsts = [s.order[0] for s in abba_slots(4) if s.case == s.order[0]]
    assert firsts.count(0) == firsts.count(1) == 2
    with pytest.raises(UsageError, match="even"):
        run_ab("a.onnx", "b.onnx", BenchConfig(), 3)


def _with_listed_percentiles(r: Result) -> Result:
    """``r`` with each run's p50/p99 in ``run.pooled_runs``, as :func:`inferperf.measure.runner.aggregate` writes."""
    lat, ids = np.asarray(r.samples.latency_ns), np.asarray(r.samples.run_ids)
    r = r.model_copy(deep=True)
    r.run["pooled_runs"] = [{"created_at": r.created_at, "pid": k,
                             "p50_ms": float(np.percentile(lat[ids == k], 50)) / 1e6,
                             "p99_ms": float(np.percentile(lat[ids == k], 99)) / 1e6}
                            for k in range(int(ids.max()) + 1)]
    return r


def test_listed_per_run_percentiles_replace_the_samples(tmp_path: Path) -> None:
    """A pooled Result listing each run's p50/p99 is compared without its samples (its sidecar may be gone), with
    the same figures as from the samples; an older pooled file without them still reads its sidecar."""
    base, cur = make_result(2.0, seed=1), make_result(2.4, seed=2)
    old = compare([write(tmp_path, "a", base, sidecar_threshold=10)], [write(tmp_path, "b", cur, sidecar_threshold=10)])
    a = write(tmp_path, "a2", _with_listed_percentiles(base), sidecar_threshold=10)
    b = write(tmp_path, "b2", _with_listed_percentiles(cur), sidecar_threshold=10)
    for side in (a, b):
        for f in side.glob("*.npz"):
            f.unlink()  # listed figures: the samples are not needed
    new = compare([a], [b])
    figures = {r.metric: (r.baseline, r.current, r.verdict) for r in old.rows}
    got = {r.metric: (r.baseline, r.current, r.verdict) for r in new.rows}
    assert got.keys() == figures.keys()
    for metric, (baseline, current, verdict) in figures.items():  # approx per number: pytest 9.2's approx takes no tuples in dicts
        assert got[metric][2] == verdict, metric
        if baseline is None:
            assert got[metric][:2] == (None, current), metric
        else:
            assert got[metric][:2] == pytest.approx((baseline, current)), metric
    assert figures["p99"][2] == "regressed"
    for f in (tmp_path / "a").glob("*.npz"):
        f.unlink()
    with pytest.raises(UsageError, match="samples file"):  # an older pooled file still needs its sidecar
        compare([tmp_path / "a" / "r0.json"], [b])


def test_every_not_comparable_difference_is_warned(tmp_path: Path) -> None:
    """Runtime version, input shapes, percentile method, pinning and INVALID Results are each named, with both values."""
    base = make_result(2.0)
    cur = make_result(2.0).model_copy(deep=True)
    cur.system.packages["onnxruntime"] = "2.0"
    cur.config.workload.shapes = {"x": [1, 4]}
    cur.metrics.latency_ms.percentile_method = "nearest-rank"
    cur.config.placement.cpus = [1]
    cur.validity.valid, cur.validity.reasons = False, ["unstable: window medians vary"]
    c = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)], match="config")
    text = "\n".join(c.warnings)
    assert "onnxruntime version differs: baseline 1.0 vs current 2.0" in text
    assert "input shapes differs" in text and "[1, 3]" in text and "[1, 4]" in text
    assert "percentile method differs: baseline linear vs current nearest-rank" in text
    assert "CPU pinning differs" in text
    assert "current holds INVALID Results (unstable: window medians vary)" in text
    same = compare([write(tmp_path, "c", base)], [write(tmp_path, "d", make_result(2.0, seed=3))])
    assert same.warnings == []  # nothing differs: nothing is warned


# --- issue 24 item 12 -------------------------------------------------------------------------------------------


def with_throughput(r: Result, per_run: list[float]) -> Result:
    """``r`` with these per-run throughputs (queries/s)."""
    r = r.model_copy(deep=True)
    r.metrics.throughput.per_run = list(per_run)
    r.metrics.throughput.queries_per_s = float(np.mean(per_run))
    return r


def test_an_interval_wholly_past_the_threshold_is_a_regression_with_one_test(tmp_path: Path) -> None:
    """The interval and the p-value came from one test each with its own df: an interval ending at -13.8 %
    against a -5 % threshold read 'inconclusive ... not after Holm's correction over 1 tests'."""
    base = with_throughput(make_result(2.0, runs=2, seed=1), [112.26, 103.87])
    cur = with_throughput(make_result(2.0, runs=2, seed=1), [71.83, 68.89])
    c = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)], Gate(metrics=("throughput",)))
    (row,) = c.rows
    assert row.high < -5 and row.verdict == "regressed" and c.exit_code == 3
    # must-say-no: the same drop within the threshold's reach is not called
    near = with_throughput(make_result(2.0, runs=2, seed=1), [106.0, 101.0])
    c2 = compare([write(tmp_path, "a2", base)], [write(tmp_path, "b2", near)], Gate(metrics=("throughput",)))
    assert c2.rows[0].verdict == "inconclusive" and c2.rows[0].high > -5


@pytest.mark.parametrize("runs", [2, 3, 12])
def test_interval_and_p_value_come_from_one_test(runs: int) -> None:
    """For every bound: outside the 95 % interval exactly when its one-sided p-value is under 0.025
    (Fieller for 2-9 runs, the bootstrap's normal interval from 10, the widened block bootstrap for one run)."""
    from inferperf.analysis.compare.stats import block_change, run_change

    rng = np.random.default_rng(runs)
    for _ in range(40):
        b = 100 * (1 + rng.uniform(0.01, 0.2) * rng.standard_normal(runs))
        cur = 100 * rng.uniform(0.7, 1.3) * (1 + rng.uniform(0.01, 0.2) * rng.standard_normal(runs))
        for ch in (run_change(list(b), list(cur)), block_change(list(b), list(cur), float(cur.mean() / b.mean()))):
            if ch is None or not (np.isfinite(ch.low) and np.isfinite(ch.high)):
                continue
            for bound in np.linspace(0.6, 1.4, 33):
                if abs(bound - ch.low) > 1e-6:
                    assert (bound < ch.low) == (ch.p_above(bound) < 0.025), (ch, bound)
                if abs(bound - ch.high) > 1e-6:
                    assert (bound > ch.high) == (ch.p_below(bound) < 0.025), (ch, bound)


def test_a_forced_pair_of_different_configurations_is_warned_by_name(tmp_path: Path) -> None:
    """One configuration a side is paired whatever differs: a 2-thread baseline against a 1-thread run was
    'matched by config' with no warning."""
    base = make_result(2.0).model_copy(deep=True)
    base.config.session.requested = {"intra_op_num_threads": 2}
    cur = make_result(2.0, seed=3).model_copy(deep=True)
    cur.config.session.requested = {"intra_op_num_threads": 1}
    c = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)])
    assert c.match == "config"
    assert "configuration differs: session.intra_op_num_threads baseline 2 vs current 1" in c.warnings
    assert "paired although the configurations differ" in c.notes[0]
    same = compare([write(tmp_path, "c", base)], [write(tmp_path, "d", base)])
    assert same.warnings == [] and "paired although" not in same.notes[0]


def test_percentile_rows_name_the_mean_of_per_run_percentiles_and_show_the_pooled_one(tmp_path: Path) -> None:
    """p99 -57.7 % beside pooled p99s of 20.07 vs 20.23 ms: the figure compared is the mean of per-run p99."""
    base, cur = make_result(2.0, seed=1), make_result(2.4, seed=2)
    c = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)])
    p99 = next(r for r in c.rows if r.metric == "p99")
    assert p99.figure == "mean of per-run p99" and p99.pooled == (base.metrics.latency_ms.p99, cur.metrics.latency_ms.p99)
    md = to_markdown(c)
    assert "p99 latency (ms, mean of per-run p99)" in md and "pooled p99 1 -> 1 ms" in md
    row = next(r for r in to_dict(c)["rows"] if r["metric"] == "p99")
    assert row["figure"] == "mean of per-run p99" and row["pooled"] == [1.0, 1.0]


def test_an_unbounded_interval_reads_no_claim_and_is_null_in_json(tmp_path: Path) -> None:
    """A baseline whose per-run throughputs span ~0 gives Fieller's whole line: the table read '[-inf, +inf]',
    the reason 'the interval straddles the 5 % threshold' and the JSON '[null, null]'. It reads 'unbounded: no
    claim' with its reason, and ``ci95_pct`` is null (issue 24 item 7: null with a reason everywhere);
    must-say-no: a bounded interval keeps its ends."""
    base = with_throughput(make_result(2.0, runs=3, seed=1), [5.0, 300.0, 9000.0])
    cur = with_throughput(make_result(2.0, runs=3, seed=1), [10000.0, 10500.0, 11000.0])
    c = compare([write(tmp_path, "a", base)], [write(tmp_path, "b", cur)], Gate(metrics=("throughput",)))
    (row,) = c.rows
    assert not math.isfinite(row.low) or not math.isfinite(row.high), (row.low, row.high)
    assert row.verdict == "inconclusive" and "unbounded: no claim" in row.why, row.why
    md = to_markdown(c)
    assert "inf" not in md.replace("inferperf", "") and "| unbounded: no claim |" in md, md
    (jrow,) = to_dict(c)["rows"]
    assert jrow["ci95_pct"] is None and "unbounded: no claim" in jrow["why"]
    ok = compare([write(tmp_path, "a2", cur)], [write(tmp_path, "b2", cur)], Gate(metrics=("throughput",)))
    assert to_dict(ok)["rows"][0]["ci95_pct"] is not None and "unbounded" not in ok.rows[0].why
