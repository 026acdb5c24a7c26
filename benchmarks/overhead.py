"""How much does inferperf's timed loop cost compared with a bare runtime loop?

Run: ``python benchmarks/overhead.py [--rounds N] [--seconds S]``

Part 1 (ONNX Runtime): for each model one ``InferenceSession`` is built with
inferperf's default settings (``intra_op_num_threads`` = effective CPUs,
sequential, graph optimisation "all") and a pool of 16 feeds built by
inferperf's own workload builder. Each round gives each of two arms about
``S`` seconds, split into ``--chunks`` slots run in ABBA order (the arm that
goes first alternates by round), so bursts of host noise and slow drift fall
on both arms alike:

* RAW: ``sess.run(None, feeds[i % 16])`` in a plain loop; the clock is read
  only once per block of calls (~1 ms), so the window is bounded in time but
  the loop body is the bare call; queries/s = calls / wall time.
* INFERPERF: ``inferperf.measure.loop.measure_stream(backend.runner(), ...)``,
  the loop ``inferperf bench`` uses with the ORT backend's own runner, over
  the same session RAW calls; queries/s = count / duration.

The figure of merit is the per-round ratio INFERPERF/RAW, summarised by its
median with a 95 % CI: exact distribution-free (order statistics, binomial)
and a percentile bootstrap (numpy, fixed seed, 10k resamples). ``--chunks 1``
gives one block per arm per round.

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
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

import inferperf
from inferperf.backends.null import NullBackend
from inferperf.backends.ort import OnnxRuntimeBackend, _tensor_info
from inferperf.clock import SYSTEM_CLOCK
from inferperf.config import BenchConfig, SessionOptions, StopOptions
from inferperf.measure.loop import StopRule, measure_stream
from inferperf.stats import median_ci
from inferperf.system import collect_system, default_intra_op_threads
from inferperf.workload.data import build_workload
from inferperf.zoo import resolve

POOL = 16
SEED = 20240601
TARGETS = {"zoo:squeezenet": 0.98, "mul_1.onnx": 0.90}
NULL_TARGET_NS = 1000.0

now = time.perf_counter_ns


def mul_1_path() -> str:
    """Path of onnxruntime's ``datasets/mul_1.onnx`` (a 3.5 µs model: the harness-cost worst case)."""
    return os.path.join(os.path.dirname(ort.__file__), "datasets", "mul_1.onnx")


# ---------------------------------------------------------------- statistics


def order_stat_ci(x: list[float], conf: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free CI of the median (``inferperf.stats.median_ci``, the interval Results carry)
    and its exact coverage 1 - 2 P(Bin(n, 1/2) <= r - 1) for the order statistics it picked."""
    from scipy.stats import binom

    lo, hi = median_ci(x, conf)
    n = len(x)
    r = int(binom.ppf((1 - conf) / 2, n, 0.5))
    return lo, hi, (1.0 - 2.0 * float(binom.cdf(r - 1, n, 0.5))) if r >= 1 else 1.0


def bootstrap_ci(x: list[float], conf: float = 0.95, n_boot: int = 10_000, seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap CI of the median."""
    a = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(n_boot, len(a)))
    meds = np.median(a[idx], axis=1)
    lo, hi = np.quantile(meds, [(1 - conf) / 2, 1 - (1 - conf) / 2])
    return float(lo), float(hi)


def verdict(lo: float, hi: float, target: float) -> str:
    """"meets" when the whole CI is at or above ``target``, "misses" when below, else "inconclusive"."""
    if lo >= target:
        return "meets (CI above target)"
    if hi < target:
        return "misses (CI below target)"
    return "inconclusive (CI includes target)"


# ---------------------------------------------------------------- part 1: ORT


def make_session(path: str) -> tuple[ort.InferenceSession, Any]:
    """inferperf's own ORT backend, loaded with its default settings; returns (its session, its runner).

    RAW calls the same session directly, so both arms share one session and differ only in the harness.
    """
    backend = OnnxRuntimeBackend(SessionOptions())
    backend.load(Path(path))
    return backend._need(), backend.runner()


def make_feeds(sess: ort.InferenceSession) -> list[dict[str, Any]]:
    """A pool of 16 seeded feeds for ``sess``'s inputs, from inferperf's workload builder."""
    inputs = [_tensor_info(a) for a in sess.get_inputs()]
    wl = build_workload(inputs, pool_size=POOL, seed=0)
    assert len(wl.feeds) == POOL
    return list(wl.feeds)


