"""What a simulated serving run predicts: throughput, latency percentiles, rejections, utilisation, batch size,
what the tail is made of, and intervals by resampling the measured service times.

The measured window skips a warm-up (the first ``warmup_fraction`` of the arrival span: an empty system
is not steady state) and ends at the last arrival. Latency is counted from the intended send time to the
end of the request's batch (rejected requests have none; they count in ``rejected_share``). Percentiles
are linear-interpolated (:func:`inferperf.stats.percentile`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..stats import percentile
from .serving_sim import SimRun

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
#: tail parts, in the order they happen to a request
PARTS = ("server_overhead", "queueing", "batching_delay", "service")


@dataclass
class Prediction:
    """Figures of one simulated configuration at one offered rate (ms, per s, percent, rows).

    Attributes:
        offered_per_s: arrivals per s in the window. throughput_per_s: requests finished per s in the window.
        latency_ms: ``p50``, ``p90``, ``p99``, ``p999``, ``mean`` of the window's finished requests.
        rejected_share: rejected / arrived in the window (0..1).
        utilisation: busy instance time in the window / (replicas x instances x window) (0..1).
        mean_batch_rows, mean_batch_requests: over the window's model calls.
        tail_ms: mean of each part (:data:`PARTS`) over requests at or above the p99; ``dominant``: the largest.
        requests: finished requests in the window. backlog_growing: the queue still grew at the end
            (throughput under 98 % of the admitted rate: past saturation, percentiles depend on the duration).
        steady: the run was long enough for a steady state (set by the caller that sized it; True by default).
    """

    offered_per_s: float
    throughput_per_s: float
    latency_ms: dict[str, float]
    rejected_share: float
    utilisation: float
    mean_batch_rows: float
    mean_batch_requests: float
    tail_ms: dict[str, float]
    dominant: str
    requests: int
    backlog_growing: bool
    steady: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict."""
        return asdict(self)


def summarize(run: SimRun, warmup_fraction: float = 0.1) -> Prediction:
    """The figures of ``run`` over its window (see the module docstring).

    Raises:
        ValueError: a run with fewer than two arrivals or an empty window.
    """
    arr = run.arrival_ns
    if arr.size < 2 or arr[-1] <= arr[0]:
        raise ValueError("a simulated run needs at least two arrivals spread in time")
    t0 = int(arr[0] + (arr[-1] - arr[0]) * warmup_fraction)
    t1 = int(arr[-1])
    span_s = (t1 - t0) / 1e9
    win = (arr >= t0) & (arr <= t1)
    ok = win & ~run.rejected
    n_win, n_ok = int(win.sum()), int(ok.sum())
    lat = (run.done_ns[ok] - arr[ok]).astype(np.float64) / 1e6
    done_in = int(((run.done_ns >= t0) & (run.done_ns <= t1) & ~run.rejected).sum())
    lat_ms = {k: percentile(lat, q) for k, q in PERCENTILES.items()} if n_ok else {k: float("inf") for k in PERCENTILES}
    lat_ms["mean"] = float(lat.mean()) if n_ok else float("inf")
    busy = np.clip(np.minimum(run.batch_end_ns, t1) - np.maximum(run.batch_start_ns, t0), 0, None).sum()
    cap = run.setup.replicas * run.setup.instances * (t1 - t0)
    bwin = (run.batch_start_ns >= t0) & (run.batch_start_ns <= t1)
    parts = {
        "server_overhead": run.admit_ns - arr,
        "queueing": run.dispatch_ns - run.admit_ns - run.batching_ns,
        "batching_delay": run.batching_ns,
        "service": run.done_ns - run.dispatch_ns,
    }
    tail = ok & ((run.done_ns - arr) / 1e6 >= lat_ms["p99"]) if n_ok else ok
    tail_ms = {k: float(v[tail].mean()) / 1e6 if tail.any() else 0.0 for k, v in parts.items()}
    admitted = n_ok / span_s if span_s else 0.0
    thr = done_in / span_s
    return Prediction(
        offered_per_s=n_win / span_s, throughput_per_s=thr, latency_ms=lat_ms,
        rejected_share=(n_win - n_ok) / n_win if n_win else 0.0,
        utilisation=float(busy) / cap if cap else 0.0,
        mean_batch_rows=float(run.batch_size_rows[bwin].mean()) if bwin.any() else 0.0,
        mean_batch_requests=float(run.batch_requests[bwin].mean()) if bwin.any() else 0.0,
        tail_ms=tail_ms, dominant=max(tail_ms, key=lambda k: tail_ms[k]), requests=n_ok,
        backlog_growing=bool(admitted > 0 and thr < 0.98 * admitted),
    )


def intervals(runs: Callable[[int], SimRun], rounds: int = 20, confidence: float = 0.95,
              warmup_fraction: float = 0.1) -> dict[str, list[float]]:
    """Percentile intervals of the main figures over ``rounds`` simulations ``runs(k)`` (k = 0..rounds-1; the
    caller resamples the measured service times and redraws the arrivals for each k, so the interval holds
    both the measurement's and the simulation's spread).

    Returns:
        ``{"throughput_per_s": [lo, hi], "p50_ms": ..., "p90_ms", "p99_ms", "p999_ms", "mean_ms",
        "utilisation", "rejected_share"}`` (central ``confidence`` share of the rounds).

    Raises:
        ValueError: ``rounds`` < 2.
    """
    if rounds < 2:
        raise ValueError("intervals need at least 2 rounds")
    preds = [summarize(runs(k), warmup_fraction) for k in range(rounds)]
    cols: dict[str, list[float]] = {"throughput_per_s": [p.throughput_per_s for p in preds],
                                    "utilisation": [p.utilisation for p in preds],
                                    "rejected_share": [p.rejected_share for p in preds]}
    for k in (*PERCENTILES, "mean"):
        cols[f"{k}_ms"] = [p.latency_ms[k] for p in preds]
    lo, hi = 50 * (1 - confidence), 50 * (1 + confidence)
    return {k: [float(np.percentile(v, lo)), float(np.percentile(v, hi))] for k, v in cols.items()}


__all__ = ["PARTS", "PERCENTILES", "Prediction", "intervals", "summarize"]
