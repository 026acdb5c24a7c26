"""Keep charts small: reduce a trace to at most N points without hiding its spikes.

Min-max decimation: the x range is cut into N/2 buckets of equal count and each
bucket keeps its lowest and highest point (in x order), so a spike survives any
reduction, unlike taking every k-th point. Pure numpy.
"""

from __future__ import annotations

import numpy as np

#: Points per chart across all its traces (the issue's budget: ~10k).
MAX_POINTS_PER_CHART = 10_000


def minmax_indices(y: np.ndarray, max_points: int) -> np.ndarray:
    """Indices (sorted) of at most ``max_points`` points of ``y`` keeping each bucket's min and max.

    ``y`` is in display order (by x). With ``len(y) <= max_points`` every index is kept.
    """
    n = int(y.size)
    if n <= max_points:
        return np.arange(n)
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep = np.empty(2 * buckets, dtype=np.int64)
    for b in range(buckets):
        lo, hi = edges[b], edges[b + 1]
        seg = y[lo:hi]
        keep[2 * b] = lo + int(np.argmin(seg))
        keep[2 * b + 1] = lo + int(np.argmax(seg))
    return np.unique(keep)


def every_kth(n: int, max_points: int) -> np.ndarray:
    """Evenly spaced indices (first and last included) of at most ``max_points`` of ``n`` items."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
