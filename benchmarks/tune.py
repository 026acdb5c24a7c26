"""How good and how cheap is ``inferperf tune``? Against the full grid of the same space, measured apart.

For one model:

1. **Grid**: every feasible configuration of the space (about 48 here: backend x intra-op threads x
   concurrency x session mode x graph optimization level x CPU memory arena, oversubscription pruned),
   each measured ``--rounds`` times in shuffled interleaved rounds, every run a fresh worker process
   (``inferperf.measure.runner.run_rounds``). The grid's best = the highest mean throughput. The
   tuner never sees these measurements.
2. **Tune**: ``inferperf.tune.run.tune`` on the same space with a search budget of
   ``ceil(--fraction x grid size)`` trials (plus its own validation), same stop rule, fresh study.
   Trials to reach the grid's best = the first trial that measured the grid-best configuration or one
   whose grid mean is within the grid best's 95 % interval.
3. **Re-measure**: the tuned winner, the grid's best and the runtime's defaults in ``--final-rounds``
   interleaved rounds (fresh processes); Fieller's 95 % interval of winner / grid best and
   winner / defaults (``inferperf.significance.mean_ratio_ci``).

Target (issue 15): winner / grid-best lower bound >= 0.95, reached in <= 25 % of the grid's trials.
Every run here uses a short stop rule (``--duration-s``, ``--iterations``) so the grid fits in ~20 min.

    python benchmarks/tune.py --model zoo:squeezenet [--rounds 3] [--fraction 0.25] [--final-rounds 5]
    python benchmarks/tune.py --model zoo:ppocr-det --shape x:1x3x640x640
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from inferperf import BenchConfig
from inferperf.config import StopOptions, WarmupOptions
from inferperf.measure.runner import run_rounds
from inferperf.significance import mean_ratio_ci
from inferperf.stats import mean_ci
from inferperf.system import collect_system
from inferperf.tune.objective import Goal
from inferperf.tune.run import TuneSpec, tune
from inferperf.tune.space import TuneSpace, apply
from inferperf.tune.trial import IsolatedEvaluator, TrialPlan


def _space(backends: list[str]) -> TuneSpace:
    return TuneSpace(backend=backends, intra_op_num_threads=[1, 2], concurrency=[1, 2],
                     session_mode=["shared", "per-stream"], graph_optimization_level=["basic", "extended", "all"],
                     enable_cpu_mem_arena=[True, False])


def _fmt(p: dict) -> str:
    short = {"intra_op_num_threads": "t", "concurrency": "c", "session_mode": "", "graph_optimization_level": "g",
             "enable_cpu_mem_arena": "arena=", "backend": ""}
    return " ".join(f"{short.get(k, k)}{v}" for k, v in p.items()) or "defaults"


def _from_cache(cached: dict, grid: list[dict], space: TuneSpace) -> tuple[list[list[float]], float]:
    """The cached grid's runs for ``grid``: points the current code normalizes to one configuration (e.g. OpenVINO
    rows that differed only in ONNX Runtime-only settings it ignores) are one configuration, their runs pooled."""
    key = lambda p: repr(sorted(space.normalize(p).items()))  # noqa: E731
    pooled: dict[str, list[float]] = {}
    for p, runs in zip(cached["grid"], cached["throughput"]):
        pooled.setdefault(key(p), []).extend(runs)
    missing = [p for p in grid if key(p) not in pooled]
    assert not missing, f"--grid-cache lacks {missing}: it holds another space"
    return [pooled[key(p)] for p in grid], cached["seconds"]


def main() -> None:
    """Grid, tune, re-measure; print the Markdown rows for BENCHMARKS.md."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="zoo:squeezenet")
    ap.add_argument("--shape", default=None, help="NAME:1x3x640x640")
    ap.add_argument("--backends", default="onnxruntime,openvino")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--final-rounds", type=int, default=5)
    ap.add_argument("--fraction", type=float, default=0.25)
    ap.add_argument("--duration-s", type=float, default=2.0)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grid-cache", type=Path, default=None,
                    help="JSON of the grid's per-run throughputs: written after the grid, reused when it exists")
    args = ap.parse_args()
    shapes = {}
    if args.shape:
        name, _, dims = args.shape.partition(":")
        shapes = {name: [int(x) for x in dims.split("x")]}
    stop = StopOptions(min_iterations=args.iterations, min_duration_s=args.duration_s, max_duration_s=60)
    base = BenchConfig(workload={"shapes": shapes}, warmup=WarmupOptions(iterations=5), stop=stop, sampler=False)
    info = collect_system()
    space = _space(args.backends.split(","))
    grid = space.grid(info)
    t0 = time.monotonic()
    if args.grid_cache and args.grid_cache.exists():
        cached = json.loads(args.grid_cache.read_text())
        tput, grid_s = _from_cache(cached, grid, space)
    else:
        runs = run_rounds([(args.model, apply(base, p)) for p in grid], args.rounds, seed=args.seed)
        grid_s = time.monotonic() - t0
        tput = [[r.metrics.throughput.samples_per_s for r in rs] for rs in runs]
        if args.grid_cache:
            args.grid_cache.write_text(json.dumps({"grid": grid, "throughput": tput, "seconds": grid_s}))
    means = [float(np.mean(t)) for t in tput]
    gbest = int(np.argmax(means))
    lo_best = mean_ci(tput[gbest])[0]
    near = {i for i, m in enumerate(means) if m >= lo_best}

    budget = math.ceil(args.fraction * len(grid))
    goal = Goal("throughput", effective_cpus=info.effective_cpus)
    out = Path(tempfile.mkdtemp(prefix="inferperf-bench-tune-"))
    spec = TuneSpec(model=args.model, base=base, space=space, goal=goal,
                    plan=TrialPlan(min_samples=args.iterations, duration_s=args.duration_s, max_stages=2),
                    n_trials=budget + 9, output=out, seed=args.seed)
    t1 = time.monotonic()
    outcome = tune(spec, IsolatedEvaluator(), info=info)
    tune_s = time.monotonic() - t1
    s = outcome.summary
    win = s["best"]["config"] if s["best"] else {}
    keyof = {repr(sorted(space.normalize(p).items())): i for i, p in enumerate(grid)}
    reached = None
    for row in sorted((r for r in s["history"] if r["state"] in ("complete", "pruned")), key=lambda r: r["number"]):
        t = outcome.study.trials[row["number"]]
        idx = keyof.get(repr(sorted(t.user_attrs.get("config", {}).items())))
        if idx in near and "cached_from" not in t.user_attrs:
            reached = t.user_attrs.get("ticket", 0) + 1
            break

    finals = [(args.model, apply(base, win)), (args.model, apply(base, grid[gbest])), (args.model, base)]
    fin = run_rounds(finals, args.final_rounds, seed=args.seed + 1)
    ft = [[r.metrics.throughput.samples_per_s for r in rs] for rs in fin]
    vs_grid = mean_ratio_ci(ft[0], ft[1])
    vs_def = mean_ratio_ci(ft[0], ft[2])
    print(f"# benchmarks/tune.py — {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {info.cpu_model}, {info.logical_cores} CPUs; onnxruntime {info.packages.get('onnxruntime')},"
          f" openvino {info.packages.get('openvino')}\n")
    print(f"grid: {len(grid)} feasible configurations x {args.rounds} rounds = {len(grid) * args.rounds} runs in"
          f" {grid_s / 60:.1f} min; best {_fmt(grid[gbest])} {means[gbest]:.4g} samples/s (95 % CI"
          f" [{lo_best:.4g}, {mean_ci(tput[gbest])[1]:.4g}]); {len(near)} configuration(s) within that interval")
    print(f"tune: search budget {budget} trials ({args.fraction:.0%} of the grid) + {spec.validation_runs} validation"
          f" runs in {tune_s / 60:.1f} min; measured {s['trials']['measured']}, cached {s['trials']['cached']};"
          f" winner {_fmt(win)}")
    print("\n| model | grid (configs x rounds) | grid best | tuned winner | trials to reach grid best | search budget |"
          " winner / grid best [95 % CI] | winner / defaults [95 % CI] | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    ok = vs_grid.low >= 0.95 and reached is not None and reached <= budget
    print(f"| {args.model}{' ' + args.shape if args.shape else ''} | {len(grid)} x {args.rounds} | {_fmt(grid[gbest])}"
          f" {means[gbest]:.4g}/s | {_fmt(win)} {np.mean(ft[0]):.4g}/s | {reached if reached else 'not reached'} |"
          f" {budget} ({budget / len(grid):.0%}) | {vs_grid.estimate:.3f} [{vs_grid.low:.3f}, {vs_grid.high:.3f}] |"
          f" {vs_def.estimate:.3f} [{vs_def.low:.3f}, {vs_def.high:.3f}] | {'met' if ok else 'NOT met'} |")
    print("\ngrid means (samples/s): " + "; ".join(f"{_fmt(p)} {m:.4g}" for p, m in
                                                  sorted(zip(grid, means), key=lambda x: -x[1])[:10]) + " ...")


if __name__ == "__main__":
    main()
