"""ONNX Runtime vs OpenVINO through inferperf, next to OpenVINO's own ``benchmark_app``, interleaved.

For each model, per round (order shuffled with a fixed seed, every run a fresh process):

* ``inferperf onnxruntime``                 SingleStream, intra-op = effective CPUs
* ``inferperf openvino``                    SingleStream, PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS = CPUs, f32
* ``benchmark_app sync``                    ``-api sync -hint none -nstreams 1 -nthreads CPUs -pin YES -infer_precision f32``
* ``inferperf openvino x2``                 Concurrent 2 on AsyncInferQueue, PERFORMANCE_HINT=THROUGHPUT
* ``benchmark_app async x2``                ``-api async -hint none -nstreams 2 -nireq 2 -nthreads CPUs -pin YES -infer_precision f32``

Throughput is queries/s (benchmark_app's "Throughput: N FPS" line, batch 1).
The gate of issue 6: inferperf-OpenVINO >= 0.95 x benchmark_app's throughput
with matching settings, on models of 5 ms or more; sub-millisecond models are
reported, not judged. CIs are Student's t over rounds.

    python benchmarks/runtimes.py [--rounds 3] [--seconds 3] [--models zoo:resnet50,zoo:squeezenet,zoo:ppocr-det]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import re
import shutil
import subprocess
import sys

import numpy as np

from inferperf import BenchConfig, SessionOptions, StopOptions, WarmupOptions, WorkloadOptions
from inferperf.measure.runner import run_in_worker
from inferperf.stats import mean_ci
from inferperf.system import collect_system
from inferperf.zoo import resolve

SHAPES = {"zoo:ppocr-det": {"x": [1, 3, 640, 640]}}


def inferperf_cases(model: str, seconds: float) -> dict[str, BenchConfig]:
    """inferperf's cases for ``model``: ONNX Runtime, OpenVINO sync, OpenVINO with 2 async requests."""
    base = {
        "warmup": WarmupOptions(iterations=5),
        "stop": StopOptions(min_iterations=10, min_duration_s=seconds, max_duration_s=seconds * 4),
        "workload": WorkloadOptions(shapes=SHAPES.get(model, {})),
    }
    return {
        "inferperf onnxruntime": BenchConfig(backend="onnxruntime", **base),
        "inferperf openvino": BenchConfig(backend="openvino", **base),
        "inferperf openvino x2": BenchConfig(backend="openvino", concurrency=2, **base),
    }


def benchmark_app(model: str, seconds: float, cpus: int, mode: str) -> float:
    """Run OpenVINO's benchmark_app and return its throughput (FPS = queries/s at batch 1)."""
    path = str(resolve(model))
    argv = [shutil.which("benchmark_app") or "benchmark_app", "-m", path, "-d", "CPU", "-t", str(int(max(1, seconds))),
            "-nthreads", str(cpus), "-infer_precision", "f32"]
    if model in SHAPES:
        argv += ["-shape", ",".join(f"{k}[{','.join(map(str, v))}]" for k, v in SHAPES[model].items())]
    # benchmark_app accepts -nthreads only with -hint none, so the streams are spelled out: what the
    # LATENCY hint resolves to (1 stream) for sync, what THROUGHPUT resolves to with 2 requests (2 streams) for async
    argv += ["-hint", "none", "-pin", "YES"]
    argv += ["-api", "sync", "-nstreams", "1"] if mode == "sync" else ["-api", "async", "-nstreams", "2", "-nireq", "2"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds * 10 + 120)
    m = re.search(r"Throughput:\s+([\d.]+)\s+FPS", p.stdout)
    if not m:
        raise RuntimeError(f"benchmark_app gave no throughput (exit {p.returncode}): {p.stdout[-400:]} {p.stderr[-400:]}")
    return float(m.group(1))


def main() -> None:
    """Run the interleaved rounds (inferperf and benchmark_app) and print the table with the gate verdicts."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--models", default="zoo:resnet50,zoo:squeezenet,zoo:ppocr-det")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sysinfo = collect_system()
    cpus = sysinfo.effective_cpus
    print(f"# runtimes vs benchmark_app, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {sysinfo.cpu_model},"
          f" effective CPUs {cpus}, onnxruntime {sysinfo.packages.get('onnxruntime')},"
          f" openvino {sysinfo.packages.get('openvino')}, {args.rounds} rounds x {args.seconds} s, seed {args.seed}")
    rng = random.Random(args.seed)
    print("| model | configuration | queries/s mean [95 % CI] | p50 ms | vs benchmark_app (same mode) |")
    print("|---|---|---|---|---|")
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        cases = inferperf_cases(model, args.seconds)
        names = [*cases, "benchmark_app sync", "benchmark_app async x2"]
        qps: dict[str, list[float]] = {n: [] for n in names}
        p50: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = list(names)
            rng.shuffle(order)
            for name in order:
                if name in cases:
                    res = run_in_worker(model, cases[name], repeat_index=r)
                    qps[name].append(res.metrics.throughput.queries_per_s)
                    p50[name].append(res.metrics.latency_ms.p50)
                else:
                    qps[name].append(benchmark_app(model, args.seconds, cpus, "sync" if "sync" in name else "async"))
            print(f"  {model} round {r + 1}/{args.rounds} done", file=sys.stderr)
        pairs = {"inferperf openvino": "benchmark_app sync", "inferperf openvino x2": "benchmark_app async x2"}
        for name in names:
            v = qps[name]
            lo, hi = mean_ci(v) if len(v) > 1 else (float("nan"), float("nan"))
            ratio = ""
            if name in pairs:
                ref = float(np.mean(qps[pairs[name]]))
                x = float(np.mean(v)) / ref
                slow = 1000.0 / float(np.mean(v)) >= 5.0
                verdict = ("PASS" if x >= 0.95 else "FAIL") if slow else "reported (under 5 ms)"
                ratio = f"{x:.3f} ({verdict})"
            med = f"{np.mean(p50[name]):.3f}" if p50[name] else "-"
            print(f"| {model} | {name} | {np.mean(v):.1f} [{lo:.1f}, {hi:.1f}] | {med} | {ratio} |")


if __name__ == "__main__":
    main()
