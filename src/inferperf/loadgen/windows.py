"""perf_analyzer's window rule over raw samples (pure): per-window figures and the stability verdict.

A window ``(a, b]`` holds the successful requests that *completed* in it;
throughput divides their count by the window's wall time. Stable: over the
last ``consecutive`` (3) windows, throughput and p99 each have max <= mean x
(1 + p) and min >= mean x (1 - p), ``p = stability_percentage / 100``
(perf_analyzer's inference_profiler rule), and no window is empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WindowRule:
    """perf_analyzer's window rule: ``interval_ms`` windows, stable when the last ``consecutive`` windows'
    throughput and p99 are within ``stability_percentage`` of their mean, at most ``max_trials`` windows."""

    interval_ms: int = 5000
    stability_percentage: float = 10.0
    max_trials: int = 10
    consecutive: int = 3


def _window(sched: np.ndarray, done: np.ndarray, err: np.ndarray, a: int, b: int) -> dict[str, float]:
    sel = (done > a) & (done <= b) & (err == 0)
    lat = (done[sel] - sched[sel]) / 1e6
    width_s = max(b - a, 1) / 1e9
    return {"count": int(lat.size), "queries_per_s": lat.size / width_s,
            "p50_ms": float(np.percentile(lat, 50)) if lat.size else 0.0,
            "p99_ms": float(np.percentile(lat, 99)) if lat.size else 0.0}  # fmt: skip


def is_stable(windows: Sequence[dict[str, float]], percentage: float, consecutive: int = 3) -> bool | None:
    """perf_analyzer's rule over the last ``consecutive`` windows (None when there are fewer)."""
    if len(windows) < consecutive:
        return None
    last = windows[-consecutive:]
    if any(w["count"] == 0 for w in last):
        return False
    p = percentage / 100.0
    for key in ("queries_per_s", "p99_ms"):
        vals = [w[key] for w in last]
        mean = sum(vals) / len(vals)
        if max(vals) > mean * (1 + p) or min(vals) < mean * (1 - p):
            return False
    return True


def _equal(a: int, b: int, n: int) -> list[tuple[int, int]]:
    edges = [a + (b - a) * k // n for k in range(n + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))



__all__ = ["WindowRule", "is_stable"]
