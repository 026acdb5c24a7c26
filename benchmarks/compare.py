"""Issue 16 performance: ``inferperf compare`` on two 100-case folders whose samples live in ``.npz`` sidecars.

Writes BASE/ and CURRENT/ under a temporary folder (100 pooled Results a side, 5 runs x 30,000
queries = 150,000 samples per case, so every case has a sidecar), then times the CLI end to end
(process start, loading, intervals, Holm over 500 tests, JSON) over a few repeats. Two formats,
interleaved: pooled Results as bench writes them now (each run's p50/p99 listed in
``run.pooled_runs``, so compare reads no samples) and older pooled Results without that list (compare
decompresses every sidecar and computes per-run percentiles).

    python benchmarks/compare.py [--cases 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def case_doc(i: int, slow: float, rng: np.random.Generator, runs: int = 5, per_run: int = 30_000,
             listed: bool = True) -> tuple[dict, dict]:
    """A pooled Result document (samples moved out) and its sample arrays; ``listed``: per-run p50/p99 in
    ``run.pooled_runs`` (computed from the samples, as ``measure.runner.aggregate`` writes them)."""
    level = 1.0 + 0.05 * (i % 7)
    lat, ids, qps, cold, wins = [], [], [], [], []
    for k in range(runs):
        lv = level * slow * (1 + 0.03 * rng.standard_normal())
        x = (rng.gamma(20.0, lv / 20.0, per_run) * 1e6).astype(np.int64)
        lat.append(x)
        ids.append(np.full(per_run, k, dtype=np.int64))
        qps.append(1000.0 / lv)
        cold.append({"session_create_ms": 40.0 + rng.random(), "first_inference_ms": lv})
        for w in range(10):
            chunk = x[w * per_run // 10:(w + 1) * per_run // 10] / 1e6
            wins.append({"run": k, "t_s": w * 1.0, "count": int(chunk.size), "queries_per_s": float(1000 / chunk.mean()),
                         "p50_ms": float(np.median(chunk)), "p99_ms": float(np.percentile(chunk, 99))})
    sha = hashlib.sha256(f"model-{i}".encode()).hexdigest()
    doc = {"schema_version": 1, "kind": "bench", "tool": {"name": "inferperf", "version": "0"},
           "created_at": "2026-12-01T00:00:00Z", "case_key": sha[:16], "run": {"pids": list(range(runs))},
           "system": {"cpu_model": "X", "logical_cores": 2, "effective_cpus": 2, "os": "Linux", "python": "3.11"},
           "model": {"path": f"m{i}.onnx", "sha256": sha, "size_bytes": 1, "inputs": [], "outputs": []},
           "config": {"backend": "onnxruntime", "session": {}, "workload": {"shapes": {"x": [1, 3, 8, i]},
                                                                            "input_pool_size": 16},
                      "warmup": {"iterations": 1, "duration_s": 0},
                      "stop": {"min_iterations": 1, "min_duration_s": 0, "max_duration_s": 1}, "repeat": runs},
           "metrics": {"latency_ms": {"count": 1, "mean": 1, "std": 0, "min": 1, "p50": 1, "p90": 1, "p95": 1,
                                      "p99": 1, "p999": 1, "max": 1},
                       "throughput": {"queries_per_s": float(np.mean(qps)), "samples_per_s": float(np.mean(qps)),
                                      "duration_s": 50.0, "per_run": qps},
                       "cold_start": {"session_create_ms": 40.0, "first_inference_ms": level, "per_run": cold},
                       "resources": {"rss_peak_bytes": 100_000_000}, "windows": wins},
           "samples": {"sidecar": f"case{i}.samples.npz"}, "validity": {"valid": True}}
    if listed:
        doc["run"]["pooled_runs"] = [{"created_at": "2026-12-01T00:00:00Z", "pid": k,
                                      "p50_ms": float(np.percentile(x, 50)) / 1e6,
                                      "p99_ms": float(np.percentile(x, 99)) / 1e6} for k, x in enumerate(lat)]
    arrays = {"latency_ns": np.concatenate(lat), "run_ids": np.concatenate(ids),
              "start_offsets_ns": np.zeros(0, np.int64), "warmup_latency_ns": np.zeros(0, np.int64),
              "stream_ids": np.zeros(0, np.int64)}
    return doc, arrays


def write_side(folder: Path, cases: int, slow: float, seed: int, listed: bool) -> None:
    """Write ``cases`` pooled Results (JSON + ``.npz`` sidecar) into ``folder``; every 10th case's latencies are
    scaled by ``slow``; ``listed``: per-run p50/p99 in ``run.pooled_runs`` (see :func:`case_doc`)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(cases):
        doc, arrays = case_doc(i, slow if i % 10 == 0 else 1.0, rng, listed=listed)
        (folder / f"case{i}.json").write_text(json.dumps(doc))
        np.savez_compressed(folder / f"case{i}.samples.npz", **arrays)


def main() -> None:
    """Write both formats' folders, time ``inferperf compare`` on each, interleaved, and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sides = {}
        for fmt, listed in (("listed", True), ("older", False)):
            base, cur = Path(tmp) / fmt / "base", Path(tmp) / fmt / "current"
            write_side(base, args.cases, 1.0, 1, listed)
            write_side(cur, args.cases, 1.2, 2, listed)  # every 10th case 20 % slower
            sides[fmt] = (base, cur)
        times: dict[str, list[float]] = {f: [] for f in sides}
        cpu: dict[str, list[float]] = {f: [] for f in sides}
        docs = {}
        for _ in range(args.repeats):
            for fmt, (base, cur) in sides.items():  # interleaved: the machine's drift hits both formats alike
                ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                p = subprocess.run([sys.executable, "-m", "inferperf", "compare", str(base), str(cur),
                                    "--format", "json"], capture_output=True, text=True)
                times[fmt].append(time.perf_counter() - t0)
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[fmt].append(ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime)
                assert p.returncode == 3, p.stderr
                docs[fmt] = json.loads(p.stdout)
        for fmt in sides:
            doc = docs[fmt]
            print(f"[{fmt}] {args.cases} cases a side, {len(doc['rows'])} tests, counts {doc['counts']}")
            print(f"[{fmt}] compare CPU time s (user+sys): min {min(cpu[fmt]):.2f}  max {max(cpu[fmt]):.2f}")
            print(f"[{fmt}] compare wall time s: min {min(times[fmt]):.2f}  "
                  f"median {float(np.median(times[fmt])):.2f}  max {max(times[fmt]):.2f}")

if __name__ == "__main__":
    main()
