"""Scaling fits and shape-reading over sweep points: threads, batch, input size.

Sources:
    * Amdahl's law, speedup S(n) = 1 / (s + (1 - s) / n), ceiling 1 / s
      (G. Amdahl, AFIPS 1967).
    * Universal Scalability Law, X(n) = lambda * n / (1 + sigma (n - 1) + kappa n (n - 1)),
      peak at n* = sqrt((1 - sigma) / kappa) (N. Gunther, *Guerrilla Capacity Planning*, 2007).
    * Least squares with :func:`scipy.optimize.curve_fit` (bounded trust-region reflective).

A fit needs >= 3 distinct counts; with fewer it reports "insufficient points"
rather than a curve through two dots.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: A configuration within this fraction of the best counts as "as good" (sweet spot, knee).
NEAR_BEST = 0.05

#: A fit is reported (in words and as a drawn curve) only from this R^2 up.
MIN_FIT_R2 = 0.5


@dataclass
class Fit:
    """A fitted model: parameters, R^2 on the points, and a status (``ok`` or why not)."""

    status: str
    params: dict[str, float] = field(default_factory=dict)
    r2: float | None = None


def fit_holds(f: Fit) -> bool:
    """The one rule for "this fit describes the data": status ``ok`` and R^2 >= :data:`MIN_FIT_R2`.

    Findings state a fit and charts draw its curve only when it holds, so the text and the chart agree.
    """
    return f.status == "ok" and f.r2 is not None and f.r2 >= MIN_FIT_R2


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0


def speedups(threads: Sequence[int], throughput: Sequence[float]) -> tuple[list[float], list[float]]:
    """Speedup S(n) = X(n) / X(n_min) scaled to one thread, and efficiency S(n) / n.

    The baseline is the smallest thread count measured; when it is not 1 the
    speedups are relative to it (S(n_min) = n_min assumed, i.e. linear up to it).

    Raises:
        ValueError: empty or mismatched inputs, or a non-positive throughput.
    """
    if not threads or len(threads) != len(throughput) or min(throughput) <= 0:
        raise ValueError("speedups need matching, positive thread counts and throughputs")
    order = np.argsort(threads)
    n = np.asarray(threads, dtype=float)[order]
    x = np.asarray(throughput, dtype=float)[order]
    s = x / x[0] * n[0]
    return s.tolist(), (s / n).tolist()


def fit_amdahl(threads: Sequence[int], throughput: Sequence[float]) -> Fit:
    """Fit Amdahl's serial fraction ``s`` to measured speedups; ``ceiling`` = 1 / s.

    Returns a Fit with ``serial_fraction`` and ``ceiling`` (speedup as threads -> infinity).
    """
    if len(set(threads)) < 3:
        return Fit("insufficient points: need >= 3 thread counts")
    from scipy.optimize import curve_fit

    s, _ = speedups(threads, throughput)
    n = np.sort(np.asarray(threads, dtype=float))
    y = np.asarray(s)

    def amdahl(nn: np.ndarray, serial: float) -> np.ndarray:
        return 1.0 / (serial + (1.0 - serial) / nn)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (serial,), _ = curve_fit(amdahl, n, y, p0=[0.1], bounds=([0.0], [1.0]))
    except (RuntimeError, ValueError) as e:
        return Fit(f"fit failed: {e}")
    return Fit(
        "ok",
        {"serial_fraction": float(serial), "ceiling": float(1.0 / serial) if serial > 0 else math.inf},
        _r2(y, amdahl(n, serial)),
    )


def fit_usl(threads: Sequence[int], throughput: Sequence[float]) -> Fit:
    """Fit the Universal Scalability Law to throughput; it can model throughput falling with more threads.

    Returns a Fit with ``lambda`` (throughput of one thread), ``sigma`` (contention),
    ``kappa`` (coherency) and ``peak_threads`` (n* where X(n) peaks; inf when kappa = 0).
    """
    if len(set(threads)) < 3:
        return Fit("insufficient points: need >= 3 thread counts")
    from scipy.optimize import curve_fit

    order = np.argsort(threads)
    n = np.asarray(threads, dtype=float)[order]
    x = np.asarray(throughput, dtype=float)[order]

    def usl(nn: np.ndarray, lam: float, sigma: float, kappa: float) -> np.ndarray:
        return lam * nn / (1.0 + sigma * (nn - 1.0) + kappa * nn * (nn - 1.0))

    try:
        with warnings.catch_warnings():  # covariance may be undefined on exact or tiny data; the fit stands
            warnings.simplefilter("ignore")
            (lam, sigma, kappa), _ = curve_fit(
                usl, n, x, p0=[x[0] / n[0], 0.05, 0.001], bounds=([0.0, 0.0, 0.0], [np.inf, 1.0, 1.0])
            )
    except (RuntimeError, ValueError) as e:
        return Fit(f"fit failed: {e}")
    if sigma >= 0.999 or kappa >= 0.999:
        return Fit("fit at its parameter bound (the data fall too steeply for USL): not reported",
                   {"lambda": float(lam), "sigma": float(sigma), "kappa": float(kappa)})
    peak = math.sqrt((1.0 - sigma) / kappa) if kappa > 0 else math.inf
    return Fit(
        "ok",
        {"lambda": float(lam), "sigma": float(sigma), "kappa": float(kappa), "peak_threads": float(peak)},
        _r2(x, usl(n, lam, sigma, kappa)),
    )


def sweet_spot(counts: Sequence[int], throughput: Sequence[float], near: float = NEAR_BEST) -> dict[str, float]:
    """Best throughput, and the fewest threads (or batch, or streams) within ``near`` of it.

    Returns ``{"best": n_best, "best_throughput": x, "fewest_near_best": n, "near_fraction": near}``.
    """
    x = np.asarray(throughput, dtype=float)
    i = int(np.argmax(x))
    ok = [c for c, v in zip(counts, x) if v >= (1.0 - near) * x[i]]
    return {"best": counts[i], "best_throughput": float(x[i]), "fewest_near_best": min(ok), "near_fraction": near}


def degradation_point(
    counts: Sequence[int], throughput: Sequence[float], cis: Sequence[Sequence[float]] | None = None,
    drop: float = NEAR_BEST,
) -> int | None:
    """First count (in ascending order) whose throughput falls below the best so far.

    With CIs (one [lo, hi] per point), the fall must separate the intervals; without
    them it must exceed ``drop`` (5 %). Returns None when throughput never falls.
    """
    order = np.argsort(counts)
    best_i = order[0]
    for i in order[1:]:
        lower = throughput[i] < throughput[best_i]
        if cis and cis[i] and cis[best_i]:
            real = lower and cis[i][1] < cis[best_i][0]
        else:
            real = throughput[i] < (1.0 - drop) * throughput[best_i]
        if real:
            return counts[i]
        if throughput[i] > throughput[best_i]:
            best_i = i
    return None


def knee(counts: Sequence[int], throughput: Sequence[float], near: float = NEAR_BEST) -> int | None:
    """Batch-scaling knee: the smallest batch whose samples/s reaches within ``near`` of the best.

    Past it a larger batch buys latency, not throughput. None with fewer than 3 batches.
    """
    if len(set(counts)) < 3:
        return None
    return int(sweet_spot(counts, throughput, near)["fewest_near_best"])


def size_fit(sizes: Sequence[float], latency_ms: Sequence[float]) -> Fit:
    """Latency vs input size (elements per row): linear fit ``latency = a + b * size`` and the
    log-log slope (1 = linear in size, < 1 sublinear, > 1 superlinear)."""
    if len(set(sizes)) < 3:
        return Fit("insufficient points: need >= 3 input sizes")
    s = np.asarray(sizes, dtype=float)
    y = np.asarray(latency_ms, dtype=float)
    b, a = np.polyfit(s, y, 1)
    slope, _ = np.polyfit(np.log(s), np.log(y), 1)
    return Fit(
        "ok",
        {"intercept_ms": float(a), "ms_per_million_elements": float(b * 1e6), "loglog_slope": float(slope)},
        _r2(y, a + b * s),
    )
