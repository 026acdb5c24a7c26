"""How much does inferperf's timed loop cost compared with a bare runtime loop?

Run: ``python benchmarks/overhead.py [--rounds N] [--seconds S]``

Part 1 (ONNX Runtime): for each model one ``InferenceSession`` is built with
inferperf's default settings (``intra_op_num_threads`` = effective CPUs,
sequential, graph optimisation "all") and a pool of 16 feeds built by
inferperf's own workload builder. In each round two arms run for about ``S``
seconds each, in alternating order (a fixed-seed shuffle):

* RAW: ``for i in range(N): sess.run(None, feeds[i % 16])`` with ``N`` chosen
  beforehand so the loop lasts about ``S`` s; no clock read inside the loop;
  queries/s = N / wall time.
* INFERPERF: ``inferperf.measure.loop.measure_stream(partial(sess.run, None), ...)``,
  the loop ``inferperf bench`` uses; queries/s = count / duration.

The figure of merit is the per-round ratio INFERPERF/RAW (both arms share the
round, so the machine's slow drift cancels), summarised by its median with a
95 % CI: exact distribution-free (order statistics, binomial) and a
percentile bootstrap (numpy, fixed seed, 10k resamples).

Part 2 (null backend): ``NullBackend`` with latency 0 gives a runner that
returns at once, so ``measure_stream`` over it times inferperf's own cost per
iteration. It is compared with a bare Python loop calling the same function
between two ``perf_counter_ns`` reads (the unavoidable part) and with a bare
loop making the call alone.

Part 3: one full ``inferperf.bench()`` per model for reference (includes
session creation and warm-up, so it is not part of the ratio).

A Markdown summary is printed at the end, ready for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import math
import os
import platform
import shlex
import statistics
import sys
import time
from functools import partial
from typing import Any

import numpy as np
import onnxruntime as ort

import inferperf
from inferperf.backends.null import NullBackend
from inferperf.backends.ort import _tensor_info
from inferperf.clock import SYSTEM_CLOCK
from inferperf.config import BenchConfig, SessionOptions, StopOptions
from inferperf.measure.loop import measure_stream
from inferperf.system import collect_system, default_intra_op_threads
from inferperf.workload.data import build_workload
from inferperf.zoo import resolve

POOL = 16
SEED = 20240601
TARGETS = {"zoo:squeezenet": 0.98, "mul_1.onnx": 0.90}
NULL_TARGET_NS = 1000.0

now = time.perf_counter_ns


def mul_1_path() -> str:
    return os.path.join(os.path.dirname(ort.__file__), "datasets", "mul_1.onnx")


# ---------------------------------------------------------------- statistics


def order_stat_ci(x: list[float], conf: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free CI for the median: (x_(k), x_(n-k+1)), the narrowest with coverage >= conf.

    Returns (lo, hi, exact coverage). With n < 6 no such interval reaches 95 %: (min, max) is returned.
    """
    xs = sorted(x)
    n = len(xs)

    def coverage(k: int) -> float:  # P(x_(k) <= median < x_(n-k+1)) = 1 - 2 * P(Bin(n, .5) <= k-1)
        return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(k)) / 2**n

    best = 1
    for k in range(1, n // 2 + 1):
        if coverage(k) >= conf:
            best = k
    return xs[best - 1], xs[n - best], coverage(best)


def bootstrap_ci(x: list[float], conf: float = 0.95, n_boot: int = 10_000, seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap CI of the median."""
    a = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(n_boot, len(a)))
    meds = np.median(a[idx], axis=1)
    lo, hi = np.quantile(meds, [(1 - conf) / 2, 1 - (1 - conf) / 2])
    return float(lo), float(hi)


def verdict(lo: float, hi: float, target: float) -> str:
    if lo >= target:
        return "meets (CI above target)"
    if hi < target:
        return "misses (CI below target)"
    return "inconclusive (CI includes target)"


# ---------------------------------------------------------------- part 1: ORT


def make_session(path: str) -> ort.InferenceSession:
    """An InferenceSession with inferperf's default settings (see backends/ort.py)."""
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = default_intra_op_threads()
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def make_feeds(sess: ort.InferenceSession) -> list[dict[str, Any]]:
    inputs = [_tensor_info(a) for a in sess.get_inputs()]
    wl = build_workload(inputs, pool_size=POOL, seed=0)
    assert len(wl.feeds) == POOL
    return list(wl.feeds)


def raw_arm(sess: ort.InferenceSession, feeds: list[dict[str, Any]], n_iter: int) -> tuple[float, int, int]:
    """Plain loop, no clock read inside. Returns (queries/s, count, duration ns)."""
    run = sess.run
    t0 = now()
    for i in range(n_iter):
        run(None, feeds[i % 16])
    t1 = now()
    return n_iter / ((t1 - t0) / 1e9), n_iter, t1 - t0


def inferperf_arm(sess: ort.InferenceSession, feeds: list[dict[str, Any]], seconds: float) -> tuple[float, int, int]:
    s = measure_stream(partial(sess.run, None), feeds, SYSTEM_CLOCK, min_iterations=1,
                       min_duration_s=seconds, max_duration_s=seconds * 2)
    if s.errors:
        raise RuntimeError(f"runtime errors in the inferperf arm: {s.errors}")
    count, dur = len(s.latency_ns), s.duration_ns
    del s
    return count / (dur / 1e9), count, dur


def ort_part(label: str, path: str, rounds: int, seconds: float) -> dict[str, Any]:
    sess = make_session(path)
    feeds = make_feeds(sess)
    # warm up (not counted), then estimate the per-call time to size the RAW loop
    for min_s in (1.0, 0.5):  # 1 s of warm-up, then 0.5 s to estimate the per-call time
        n = 0
        t0 = now()
        t_end = t0 + int(min_s * 1e9)
        while True:
            sess.run(None, feeds[n % 16])
            n += 1
            t1 = now()
            if n >= 20 and t1 >= t_end:
                break
        per_call_ns = (t1 - t0) / n
    n_iter = max(10, int(seconds * 1e9 / per_call_ns))
    print(f"\n== {label}: {path}")
    print(f"   intra_op_num_threads={sess.get_session_options().intra_op_num_threads}, pool={len(feeds)},"
          f" est. {per_call_ns / 1e3:.1f} µs/call, RAW loop N={n_iter}")
    print(f"   {'round':>5} {'order':<15} {'raw q/s':>12} {'inferperf q/s':>14} {'ratio':>7}")
    rows = []
    for r in range(rounds):
        order = ["raw", "inferperf"] if r % 2 == 0 else ["inferperf", "raw"]
        res: dict[str, tuple[float, int, int]] = {}
        for arm in order:
            gc.collect()
            res[arm] = raw_arm(sess, feeds, n_iter) if arm == "raw" else inferperf_arm(sess, feeds, seconds)
        ratio = res["inferperf"][0] / res["raw"][0]
        rows.append({"raw": res["raw"][0], "inf": res["inferperf"][0], "ratio": ratio, "order": order,
                     "n_raw": res["raw"][1], "n_inf": res["inferperf"][1]})
        print(f"   {r:>5} {'>'.join(order):<15} {res['raw'][0]:>12.1f} {res['inferperf'][0]:>14.1f} {ratio:>7.4f}")
    del sess
    ratios = [x["ratio"] for x in rows]
    lo, hi, cov = order_stat_ci(ratios)
    blo, bhi = bootstrap_ci(ratios)
    target = TARGETS[label]
    out = {
        "label": label, "path": path, "rounds": rounds, "seconds": seconds, "per_call_us": per_call_ns / 1e3,
        "raw_med": statistics.median(x["raw"] for x in rows), "inf_med": statistics.median(x["inf"] for x in rows),
        "ratio_med": statistics.median(ratios), "os_ci": (lo, hi, cov), "bs_ci": (blo, bhi), "target": target,
        "verdict_os": verdict(lo, hi, target), "verdict_bs": verdict(blo, bhi, target),
        "added_ns": None,
    }
    # implied time inferperf adds per query: 1/inf - 1/raw (per-round, median)
    out["added_ns"] = statistics.median(1e9 / x["inf"] - 1e9 / x["raw"] for x in rows)
    print(f"   median ratio {out['ratio_med']:.4f}; 95% CI order-stat [{lo:.4f}, {hi:.4f}] (cov {cov:.3f}),"
          f" bootstrap [{blo:.4f}, {bhi:.4f}]; target {target}: {out['verdict_os']}"
          f" / bootstrap: {out['verdict_bs']}")
    print(f"   implied added time per query (median over rounds): {out['added_ns']:.0f} ns")
    return out


# ---------------------------------------------------------------- part 2: null backend


def null_part(rounds: int, seconds: float, rng: np.random.Generator) -> dict[str, Any]:
    run = NullBackend(SessionOptions()).runner()
    feeds = [{"x": i} for i in range(POOL)]
    # size the bare loops from a short probe of the 2-clock loop
    probe = 200_000
    t0 = now()
    for i in range(probe):
        a = now()
        run(feeds[i % 16])
        b = now()
    per = (now() - t0) / probe
    n_iter = int(seconds * 1e9 / per)

    def arm_inferperf() -> float:
        s = measure_stream(run, feeds, SYSTEM_CLOCK, min_iterations=1, min_duration_s=seconds,
                           max_duration_s=seconds * 2)
        v = s.duration_ns / len(s.latency_ns)
        del s
        return v

    def arm_two_clocks() -> float:
        t_begin = now()
        t1 = t_begin
        for i in range(n_iter):
            t0 = now()
            run(feeds[i % 16])
            t1 = now()
        return (t1 - t_begin) / n_iter

    def arm_call_only() -> float:
        t_begin = now()
        for i in range(n_iter):
            run(feeds[i % 16])
        return (now() - t_begin) / n_iter

    arms = {"inferperf measure_stream": arm_inferperf, "bare loop + 2 perf_counter_ns": arm_two_clocks,
            "bare loop, call only": arm_call_only}
    res: dict[str, list[float]] = {k: [] for k in arms}
    print(f"\n== null backend (latency 0), {rounds} rounds x ~{seconds} s per arm, bare loops N={n_iter}")
    for r in range(rounds):
        order = list(arms)
        rng.shuffle(order)
        line = []
        for k in order:
            gc.collect()
            v = arms[k]()
            res[k].append(v)
            line.append(f"{k}={v:.0f}")
        print(f"   round {r}: " + ", ".join(line) + " ns/iter")
    added = [a - b for a, b in zip(res["inferperf measure_stream"], res["bare loop + 2 perf_counter_ns"])]
    out = {"rounds": rounds, "seconds": seconds,
           "med": {k: statistics.median(v) for k, v in res.items()},
           "rng": {k: (min(v), max(v)) for k, v in res.items()},
           "added_med": statistics.median(added), "added_rng": (min(added), max(added))}
    for k in arms:
        lo, hi = out["rng"][k]
        print(f"   {k:<32} median {out['med'][k]:7.1f} ns/iter  (range {lo:.1f}–{hi:.1f})")
    print(f"   added by inferperf beyond the two clock reads: median {out['added_med']:.1f} ns/iter"
          f" (per-round range {out['added_rng'][0]:.1f}–{out['added_rng'][1]:.1f});"
          f" target < {NULL_TARGET_NS:.0f} ns total: "
          f"{'met' if out['med']['inferperf measure_stream'] < NULL_TARGET_NS else 'NOT met'}")
    return out


# ---------------------------------------------------------------- part 3: reference bench()


def bench_ref(label: str, model: str, seconds: float) -> dict[str, Any]:
    cfg = BenchConfig(stop=StopOptions(min_iterations=1, min_duration_s=seconds, max_duration_s=seconds * 2))
    r = inferperf.bench(model, cfg, command=sys.argv)
    m = r.metrics
    out = {"label": label, "qps": m.throughput.queries_per_s, "p50_ms": m.latency_ms.p50,
           "create_ms": m.cold_start.session_create_ms, "valid": r.validity.valid}
    print(f"   bench({label}): {out['qps']:.1f} q/s, p50 {out['p50_ms']:.4f} ms,"
          f" session create {out['create_ms']:.1f} ms, valid={out['valid']}")
    return out


# ---------------------------------------------------------------- summary


def summary_md(cmd: str, date: str, ort_rows: list[dict[str, Any]], null: dict[str, Any],
               refs: list[dict[str, Any]], elapsed: float) -> str:
    si = collect_system()
    lines = [
        f"Command: `{cmd}`  ",
        f"Date: {date}; total run time {elapsed:.0f} s  ",
        f"Machine: {si.cpu_model}, {si.logical_cores} logical CPUs (effective {si.effective_cpus}),"
        f" {platform.system()} {platform.release()}  ",
        f"Software: Python {platform.python_version()}, onnxruntime {ort.__version__},"
        f" numpy {np.__version__}, inferperf {inferperf.__version__}  ",
        f"Session: intra_op_num_threads={default_intra_op_threads()}, sequential, graph optimisation all,"
        f" CPUExecutionProvider; pool of {POOL} feeds",
        "",
        "| model | µs/call | rounds × s/arm | RAW q/s (median) | inferperf q/s (median) | ratio inferperf/RAW (median)"
        " | 95 % CI, order stat. | 95 % CI, bootstrap | added ns/query | target | verdict |",
        "|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|",
    ]
    for o in ort_rows:
        lo, hi, cov = o["os_ci"]
        blo, bhi = o["bs_ci"]
        lines.append(
            f"| {o['label']} | {o['per_call_us']:.1f} | {o['rounds']} × {o['seconds']:g} | {o['raw_med']:.1f}"
            f" | {o['inf_med']:.1f} | {o['ratio_med']:.4f} | [{lo:.4f}, {hi:.4f}] (cov. {cov:.3f})"
            f" | [{blo:.4f}, {bhi:.4f}] | {o['added_ns']:.0f} | ≥ {o['target']} | {o['verdict_os']} |")
    lines += [
        "",
        f"Null backend (latency 0), {null['rounds']} rounds × ~{null['seconds']:g} s per arm, order shuffled"
        " (fixed seed):",
        "",
        "| loop | ns/iteration (median) | range over rounds |",
        "|---|---:|---:|",
    ]
    for k, v in null["med"].items():
        lo, hi = null["rng"][k]
        lines.append(f"| {k} | {v:.1f} | {lo:.1f}–{hi:.1f} |")
    lines.append(f"| **added by inferperf** (measure_stream − 2-clock loop, per round) | {null['added_med']:.1f}"
                 f" | {null['added_rng'][0]:.1f}–{null['added_rng'][1]:.1f} |")
    met = "met" if null["med"]["inferperf measure_stream"] < NULL_TARGET_NS else "not met"
    lines.append(f"\nTarget < {NULL_TARGET_NS:.0f} ns per iteration: {met}.")
    if refs:
        lines += [
            "",
            "Reference: one full `inferperf.bench()` per model (includes session creation and warm-up;"
            " one round, not interleaved, not part of the ratio):",
            "",
            "| model | queries/s | p50 ms | session create ms | valid |",
            "|---|---:|---:|---:|---|",
        ]
        for r in refs:
            lines.append(f"| {r['label']} | {r['qps']:.1f} | {r['p50_ms']:.4f} | {r['create_ms']:.1f} | {r['valid']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds per model (>= 10 advised)")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds per arm per round (ONNX Runtime part)")
    ap.add_argument("--null-rounds", type=int, default=7)
    ap.add_argument("--null-seconds", type=float, default=1.0, help="seconds per arm per round (null part)")
    ap.add_argument("--no-bench", action="store_true", help="skip the reference inferperf.bench() runs")
    args = ap.parse_args()
    if args.rounds < 2 or args.null_rounds < 1 or args.seconds <= 0 or args.null_seconds <= 0:
        ap.error("need --rounds >= 2, --null-rounds >= 1 and positive durations")

    cmd = shlex.join(["python", *sys.argv])
    date = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    t_start = time.monotonic()
    rng = np.random.default_rng(SEED)
    si = collect_system()
    print(f"{cmd}\n{date}; {si.cpu_model}; {si.logical_cores} logical CPUs (effective {si.effective_cpus});"
          f" onnxruntime {ort.__version__}; Python {platform.python_version()}")

    models = [("zoo:squeezenet", str(resolve("zoo:squeezenet"))), ("mul_1.onnx", mul_1_path())]
    ort_rows = [ort_part(label, path, args.rounds, args.seconds) for label, path in models]
    null = null_part(args.null_rounds, args.null_seconds, rng)
    refs = []
    if not args.no_bench:
        print("\n== reference: full inferperf.bench() per model (not part of the ratio)")
        refs = [bench_ref(label, model, args.seconds) for label, model in
                [("zoo:squeezenet", "zoo:squeezenet"), ("mul_1.onnx", mul_1_path())]]
    elapsed = time.monotonic() - t_start
    print("\n---- Markdown summary ----\n")
    print(summary_md(cmd, date, ort_rows, null, refs, elapsed))


if __name__ == "__main__":
    main()
