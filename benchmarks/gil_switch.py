"""Does Python's GIL switch interval, or its garbage collector, shape a served replica's latency? (issue 39 item 3)

One replica (1 instance of 1 intra-op thread, batching off) served on the last CPU, open-loop Poisson load from the
others, the server's interpreter started with ``sys.setswitchinterval(S)`` for each S of ``--intervals-ms`` (a
``sitecustomize`` on the child's PYTHONPATH sets it before inferperf loads), in interleaved rounds. If a thread
waiting for the GIL got it only after the holder was forced to drop it (CPython's ``take_gil``: the waiter asks
for a drop after one interval without a switch), the waits, and the tail, would scale with S; if the holder's
voluntary releases (every socket syscall and every ``epoll_wait`` of the event loop, the runtime call of the
instance thread) hand it over, S would not matter. Each arm may also run the server with its cyclic garbage
collector off (``gc.disable()`` in the same ``sitecustomize``): a collection of the older generations stops every
Python thread of the server for its length, which a tail would show.

Prints, per interval and round: the client's p50 / p99 (ms), the server's own request time p50 / p99 and its model
call p99 (ms, from the server's Result), and the throughput.

    python benchmarks/gil_switch.py --model zoo:tiny-cnn --rate 1800 --duration-s 10 --rounds 2 --arms 0.5:on,5:on,20:on
    python benchmarks/gil_switch.py --model zoo:tiny-cnn --rate 1800 --duration-s 10 --rounds 2 --arms 5:on,5:off
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

SITE = """import gc, os, sys
_s = os.environ.get("INFERPERF_BENCH_SWITCH_S")
if _s:
    sys.setswitchinterval(float(_s))
if os.environ.get("INFERPERF_BENCH_GC") == "off":
    gc.disable()
"""


def one(model: str, interval_s: float, gc_on: bool, rate: float, seconds: float, site_dir: str) -> dict:
    """One served run at ``rate`` with the server's switch interval ``interval_s`` and its garbage collector
    on or off; its figures."""
    from inferperf.config import BenchConfig
    from inferperf.loadgen.options import LoadConfig
    from inferperf.loadgen.run import load
    from inferperf.serve.child import own_server, split_cpus

    gen, srv = split_cpus(sorted(os.sched_getaffinity(0)))
    srv = srv[-1:]
    gen = [c for c in sorted(os.sched_getaffinity(0)) if c not in srv]
    env = {"INFERPERF_BENCH_SWITCH_S": str(interval_s), "INFERPERF_BENCH_GC": "on" if gc_on else "off",
           "PYTHONPATH": os.pathsep.join([site_dir, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}})
    try:
        with own_server(model, srv, cfg, {"instance_count": 1, "max_batch_size": 1}) as (url, name, stop):
            before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, gen)
            try:
                rs = load(LoadConfig(url=url, model=name, protocol="binary", request_rate=[rate], arrival="poisson",
                                     duration_s=seconds, warmup_s=1.0, max_trials=1, timeout_ms=30_000))
            finally:
                os.sched_setaffinity(0, before)
            served = stop()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    lat = rs[0].metrics.latency_ms
    s = (served.metrics.server if served is not None else None) or {}
    req, comp = s.get("request_ms") or {}, s.get("compute_ms") or {}
    return {"interval_ms": interval_s * 1e3, "gc": "on" if gc_on else "off", "p50": lat.p50, "p99": lat.p99,
            "server_p50": req.get("p50"), "server_p99": req.get("p99"), "call_p99": comp.get("p99"),
            "throughput": rs[0].metrics.throughput.queries_per_s}


def main() -> None:
    """Parse the arguments, run every interval in interleaved rounds, print one row per run."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:tiny-cnn")
    ap.add_argument("--rate", type=float, default=1500.0, help="requests/s, open loop (Poisson)")
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--arms", default="0.5:on,5:on,20:on",
                    help="INTERVAL_MS:on|off,...: the server's sys.setswitchinterval (ms) and its garbage collector")
    a = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("gil_switch.py needs 2 CPUs: one for the server, the rest for the load")
    try:
        arms = [(float(ms) / 1e3, gc_arm == "on") for ms, gc_arm in (x.split(":") for x in a.arms.split(","))]
        if any(s <= 0 for s, _ in arms) or any(x.split(":")[1] not in ("on", "off") for x in a.arms.split(",")):
            raise ValueError
    except ValueError:
        ap.error(f"--arms {a.arms!r}: give INTERVAL_MS:on|off pairs, intervals > 0, e.g. 5:on,5:off")
    rows = []
    with tempfile.TemporaryDirectory() as site:
        Path(site, "sitecustomize.py").write_text(SITE)
        for r in range(a.rounds):
            order = arms if r % 2 == 0 else arms[::-1]  # A B C, C B A
            for s, gc_on in order:
                row = {"round": r + 1, **one(a.model, s, gc_on, a.rate, a.duration_s, site)}
                print(f"  round {row['round']} interval {row['interval_ms']:g} ms gc {row['gc']}: p50 {row['p50']:.3g} p99 "
                      f"{row['p99']:.3g} ms", file=sys.stderr, flush=True)
                rows.append(row)
    fmt = lambda v: "-" if v is None else f"{v:.3g}"  # noqa: E731
    print(f"| switch interval ms | gc | round | client p50 / p99 ms | server request p50 / p99 ms | model call p99 ms | "
          f"throughput/s |  ({a.model}, {a.rate:g} req/s Poisson, {a.duration_s:g} s)")
    print("|---|---|---|---|---|---|---|")
    for row in sorted(rows, key=lambda x: (x["interval_ms"], x["gc"], x["round"])):
        print(f"| {row['interval_ms']:g} | {row['gc']} | {row['round']} | {fmt(row['p50'])} / {fmt(row['p99'])} | "
              f"{fmt(row['server_p50'])} / {fmt(row['server_p99'])} | {fmt(row['call_p99'])} | "
              f"{fmt(row['throughput'])} |")


if __name__ == "__main__":
    main()
