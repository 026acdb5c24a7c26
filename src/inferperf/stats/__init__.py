"""Pure statistics over raw samples: percentiles, summaries, confidence intervals, windows.

Everything here takes plain sequences or numpy arrays and returns plain values;
no I/O, no clock. scipy is imported lazily inside the functions that need it.

Sources:
    * Percentiles: numpy's ``linear`` method (Hyndman & Fan 1996, definition 7)
      and ``inverted_cdf`` (definition 1, the nearest-rank method).
    * Median CI: distribution-free order-statistic interval from the binomial
      distribution (Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2).
    * Quantile CI: the same order-statistic interval for any percentile (``scipy.stats.quantile_test``).
    * Mean CI over runs: Student's t interval.

Leak and drift verdicts over a soak's series (Newey-West slopes) live in :mod:`inferperf.stats.leak`
(re-exported here).

Two-sample comparisons (the ratio of run-level means: Fieller's interval and the bootstrap of its log;
multiple-comparison corrections) live in :mod:`inferperf.significance`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np

from .leak import LeakSlope, drift_verdict, leak_slope, leak_verdict, newey_west_lag

PercentileMethod = Literal["linear", "nearest-rank"]

_NUMPY_METHOD = {"linear": "linear", "nearest-rank": "inverted_cdf"}

#: Percentile levels reported in every latency summary, with the sample count
#: each needs before it stops being mostly the maximum (1 / (1 - q)).
PERCENTILES: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


def percentile(values: Sequence[float] | np.ndarray, q: float, method: PercentileMethod = "linear") -> float:
    """The ``q``-th percentile (0..100) of ``values``.

    Args:
        values: 1-D samples (any unit; the result has the same unit).
        q: percentile level in [0, 100].
        method: ``linear`` interpolation (numpy default) or ``nearest-rank``
            (the smallest value with at least q % of samples at or below it).

    Raises:
        ValueError: on empty ``values``, ``q`` outside [0, 100] or an unknown method.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        raise ValueError("percentile of no samples")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile level {q} outside [0, 100]")
    if method not in _NUMPY_METHOD:
        raise ValueError(f"unknown percentile method {method!r}: use linear or nearest-rank")
    return float(np.percentile(arr, q, method=_NUMPY_METHOD[method]))


def min_samples_for(q: float) -> int:
    """Samples needed for the ``q``-th percentile to rest on at least one sample beyond it: ceil(100 / (100 - q))."""
    if q >= 100.0:
        return 1
    return math.ceil(100.0 / (100.0 - q) - 1e-9)


def median_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    Finds ranks (j, k) so that P(X_(j) <= median <= X_(k)) >= ``confidence``
    under Binomial(n, 0.5) (Conover 1999, §3.2). With fewer than 6 samples no
    such interval exists at 95 %, and the sample range is returned.

    Args:
        values: 1-D samples.
        confidence: coverage, e.g. 0.95.

    Returns:
        (low, high) in the unit of ``values``.

    Raises:
        ValueError: on empty input.
    """
    arr = np.sort(np.asarray(values, dtype=np.float64))
    n = arr.size
    if n == 0:
        raise ValueError("median CI of no samples")
    from scipy.stats import binom

    alpha = 1.0 - confidence
    # r = smallest k with CDF(k) >= alpha/2, so CDF(r - 1) < alpha/2: the 1-based
    # order statistics X_(r) and X_(n-r+1) cover the median with >= 1 - alpha.
    r = int(binom.ppf(alpha / 2.0, n, 0.5))
    if r < 1:
        return float(arr[0]), float(arr[-1])
    return float(arr[r - 1]), float(arr[n - r])


def quantile_ci(values: Sequence[float] | np.ndarray, q: float, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the ``q``-th percentile from order statistics: :func:`median_ci` for any level.

    Through :func:`scipy.stats.quantile_test`'s ``confidence_interval`` (Conover 1999, §3.2).

    Args:
        values: 1-D samples (any unit; the interval has the same unit).
        q: percentile level, strictly inside (0, 100).
        confidence: coverage in (0, 1).

    Returns:
        ``(low, high)``; an end the sample cannot give (too few values beyond the percentile,
        e.g. the upper end of p99 from 50 samples) is NaN, which :func:`intervals_separate`
        treats as overlapping: no claim.

    Raises:
        ValueError: empty input, NaN/inf values, or ``q``/``confidence`` out of range.
    """
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError("quantile CI needs at least one sample and no NaN or infinite values")
    if not 0.0 < q < 100.0 or not 0.0 < confidence < 1.0:
        raise ValueError(f"quantile CI needs q in (0, 100) and confidence in (0, 1): got q={q}, {confidence}")
    from scipy.stats import quantile_test

    ci = quantile_test(arr, q=float(np.percentile(arr, q)), p=q / 100.0).confidence_interval(confidence)
    return float(ci.low), float(ci.high)