def raw_arm(sess: ort.InferenceSession, feeds: list[dict[str, Any]], seconds: float, block: int) -> tuple[int, int]:
    """Plain loop ``sess.run(None, feeds[i % 16])`` for about ``seconds``; returns (count, duration ns).

    The clock is read once per ``block`` calls only (about every millisecond), so the
    loop body is the bare call; the window is bounded in time even when the machine slows.
    """
    run = sess.run
    i = 0
    t0 = now()
    end = t0 + int(seconds * 1e9)
    while True:
        for i in range(i, i + block):
            run(None, feeds[i % 16])
        i += 1
        t1 = now()
        if t1 >= end:
            return i, t1 - t0


def inferperf_arm(runner: Any, feeds: list[dict[str, Any]], seconds: float) -> tuple[int, int]:
    """inferperf's timed loop with the backend's runner over the same session; returns (count, duration ns)."""
    s = measure_stream(runner, feeds, SYSTEM_CLOCK, StopRule(1, 0.0, 1, seconds, seconds * 2))
    if s.errors:
        raise RuntimeError(f"runtime errors in the inferperf arm: {s.errors}")
    count, dur = len(s.latency_ns), s.duration_ns
    del s
    return count, dur


def chunk_order(first: str, second: str, chunks: int) -> list[str]:
    """ABBA ABBA ...: ``chunks`` slots per arm, pairs alternating so a linear drift cancels."""
    out: list[str] = []
    for j in range(chunks):
        out += [first, second] if j % 2 == 0 else [second, first]
    return out


def ort_part(label: str, path: str, rounds: int, seconds: float, chunks: int) -> dict[str, Any]:
    """RAW vs INFERPERF in ABBA rounds on one session of ``path``; returns the per-round figures and CIs."""
    sess, runner = make_session(path)
    feeds = make_feeds(sess)
    # warm up (not counted), then estimate the per-call time to size the RAW loop's clock-check block
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
    block = max(1, min(256, int(1e6 / per_call_ns)))  # ~1 ms between clock reads in RAW
    chunk_s = seconds / chunks
    print(f"\n== {label}: {path}")
    print(f"   intra_op_num_threads={sess.get_session_options().intra_op_num_threads}, pool={len(feeds)},"
          f" est. {per_call_ns / 1e3:.1f} µs/call; per round and arm {chunks} chunk(s) of {chunk_s:g} s"
          f" (ABBA), RAW clock check every {block} call(s)")
    print(f"   {'round':>5} {'first':<10} {'raw q/s':>12} {'inferperf q/s':>14} {'ratio':>7}")
    rows = []
    for r in range(rounds):
        first, second = ("raw", "inferperf") if r % 2 == 0 else ("inferperf", "raw")
        tot = {"raw": [0, 0], "inferperf": [0, 0]}
        gc.collect()
        for arm in chunk_order(first, second, chunks):
            c, d = raw_arm(sess, feeds, chunk_s, block) if arm == "raw" else inferperf_arm(runner, feeds, chunk_s)
            tot[arm][0] += c
            tot[arm][1] += d
        q_raw = tot["raw"][0] / (tot["raw"][1] / 1e9)
        q_inf = tot["inferperf"][0] / (tot["inferperf"][1] / 1e9)
        ratio = q_inf / q_raw
        rows.append({"raw": q_raw, "inf": q_inf, "ratio": ratio, "first": first})
        print(f"   {r:>5} {first:<10} {q_raw:>12.1f} {q_inf:>14.1f} {ratio:>7.4f}")
    del sess
    ratios = [x["ratio"] for x in rows]
    lo, hi, cov = order_stat_ci(ratios)
    blo, bhi = bootstrap_ci(ratios)
    target = TARGETS[label]
    out = {
        "label": label, "path": path, "rounds": rounds, "seconds": seconds, "chunks": chunks, "per_call_us": per_call_ns / 1e3,
        "raw_med": statistics.median(x["raw"] for x in rows), "inf_med": statistics.median(x["inf"] for x in rows),
        "ratio_med": statistics.median(ratios), "os_ci": (lo, hi, cov), "bs_ci": (blo, bhi), "target": target,
        "verdict_os": verdict(lo, hi, target) + ("" if cov >= 0.95 else f"; too few rounds: coverage {cov:.2f}"),
        "verdict_bs": verdict(blo, bhi, target),
        "added_ns": None,
    }
    # implied time inferperf adds per query: 1/inf - 1/raw (per-round, median)
    out["added_ns"] = statistics.median(1e9 / x["inf"] - 1e9 / x["raw"] for x in rows)
    print(f"   median ratio {out['ratio_med']:.4f}; 95% CI order-stat [{lo:.4f}, {hi:.4f}] (cov {cov:.3f}),"
          f" bootstrap [{blo:.4f}, {bhi:.4f}]; target {target}: {out['verdict_os']}"
          f" / bootstrap: {out['verdict_bs']}")
    print(f"   implied added time per query (median over rounds of 1/q_inferperf - 1/q_raw): {out['added_ns']:.0f} ns"
          + (" (not resolved: the ratio's CI includes 1)" if lo <= 1.0 <= hi else ""))
    return out


