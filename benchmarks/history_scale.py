"""Issue 28 item 7: history at scale. Ingests summary-level Results (no samples, no sidecars) into a history
database in batches (one ``history add`` transaction per batch), then times the gate over every series.

Each Result gives 3 points (samples/s, p50, p99); ``--workloads`` distinct model names make 3x that many
series, each ``points / (3 x workloads)`` long with a planted 10 % slowdown in every 10th workload. Building
the Result objects is not timed; the add (content hash, compression, series lookup, inserts, commit) and the
check (reading every series, change points, the gate) are. ``--full N`` also times N full Results carrying
3 x 2,000 raw latency samples each (the rate for full Results).

    python benchmarks/history_scale.py [--points 100000] [--workloads 334] [--db URL] [--full 300]
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inferperf.history.gate import check  # noqa: E402
from inferperf.history.ingest import add  # noqa: E402
from inferperf.history.store import open_store  # noqa: E402
from inferperf.results.model import Result  # noqa: E402
from tests.history_results import make  # noqa: E402

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def summary_results(n_results: int, workloads: int, rng: np.random.Generator) -> list[Result]:
    """``n_results`` summary-level Results spread over ``workloads`` model names, oldest first per workload."""
    template = make(runs=3, n=10).model_dump(mode="json")
    template["samples"] = {}
    out = []
    per = max(n_results // workloads, 1)
    for i in range(n_results):
        w, k = i % workloads, i // workloads
        slow = 1.10 if (w % 10 == 0 and k >= per // 2) else 1.0
        lv = 2.0 * slow
        qps = [1000 / (lv * (1 + 0.03 * rng.standard_normal())) for _ in range(3)]
        doc = copy.deepcopy(template)
        doc["model"]["path"] = f"/m/model{w:04d}.onnx"
        doc["created_at"] = (T0 + dt.timedelta(minutes=k, seconds=w % 60)).isoformat()
        doc["metrics"]["throughput"].update(per_run=qps, queries_per_s=float(np.mean(qps)),
                                            samples_per_s=float(np.mean(qps)))
        p50 = lv * (1 + 0.03 * rng.standard_normal())
        doc["metrics"]["latency_ms"].update(p50=p50, p99=p50 * 1.4, count=3000)
        out.append(Result.model_validate(doc))
    return out


def timed_add(engine, results: list[Result], batch: int) -> float:
    t = time.perf_counter()
    for s in range(0, len(results), batch):
        add(engine, [(f"r{j}", r) for j, r in enumerate(results[s:s + batch], s)])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--workloads", type=int, default=334)
    ap.add_argument("--batch", type=int, default=1000, help="Results per add (one transaction)")
    ap.add_argument("--db", default=None, help="database URL (default: a SQLite file in a temporary folder)")
    ap.add_argument("--full", type=int, default=300, help="full Results (with samples) to time after")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        db = a.db or str(Path(tmp) / "h.db")
        engine = open_store(db)
        results = summary_results(a.points // 3, a.workloads, rng)
        n_points = 3 * len(results)
        t_add = timed_add(engine, results, a.batch)
        t0 = time.perf_counter()
        rep = check(engine)
        t_check = time.perf_counter() - t0
        regressed = sum(r.verdict == "regression" for r in rep.rows)
        planted = [r for r in rep.rows if int(r.series.workload["model"].removeprefix("model")) % 10 == 0]
        caught = sum(r.verdict == "regression" for r in planted)
        print(f"db: {engine.url.render_as_string(hide_password=True)}")
        print(f"summary-level: {len(results)} Results, {n_points} points in {t_add:.1f} s "
              f"({n_points / t_add:.0f} points/s, {len(results) / t_add:.0f} Results/s)")
        print(f"check: {len(rep.rows)} series in {t_check:.2f} s ({regressed} regression verdicts: {caught} of the "
              f"{len(planted)} series with a planted 10 % slowdown, {regressed - caught} of the "
              f"{len(rep.rows) - len(planted)} without)")
        if a.full:
            full = [make(2.0, seed=10_000 + i, runs=3, n=2000, created_at="2026-12-31T00:00:00+00:00")
                    for i in range(a.full)]
            t_full = timed_add(engine, full, a.batch)
            print(f"full Results (3 x 2,000 samples each): {a.full} in {t_full:.1f} s ({a.full / t_full:.1f} Results/s)")
        engine.dispose()


if __name__ == "__main__":
    main()