def mean_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Student's t confidence interval of the mean; for run-level figures (throughput per run).

    Returns (mean, mean) for a single value (no spread to estimate from).

    Raises:
        ValueError: on empty input.
    """
    arr = np.asarray(values, dtype=np.float64)
    n = arr.size
    if n == 0:
        raise ValueError("mean CI of no samples")
    m = float(arr.mean())
    if n == 1:
        return m, m
    from scipy.stats import t

    half = float(t.ppf(0.5 + confidence / 2.0, n - 1) * arr.std(ddof=1) / math.sqrt(n))
    return m - half, m + half


def intervals_separate(a: Sequence[float] | None, b: Sequence[float] | None) -> bool:
    """True when two confidence intervals ``[low, high]`` do not overlap.

    The one rule every "A differs from B" claim in inferperf uses (findings, report,
    optimize and runtime verdicts): a difference is called only when the intervals
    separate. Touching intervals (``a.high == b.low``) overlap.

    Args:
        a, b: ``[low, high]`` pairs in the same unit, or ``None``/empty when no interval
            exists (a single run).

    Returns:
        False when either interval is missing: no interval, no claim.
    """
    if not a or not b:
        return False
    return bool(a[1] < b[0] or b[1] < a[0])


#: How an interval without finite ends reads, everywhere it is printed.
UNBOUNDED_TEXT = "unbounded: no claim"


def bounded(ci: Sequence[float | None] | None) -> bool:
    """True when ``ci`` is ``[low, high]`` with both ends finite numbers (not None, NaN or infinite)."""
    return (ci is not None and len(ci) == 2
            and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci))


def ci_text(ci: Sequence[float | None] | None, fmt: str = ".3f", level: str = "95 % CI") -> str:
    """``"95 % CI [0.912, 1.201]"``, or ``"95 % CI unbounded: no claim"`` when :func:`bounded` is False
    (an unbounded Fieller interval, stored as ``null`` or, in older files, ``[null, null]`` or infinities)."""
    if not bounded(ci):
        return f"{level} {UNBOUNDED_TEXT}"
    return f"{level} [{ci[0]:{fmt}}, {ci[1]:{fmt}}]"


def cv_percent(values: Sequence[float] | np.ndarray) -> float:
    """Coefficient of variation in percent: 100 * sample std (ddof=1) / mean; NaN when undefined."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size < 2 or arr.mean() == 0:
        return float("nan")
    return float(100.0 * arr.std(ddof=1) / arr.mean())


def latency_summary(latency_ns: Sequence[int] | np.ndarray, method: PercentileMethod = "linear") -> dict:
    """Summary of latencies given in integer nanoseconds, reported in milliseconds.

    Returns a dict with ``count, mean, std, min, p50, p90, p95, p99, p999, max``
    (ms, float), ``percentile_method`` and ``p50_ci95`` ([low, high] ms). Fits
    :class:`inferperf.results.model.LatencySummary`.

    Raises:
        ValueError: on empty input.
    """
    ms = np.asarray(latency_ns, dtype=np.float64) / 1e6
    if ms.size == 0:
        raise ValueError("latency summary of no samples")
    pct = np.percentile(ms, list(PERCENTILES.values()), method=_NUMPY_METHOD[method])
    out = {
        "count": int(ms.size),
        "mean": float(ms.mean()),
        "std": float(ms.std(ddof=1)) if ms.size > 1 else 0.0,
        "min": float(ms.min()),
        "max": float(ms.max()),
        "percentile_method": method,
        "p50_ci95": list(median_ci(ms)),
    }
    for name, value in zip(PERCENTILES, pct, strict=True):
        out[name] = float(value)
    return out


def percentile_notes(count: int) -> list[str]:
    """Warnings for the reported percentiles that rest on too few samples (e.g. p99 under 100).

    None for ``count`` 0: no percentile is reported then (the empty summary and its Result's own reason, e.g.
    'no request succeeded', say so), so five 'p50 from 0 samples' lines would only repeat it.
    """
    if count <= 0:
        return []
    notes = []
    for name, q in PERCENTILES.items():
        need = min_samples_for(q)
        if count < need:
            label = name[0] + name[1:3] + ("." + name[3:] if len(name) > 3 else "")
            notes.append(f"{label} from {count} samples: needs >= {need} to mean more than the maximum")
    return notes


