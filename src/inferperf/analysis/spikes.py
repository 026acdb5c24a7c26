"""Latency spikes: queries far above the median, how many, and whether they recur with a period.

A spike is a query whose latency exceeds both ``factor`` x the median and the
median plus ``z`` robust standard deviations (1.4826 x MAD, the normal-consistent
median absolute deviation; Rousseeuw & Croux 1993). Requiring both keeps
a tight distribution (tiny MAD) from calling 10 % jitter a spike, and a wide one
from calling its ordinary tail a spike.

Period: within each sequence (one run, one stream: queries in issue order) the
gaps between consecutive spikes are counted in queries. When most gaps are a
multiple of one gap P (a spike missed now and then still fits), the spikes recur
every P-th query: a timer, a garbage collector, a cache flush, a batch boundary.
The same is done on start times to give the period in seconds.

Pure functions over raw samples: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

#: MAD -> standard deviation of a normal distribution.
MAD_TO_SD = 1.4826


@dataclass
class Spikes:
    """Spikes in one set of latency samples.

    Attributes:
        count: queries flagged; share: count / all queries (0..1).
        threshold_ms: the latency above which a query is a spike; median_ms: the median (ms).
        max_ms: the worst spike (ms; 0 without spikes); mean_excess_ms: mean of (spike - median) in ms.
        indices: positions of the spikes in the input arrays (at most ``MAX_INDICES``).
        period_queries: the recurrence in queries (every P-th query), or None.
        period_share: share of spike gaps that fit the period (0..1; 0 without a period).
        period_s: the recurrence in seconds when start times were given and regular, else None.
    """

    count: int
    share: float
    threshold_ms: float
    median_ms: float
    max_ms: float = 0.0
    mean_excess_ms: float = 0.0
    indices: list[int] = field(default_factory=list)
    period_queries: int | None = None
    period_share: float = 0.0
    period_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


MAX_INDICES = 10_000


def spike_threshold_ns(latency_ns: Sequence[int] | np.ndarray, factor: float = 2.0, z: float = 6.0) -> float:
    """The spike threshold: max(factor x median, median + z x 1.4826 x MAD), in the input's unit.

    Raises:
        ValueError: empty input.
    """
    x = np.asarray(latency_ns, dtype=np.float64)
    if x.size == 0:
        raise ValueError("spike threshold of no samples")
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    return max(factor * med, med + z * MAD_TO_SD * mad)


def _period_from_gaps(gaps: np.ndarray, min_share: float, tol: float) -> tuple[float | None, float]:
    """The dominant gap P when >= ``min_share`` of gaps are a multiple of it (within ``tol`` of P, relative)."""
    gaps = gaps[gaps > 0]
    if gaps.size < 2:
        return None, 0.0
    # candidates: the smallest gaps' typical value, then the most frequent gap
    cands = [float(np.median(gaps[gaps <= np.percentile(gaps, 25)])), float(np.median(gaps))]
    vals, counts = np.unique(np.round(gaps, 9), return_counts=True)
    cands.append(float(vals[np.argmax(counts)]))
    best: tuple[float | None, float] = (None, 0.0)
    for p in cands:
        if p <= 0:
            continue
        mult = np.maximum(np.round(gaps / p), 1.0)
        fits = np.abs(gaps - mult * p) <= tol * p
        share = float(fits.mean())
        if share >= min_share and share > best[1]:
            best = (p, share)
    return best


def find_spikes(
    latency_ns: Sequence[int] | np.ndarray,
    start_offsets_ns: Sequence[int] | np.ndarray | None = None,
    sequence_ids: Sequence[int] | np.ndarray | None = None,
    *,
    factor: float = 2.0,
    z: float = 6.0,
    min_spikes_for_period: int = 4,
    min_period_share: float = 0.8,
) -> Spikes:
    """Find latency spikes and their period.

    Args:
        latency_ns: latencies in ns, in issue order within each sequence.
        start_offsets_ns: start of each query (ns from the measurement start), same length, or None.
            Queries are ordered by start time within each sequence when given.
        sequence_ids: one id per query naming its sequence (e.g. ``run * 1000 + stream``); a period is
            only looked for inside a sequence, never across the joint between two runs. None: one sequence.
        factor, z: the threshold (see :func:`spike_threshold_ns`).
        min_spikes_for_period: fewer spikes than this never give a period.
        min_period_share: share of gaps that must fit the period.

    Returns:
        :class:`Spikes` (count 0 when none).

    Raises:
        ValueError: empty input or mismatched lengths.
    """
    lat = np.asarray(latency_ns, dtype=np.float64)
    n = lat.size
    if n == 0:
        raise ValueError("spike detection on no samples")
    starts = None if start_offsets_ns is None or len(start_offsets_ns) == 0 else np.asarray(start_offsets_ns, np.float64)
    seq = None if sequence_ids is None or len(sequence_ids) == 0 else np.asarray(sequence_ids)
    if (starts is not None and starts.size != n) or (seq is not None and seq.size != n):
        raise ValueError("latency, start offsets and sequence ids must have the same length")
    thr = spike_threshold_ns(lat, factor, z)
    med = float(np.median(lat))
    flag = lat > thr
    idx = np.flatnonzero(flag)
    out = Spikes(count=int(idx.size), share=float(idx.size / n), threshold_ms=thr / 1e6, median_ms=med / 1e6)
    if idx.size == 0:
        return out
    out.max_ms = float(lat[idx].max() / 1e6)
    out.mean_excess_ms = float((lat[idx] - med).mean() / 1e6)
    out.indices = idx[:MAX_INDICES].tolist()
    if idx.size < min_spikes_for_period:
        return out
    q_gaps: list[np.ndarray] = []
    t_gaps: list[np.ndarray] = []
    groups = [np.arange(n)] if seq is None else [np.flatnonzero(seq == s) for s in np.unique(seq)]
    for members in groups:
        if starts is not None:
            members = members[np.argsort(starts[members], kind="stable")]
        pos = np.flatnonzero(flag[members])
        if pos.size >= 2:
            q_gaps.append(np.diff(pos).astype(np.float64))
            if starts is not None:
                t_gaps.append(np.diff(starts[members][pos]))
    if not q_gaps:
        return out
    p, share = _period_from_gaps(np.concatenate(q_gaps), min_period_share, tol=0.0)
    if p is None or p < 2:
        # every spike next to the last is a burst, not a period; try a looser fit (+-10 %) for jittery periods
        p, share = _period_from_gaps(np.concatenate(q_gaps), min_period_share, tol=0.1)
    if p is not None and p >= 2:
        out.period_queries = int(round(p))
        out.period_share = share
    if t_gaps:
        pt, _ = _period_from_gaps(np.concatenate(t_gaps), min_period_share, tol=0.15)
        if pt is not None:
            out.period_s = pt / 1e9
    return out