# ---------------------------------------------------------------- part 2: null backend


def null_part(rounds: int, seconds: float, rng: np.random.Generator) -> dict[str, Any]:
    """inferperf's per-iteration cost on the null backend against bare loops, in shuffled rounds (ns)."""
    run = NullBackend(SessionOptions()).runner()
    feeds = [{"x": i} for i in range(POOL)]
    # size the bare loops from a short probe of the 2-clock loop
    probe = 200_000
    t0 = now()
    for i in range(probe):
        a = now()  # noqa: F841 - the reads are the point: this probe mirrors the timed loop
        run(feeds[i % 16])
        b = now()
    per = (now() - t0) / probe
    n_iter = int(seconds * 1e9 / per)

    def arm_inferperf() -> float:
        s = measure_stream(run, feeds, SYSTEM_CLOCK, StopRule(1, 0.0, 1, seconds, seconds * 2))
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
    """One full ``inferperf.bench()`` of ``model`` for reference (not part of the ratio)."""
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
    """The Markdown summary pasted into BENCHMARKS.md."""
    si = collect_system()
    lines = [
        f"Command: `{cmd}`  ",
        f"Date: {date}; total run time {elapsed:.0f} s  ",
        f"Machine: {si.cpu_model}, {si.logical_cores} logical CPUs (effective {si.effective_cpus}),"
        f" {platform.system()} {platform.release()}  ",
        f"Software: Python {platform.python_version()}, onnxruntime {ort.__version__},"
        f" numpy {np.__version__}, inferperf {inferperf.__version__}  ",
        f"Session: intra_op_num_threads={default_intra_op_threads()}, sequential, graph optimisation all,"
        f" CPUExecutionProvider; pool of {POOL} feeds; one session per model shared by both arms",
        "",
        "| model | µs/call | rounds × s/arm (chunks) | RAW q/s (median) | inferperf q/s (median) | ratio inferperf/RAW (median)"
        " | 95 % CI, order stat. | 95 % CI, bootstrap | added ns/query (median of 1/q_inf − 1/q_raw) | target | verdict |",
        "|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|",
    ]
    for o in ort_rows:
        lo, hi, cov = o["os_ci"]
        blo, bhi = o["bs_ci"]
        added = f"{o['added_ns']:.0f}" if not lo <= 1.0 <= hi else "not resolved (CI includes 1)"
        lines.append(
            f"| {o['label']} | {o['per_call_us']:.1f} | {o['rounds']} × {o['seconds']:g} ({o['chunks']}) | {o['raw_med']:.1f}"
            f" | {o['inf_med']:.1f} | {o['ratio_med']:.4f} | [{lo:.4f}, {hi:.4f}] (cov. {cov:.3f})"
            f" | [{blo:.4f}, {bhi:.4f}] | {added} | ≥ {o['target']} | {o['verdict_os']} |")
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
    """Parse the flags, run both parts and print the per-round lines and the summary."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="interleaved rounds per model (>= 10 advised)")
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds per arm per round (ONNX Runtime part)")
    ap.add_argument("--chunks", type=int, default=4,
                    help="slots per arm per round, in ABBA order (1: one block per arm, order alternating by round)")
    ap.add_argument("--null-rounds", type=int, default=5)
    ap.add_argument("--null-seconds", type=float, default=1.0, help="seconds per arm per round (null part)")
    ap.add_argument("--no-bench", action="store_true", help="skip the reference inferperf.bench() runs")
    args = ap.parse_args()
    if args.rounds < 2 or args.chunks < 1 or args.null_rounds < 1 or args.seconds <= 0 or args.null_seconds <= 0:
        ap.error("need --rounds >= 2, --chunks >= 1, --null-rounds >= 1 and positive durations")

    cmd = shlex.join(["python", *sys.argv])
    date = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    t_start = time.monotonic()
    rng = np.random.default_rng(SEED)
    si = collect_system()
    print(f"{cmd}\n{date}; {si.cpu_model}; {si.logical_cores} logical CPUs (effective {si.effective_cpus});"
          f" onnxruntime {ort.__version__}; Python {platform.python_version()}")

    models = [("zoo:squeezenet", str(resolve("zoo:squeezenet"))), ("mul_1.onnx", mul_1_path())]
    ort_rows = [ort_part(label, path, args.rounds, args.seconds, args.chunks) for label, path in models]
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
