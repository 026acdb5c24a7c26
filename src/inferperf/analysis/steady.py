"""Steady state: where warm-up really ended (latency), and whether memory keeps growing (RSS).

Warm-up end: the query sequence (warm-up queries first, then measured ones, in
issue order) is cut into blocks; the steady level is the median of the last half
of the sequence. Warm-up ends at the first block from which several consecutive
block medians stay within ``tolerance`` above that level. Medians, not means, so
tail spikes do not move it; one fast block amid slow ones does not end it.

Memory growth: least-squares slope of RSS over time, in bytes per second and as a
share of the starting RSS per minute; growth that keeps going after warm-up is the
first sign of a leak (a soak run confirms it).

Pure functions over raw samples: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass
class SteadyState:
    """Where the latency of a sequence settled.

    Attributes:
        settled: a steady level was found (False: latency drifts until the end).
        end_index: first query (0-based, in the whole sequence) of the steady part; None when not settled.
        warmup_given: warm-up queries that preceded the measured ones in the sequence.
        steady_median_ms: the steady level (median of the last half, ms).
        first_median_ms: median of the first block (ms): how slow the start was.
        block: queries per block used.
        advice_warmup_queries: warm-up long enough to cover the detected end, rounded up (None when not settled).
        measured_unsettled: measured (non-warm-up) queries that ran before the steady state (0 = warm-up sufficed).
    """

    settled: bool
    end_index: int | None
    warmup_given: int
    steady_median_ms: float
    first_median_ms: float
    block: int
    advice_warmup_queries: int | None
    measured_unsettled: int

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def _round_up(n: int) -> int:
    """Round up to 1, 2 or 5 x a power of ten (10, 20, 50, 100, ...)."""
    if n <= 10:
        return 10
    mag = 10 ** int(math.floor(math.log10(n)))
    for m in (1, 2, 5, 10):
        if n <= m * mag:
            return m * mag
    return 10 * mag


def steady_state(
    latency_ns: Sequence[int] | np.ndarray,
    warmup_given: int = 0,
    *,
    block: int | None = None,
    tolerance: float = 0.1,
    settle_blocks: int = 3,
) -> SteadyState:
    """Detect where a latency sequence settles.

    A block is *slow* when its median exceeds the steady level by more than ``tolerance``
    (a start faster than the level is not warm-up). Warm-up ends at the first block that
    starts ``settle_blocks`` consecutive blocks that are not slow.

    Args:
        latency_ns: latencies in ns in issue order; the first ``warmup_given`` are warm-up queries.
        warmup_given: how many leading queries were warm-up (not counted in the Result).
        block: queries per block (default: n / 50, at least 5).
        tolerance: allowed excess of a block median over the steady level (fraction).
        settle_blocks: consecutive non-slow blocks that mark the steady state.

    Raises:
        ValueError: fewer than 10 queries.
    """
    x = np.asarray(latency_ns, dtype=np.float64)
    n = x.size
    if n < 10:
        raise ValueError("steady-state detection needs >= 10 queries")
    b = block or max(5, n // 50)
    nb = max(1, n // b)
    meds = np.array([np.median(x[i * b:(i + 1) * b]) for i in range(nb)])
    level = float(np.median(x[n // 2:]))
    slow = meds > (1.0 + tolerance) * level
    need = min(settle_blocks, nb)
    end_block = next((k for k in range(nb - need + 1) if not slow[k:k + need].any()), None)
    first = float(meds[0]) / 1e6
    if end_block is None:
        return SteadyState(False, None, warmup_given, level / 1e6, first, b, None, max(0, n - warmup_given))
    end = end_block * b
    return SteadyState(
        settled=True,
        end_index=end,
        warmup_given=warmup_given,
        steady_median_ms=level / 1e6,
        first_median_ms=first,
        block=b,
        advice_warmup_queries=_round_up(end) if end > 0 else None,
        measured_unsettled=max(0, end - warmup_given),
    )


@dataclass
class MemoryGrowth:
    """RSS trend over a run.

    Attributes:
        slope_bytes_per_s: least-squares slope of RSS over time.
        start_bytes, end_bytes: fitted RSS at the first and last sample.
        growth_percent_per_min: slope as a share of the starting RSS, per minute.
        duration_s: time covered; samples: RSS samples used.
        growing: the slope is positive and over both thresholds (see :func:`memory_growth`).
    """

    slope_bytes_per_s: float
    start_bytes: float
    end_bytes: float
    growth_percent_per_min: float
    duration_s: float
    samples: int
    growing: bool

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def memory_growth(
    t_s: Sequence[float] | np.ndarray,
    rss_bytes: Sequence[int] | np.ndarray,
    *,
    skip_s: float = 0.0,
    min_bytes_per_s: float = 1 << 20,
    min_percent_per_min: float = 5.0,
    min_duration_s: float = 10.0,
) -> MemoryGrowth | None:
    """Fit RSS against time and say whether it keeps growing.

    Args:
        t_s: sample times (s); rss_bytes: RSS at each (bytes).
        skip_s: ignore samples before this time (allocator and arena growth during warm-up).
        min_bytes_per_s, min_percent_per_min: growth counts only above both (default 1 MiB/s and 5 %/min).
        min_duration_s: shorter series never count as growing: arenas and caches fill during the first
            seconds of any run, so a slope over a short run is not a leak.

    Returns:
        :class:`MemoryGrowth`, or None with fewer than 3 samples after ``skip_s``.
    """
    t = np.asarray(t_s, dtype=np.float64)
    r = np.asarray(rss_bytes, dtype=np.float64)
    keep = t >= skip_s
    t, r = t[keep], r[keep]
    if t.size < 3 or float(t[-1] - t[0]) <= 0:
        return None
    slope, icpt = np.polyfit(t, r, 1)
    start = float(icpt + slope * t[0])
    end = float(icpt + slope * t[-1])
    pct = float(slope * 60.0 / start * 100.0) if start > 0 else 0.0
    growing = bool(slope >= min_bytes_per_s and pct >= min_percent_per_min and t[-1] - t[0] >= min_duration_s)
    return MemoryGrowth(float(slope), start, end, pct, float(t[-1] - t[0]), int(t.size), growing)
