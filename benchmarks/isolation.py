"""Per-case isolation overhead of a sweep: process start + model load + teardown, for one worker run.

Each round runs one minimal case (1 warm-up, 1 measured query) of the model in a
fresh worker via ``inferperf.measure.runner.run_in_worker`` and times the whole
call on the parent's clock; the worker's own session creation and measured
time are reported beside it, so the part that is pure isolation cost is
visible. Target (issue 4): under 2 s for zoo:squeezenet.

    python benchmarks/isolation.py [--rounds 10] [--model zoo:squeezenet]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time

import numpy as np

from inferperf import BenchConfig, StopOptions, WarmupOptions
from inferperf.measure.runner import run_in_worker
from inferperf.stats import median_ci
from inferperf.system import collect_system


def main() -> None:
    """Time ``--rounds`` minimal worker runs and print the Markdown row."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--model", default="zoo:squeezenet")
    args = ap.parse_args()
    cfg = BenchConfig(warmup=WarmupOptions(iterations=1), stop=StopOptions(min_iterations=1, min_duration_s=0),
                      sampler=False)
    walls, creates, imports = [], [], []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        res = run_in_worker(args.model, cfg, repeat_index=r)
        walls.append(time.perf_counter() - t0)
        creates.append(res.metrics.cold_start.session_create_ms / 1e3)
        imports.append(res.metrics.cold_start.phases.get("runtime_import_ms", 0.0) / 1e3)
    w = np.array(walls)
    lo, hi = median_ci(w)
    s = collect_system()
    print(f"# benchmarks/isolation.py — {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {s.cpu_model}, {s.logical_cores} CPUs; onnxruntime {s.packages.get('onnxruntime')}\n")
    print("| model | rounds | worker wall s, median [95 % CI] | max s | of which session create s (median)"
          " | runtime import s (median) | target < 2 s |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.model} | {args.rounds} | {np.median(w):.3f} [{lo:.3f}, {hi:.3f}] | {w.max():.3f} |"
          f" {np.median(creates):.3f} | {np.median(imports):.3f} | {'met' if hi < 2.0 else 'NOT met'} |")


if __name__ == "__main__":
    main()