def windows(
    start_offsets_ns: Sequence[int] | np.ndarray,
    latency_ns: Sequence[int] | np.ndarray,
    duration_ns: int,
    n_windows: int,
) -> list[dict]:
    """Split a measurement into ``n_windows`` equal time windows by query completion time.

    A query belongs to the window in which it completed (start + latency);
    windows are left-open, right-closed (a query ending exactly at a window's
    end counts in that window; one ending at 0 counts in the first).
    Each window gives ``t_s`` (start offset, s), ``count``, ``queries_per_s``
    (completions / window length), ``p50_ms`` and ``p99_ms`` (linear; NaN-free:
    an empty window reports 0 queries and the percentiles as 0).

    Raises:
        ValueError: if ``n_windows`` < 1 or ``duration_ns`` <= 0.
    """
    if n_windows < 1 or duration_ns <= 0:
        raise ValueError("windows need n_windows >= 1 and a positive duration")
    start = np.asarray(start_offsets_ns, dtype=np.int64)
    lat = np.asarray(latency_ns, dtype=np.int64)
    done = start + lat
    width = duration_ns / n_windows
    idx = np.clip(np.ceil(done / width).astype(np.int64) - 1, 0, n_windows - 1)
    out = []
    for w in range(n_windows):
        sel = lat[idx == w] / 1e6
        out.append(
            {
                "t_s": w * width / 1e9,
                "count": int(sel.size),
                "queries_per_s": float(sel.size / (width / 1e9)),
                "p50_ms": float(np.percentile(sel, 50)) if sel.size else 0.0,
                "p99_ms": float(np.percentile(sel, 99)) if sel.size else 0.0,
            }
        )
    return out


# --- Output agreement: a candidate's outputs against a reference's (optimize, runtime comparison) ---------------
#
# Every function takes two arrays of the same shape (any float dtype; computed in float64) and
# assumes both are finite: count non-finite values first (:func:`nonfinite_count`) and never pass
# them here. Sources: cosine similarity and SNR as in ONNX Runtime's QDQ debugging tools
# (``onnxruntime.quantization.qdq_loss_debug.compute_signal_to_quantization_noice_ratio``:
# 10 * log10(sum(x^2) / sum((x - y)^2))); top-k agreement as in model-compression papers
# ("top-1 agreement with the float model").


def _pair(reference: np.ndarray, candidate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ref = np.asarray(reference, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if ref.shape != cand.shape:
        raise ValueError(f"shapes differ: reference {list(ref.shape)} vs candidate {list(cand.shape)}")
    return ref, cand


def nonfinite_count(values: np.ndarray) -> int:
    """Number of NaN or +/-Inf elements (0 for integer arrays)."""
    arr = np.asarray(values)
    return int(arr.size - np.count_nonzero(np.isfinite(arr))) if arr.dtype.kind in "fc" else 0


def max_abs_error(reference: np.ndarray, candidate: np.ndarray) -> float:
    """max |candidate - reference| in the outputs' unit; 0.0 for empty arrays.

    Raises:
        ValueError: the shapes differ.
    """
    ref, cand = _pair(reference, candidate)
    return float(np.max(np.abs(cand - ref))) if ref.size else 0.0


def mean_abs_error(reference: np.ndarray, candidate: np.ndarray) -> float:
    """mean |candidate - reference| in the outputs' unit; 0.0 for empty arrays.

    Raises:
        ValueError: the shapes differ.
    """
    ref, cand = _pair(reference, candidate)
    return float(np.mean(np.abs(cand - ref))) if ref.size else 0.0


def cosine_similarity(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Cosine of the angle between the flattened arrays, in [-1, 1].

    Two all-zero arrays agree (1.0); one all-zero array against a non-zero one gives 0.0.

    Raises:
        ValueError: the shapes differ.
    """
    ref, cand = _pair(reference, candidate)
    a, b = ref.ravel(), cand.ravel()
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.clip(np.dot(a, b) / (na * nb), -1.0, 1.0))


def snr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Signal-to-noise ratio in dB: 10 * log10(sum(ref^2) / sum((cand - ref)^2)).

    ``inf`` when the candidate equals the reference; ``-inf`` when the reference is all zeros
    and the candidate is not.

    Raises:
        ValueError: the shapes differ.
    """
    ref, cand = _pair(reference, candidate)
    noise = float(np.sum((cand - ref) ** 2))
    signal = float(np.sum(ref**2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return float(10.0 * math.log10(signal / noise))


def topk_agreement(reference: np.ndarray, candidate: np.ndarray, k: int = 1) -> float:
    """Fraction of rows (all axes but the last) whose reference top-1 class is among the candidate's top-k.

    For k = 1 this is top-1 agreement (same argmax). Scores are along the last axis.

    Args:
        reference, candidate: scores of shape [..., classes].
        k: 1 <= k <= classes.

    Raises:
        ValueError: the shapes differ, fewer than 1 row, or k out of range.
    """
    ref, cand = _pair(reference, candidate)
    if ref.ndim < 1 or ref.size == 0:
        raise ValueError("top-k agreement needs at least one row of scores")
    classes = ref.shape[-1]
    if not 1 <= k <= classes:
        raise ValueError(f"k={k} outside [1, {classes}] classes")
    r = ref.reshape(-1, classes)
    c = cand.reshape(-1, classes)
    want = np.argmax(r, axis=1)
    if k == 1:
        return float(np.mean(np.argmax(c, axis=1) == want))
    top = np.argpartition(-c, k - 1, axis=1)[:, :k]
    return float(np.mean(np.any(top == want[:, None], axis=1)))
