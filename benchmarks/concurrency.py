"""Threads vs streams, and the resource sampler's cost, measured in interleaved rounds.

For each model: SingleStream with intra-op 2; Concurrent 2 streams x intra-op 1
(one shared session, and one session per stream); Concurrent 2 x intra-op 2
(oversubscribed on 2 CPUs); and SingleStream intra-op 2 with the sampler off.
Every configuration runs once per round in a fresh worker process, rounds
shuffled with a fixed seed (inferperf.measure.runner.run_rounds), so machine
drift spreads over all of them. Throughput CIs are Student's t over rounds;
ratios are against SingleStream intra-op 2 measured in the same rounds.

    python benchmarks/concurrency.py [--rounds 5] [--seconds 3] [--models zoo:squeezenet,zoo:ppocr-det]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

import numpy as np

from inferperf import BenchConfig, SessionOptions, StopOptions, WarmupOptions, WorkloadOptions
from inferperf.measure.runner import run_rounds
from inferperf.stats import mean_ci
from inferperf.system import collect_system

SHAPES = {"zoo:ppocr-det": {"x": [1, 3, 640, 640]}}


def configs(model: str, seconds: float) -> dict[str, BenchConfig]:
    """The five configurations compared for ``model``, each measured for about ``seconds`` s."""
    base = {
        "warmup": WarmupOptions(iterations=5),
        "stop": StopOptions(min_iterations=10, min_duration_s=seconds, max_duration_s=seconds * 4),
        "workload": WorkloadOptions(shapes=SHAPES.get(model, {})),
    }
    return {
        "single-stream intra 2": BenchConfig(session=SessionOptions(intra_op_num_threads=2), **base),
        "concurrent 2 x intra 1, shared": BenchConfig(
            concurrency=2, session_mode="shared", session=SessionOptions(intra_op_num_threads=1), **base
        ),
        "concurrent 2 x intra 1, per-stream": BenchConfig(
            concurrency=2, session_mode="per-stream", session=SessionOptions(intra_op_num_threads=1), **base
        ),
        "concurrent 2 x intra 2 (oversubscribed)": BenchConfig(
            concurrency=2, session_mode="per-stream", session=SessionOptions(intra_op_num_threads=2), **base
        ),
        "single-stream intra 2, sampler off": BenchConfig(
            session=SessionOptions(intra_op_num_threads=2), sampler=False, **base
        ),
    }


def main() -> None:
    """Run the interleaved rounds per model and print the Markdown tables."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--models", default="zoo:squeezenet,zoo:ppocr-det")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sysinfo = collect_system()
    print(f"# inferperf benchmarks/concurrency.py — {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {sysinfo.cpu_model}, {sysinfo.logical_cores} logical CPUs, effective {sysinfo.effective_cpus};"
          f" onnxruntime {sysinfo.packages.get('onnxruntime')}")
    for model in args.models.split(","):
        cfgs = configs(model, args.seconds)
        names = list(cfgs)
        out = run_rounds([(model, cfgs[n]) for n in names], args.rounds, seed=args.seed,
                         on_result=lambda i, r, res: print(f"  round {r} {names[i]}: "
                                                           f"{res.metrics.throughput.queries_per_s:.1f} q/s",
                                                           file=sys.stderr))
        qps = {n: np.array([r.metrics.throughput.queries_per_s for r in out[i]]) for i, n in enumerate(names)}
        p50 = {n: float(np.median([x for r in out[i] for x in r.samples.latency_ns]) / 1e6) for i, n in enumerate(names)}
        ref = qps[names[0]]
        print(f"\n## {model} ({args.rounds} interleaved rounds, {args.seconds:g} s each, fresh process per run)\n")
        print("| configuration | queries/s (mean, 95 % CI) | ratio vs single-stream intra 2 (mean, 95 % CI) | p50 ms |")
        print("|---|---|---|---|")
        for n in names:
            lo, hi = mean_ci(qps[n])
            ratio = qps[n] / ref  # paired by round: same round, same machine state
            rlo, rhi = mean_ci(ratio)
            print(f"| {n} | {qps[n].mean():.1f} [{lo:.1f}, {hi:.1f}] | {ratio.mean():.3f} [{rlo:.3f}, {rhi:.3f}]"
                  f" | {p50[n]:.2f} |")


if __name__ == "__main__":
    main()
