"""Why does a served replica's event loop cost less CPU per request as the load rises? (issue 39, leftover 1)

One replica (1 instance of 1 intra-op thread, batching off) served on the last CPU, open-loop Poisson load from the
others at each of ``--rates`` (requests/s), in rounds whose order alternates (A B C, C B A). Around each step the
server's threads are read as ``plan --calibrate`` reads them (:func:`inferperf.plan.calibrate.step_cost`: CPU ns
from ``/proc/PID/task/TID/schedstat``, and the loop thread's voluntary context switches from ``.../status``: its
sleeps in ``epoll_wait``, one per wake-up). The loop's CPU over every step is then fitted per request + per
wake-up (non-negative least squares, ``scipy.optimize.nnls``, no intercept), and each step's CPU per request is
compared with that fit and with one figure per request (what ``plan --calibrate`` uses for batching off:
:func:`inferperf.plan.calibrate.split_loop_cost`).

Prints, per step: the offered and served rate, the loop's CPU per request (ms) and wake-ups per request; then the
fit and each step's error under it and under one figure per request.

    python benchmarks/loop_wakeups.py --model zoo:tiny-cnn --rates 200,500,1000,1500,2000,3000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import sys


def run(model: str, rates: list[float], rounds: int, seconds: float) -> list[dict]:
    """Every step's :func:`~inferperf.plan.calibrate.step_cost` plus ``round``, one server for all of them."""
    import httpx

    from inferperf.clock import monotonic_s
    from inferperf.config import BenchConfig
    from inferperf.loadgen.options import LoadConfig
    from inferperf.loadgen.run import load
    from inferperf.measure.threads import read_threads
    from inferperf.plan.calibrate import step_cost
    from inferperf.serve.child import own_server

    cpus = sorted(os.sched_getaffinity(0))
    srv, gen = cpus[-1:], cpus[:-1]
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}})
    steps = []
    with own_server(model, srv, cfg, {"instance_count": 1, "max_batch_size": 1}) as (url, name, stop):
        pid = stop.pid

        def stats() -> dict:
            return httpx.get(f"{url}/v2/models/{name}/stats", timeout=10).json()["model_stats"][0]

        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, gen)
        try:
            for r in range(rounds):
                for rate in rates if r % 2 == 0 else rates[::-1]:
                    lc = LoadConfig(url=url, model=name, protocol="binary", request_rate=[rate], arrival="poisson",
                                    duration_s=seconds, warmup_s=0.0, max_trials=1, timeout_ms=30_000)
                    s0, t0, th0 = stats(), monotonic_s(), read_threads(pid)
                    load(lc)
                    th1, t1, s1 = read_threads(pid), monotonic_s(), stats()
                    st = {**step_cost(th0, th1, s0, s1, t1 - t0, len(srv), rate), "round": r + 1}
                    print(f"  round {r + 1} {rate:g} req/s: loop {st['loop_cpu_ms_per_request']:.3g} ms, "
                          f"{st['loop_wakeups_per_request']:.2f} wake-ups a request", file=sys.stderr, flush=True)
                    steps.append(st)
        finally:
            os.sched_setaffinity(0, before)
            stop()
    return steps


def main() -> None:
    """Parse the arguments, run the steps, print the table and the fit."""
    import numpy as np
    from scipy.optimize import nnls

    from inferperf.plan.calibrate import split_loop_cost

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="zoo:tiny-cnn")
    ap.add_argument("--rates", default="200,500,1000,1500,2000,3000", help="requests/s, open loop (Poisson)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration-s", type=float, default=4.0)
    a = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("loop_wakeups.py needs 2 CPUs: one for the server, the rest for the load")
    try:
        rates = [float(x) for x in a.rates.split(",")]
        if not rates or any(not x > 0 for x in rates) or a.rounds < 1 or not a.duration_s > 0:
            raise ValueError
    except ValueError:
        ap.error(f"--rates {a.rates!r} --rounds {a.rounds} --duration-s {a.duration_s}: give rates > 0 "
                 "(e.g. 200,1000,3000), rounds >= 1 and seconds > 0")
    steps = run(a.model, rates, a.rounds, a.duration_s)
    loop = [s["roles"]["event-loop"] for s in steps]
    (per_request, wake), _ = nnls(np.array([[s["requests"], lo["wakeups"]] for s, lo in zip(steps, loop)], float),
                                  np.array([lo["cpu_ns"] / 1e6 for lo in loop]))
    flat = split_loop_cost(steps)["per_request_ms"]
    print(f"| offered req/s | round | served req/s | loop CPU ms / request | wake-ups / request | fit error | "
          f"one-figure error |  ({a.model}, {a.duration_s:g} s a step)")
    print("|---|---|---|---|---|---|---|")
    for s in sorted(steps, key=lambda x: (x["rate_per_s"], x["round"])):
        y, w = s["loop_cpu_ms_per_request"], s["loop_wakeups_per_request"]
        pred = per_request + wake * w
        print(f"| {s['rate_per_s']:g} | {s['round']} | {s['throughput_per_s']:.4g} | {y:.3g} | {w:.2f} | "
              f"{(pred / y - 1) * 100:+.0f} % | {(flat / y - 1) * 100:+.0f} % |")
    print(f"fit: {per_request:.3g} ms a request + {wake:.3g} ms a wake-up; one figure (plan --calibrate's): "
          f"{flat:.3g} ms a request")


if __name__ == "__main__":
    main()
