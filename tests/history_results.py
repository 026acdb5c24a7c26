"""Small synthetic Results for the history tests: a summary-level Result whose per-run samples/s and latencies
centre on given levels (seeded), on a named machine and runtime version."""

from __future__ import annotations

import numpy as np

from inferperf.results.model import Result


def make(level_ms: float = 2.0, *, runs: int = 3, noise: float = 0.01, seed: int = 0, n: int = 60,
         created_at: str = "2026-12-01T00:00:00+00:00", cpu: str = "X", runtime: str = "1.20.0",
         model: str = "m.onnx", valid: bool = True) -> Result:
    """A Result of ``runs`` runs whose latency centres on ``level_ms`` (between-run noise ``noise``, relative)."""
    rng = np.random.default_rng(seed)
    lat, ids, qps = [], [], []
    for k in range(runs):
        lv = level_ms * (1 + noise * rng.standard_normal())
        x = rng.gamma(50.0, lv / 50.0, n) * 1e6
        lat += x.astype(np.int64).tolist()
        ids += [k] * n
        qps.append(1000.0 / lv)
    mean = float(np.mean(qps))
    doc = {"tool": {"version": "0"}, "created_at": created_at, "case_key": "k" * 16,
           "system": {"cpu_model": cpu, "logical_cores": 2, "effective_cpus": 2, "os": "Linux", "python": "3.11",
                      "packages": {"onnxruntime": runtime}},
           "model": {"path": f"/x/{model}", "sha256": "a" * 64, "size_bytes": 1, "inputs": [], "outputs": []},
           "config": {"backend": "onnxruntime", "session": {}, "workload": {"shapes": {"x": [1, 3]}, "input_pool_size": 1},
                      "warmup": {"iterations": 1, "duration_s": 0},
                      "stop": {"min_iterations": 1, "min_duration_s": 0, "max_duration_s": 1}, "repeat": runs},
           "metrics": {"latency_ms": {"count": len(lat), "mean": level_ms, "std": 0, "min": 0, "p50": level_ms,
                                      "p90": level_ms, "p95": level_ms, "p99": level_ms, "p999": level_ms,
                                      "max": level_ms},
                       "throughput": {"queries_per_s": mean, "samples_per_s": mean, "duration_s": 1.0,
                                      "per_run": qps if runs > 1 else []}},
           "samples": {"latency_ns": lat, "run_ids": ids}, "validity": {"valid": valid},
           "run": {"seed": seed}}
    return Result.model_validate(doc)
