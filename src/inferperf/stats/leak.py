"""Leak and drift verdicts over a soak's series: RSS bytes, p99 ms per interval.

A straight line through a whole soak calls an allocator's plateau a leak and hides a slow leak under a
garbage-collection sawtooth. :func:`leak_verdict` therefore fits what the periodic structure leaves:

1. **Settle.** The first :data:`SETTLE_FRACTION` (a third) of the run is not fitted: allocator arenas, caches,
   connection pools and lazy initialisation grow to their working size there. Kept only when at least 3
   points remain after it.
2. **Troughs.** A GC cycle, cache eviction or arena trim makes RSS a sawtooth; the memory really held shows at
   its troughs (the "heap after garbage collection" that heap-leak analysis tracks, e.g. Oracle's *Java SE
   Troubleshooting Guide*, "Troubleshoot Memory Leaks"). The dominant period is the lag of the highest peak of
   the sample autocorrelation of the linearly detrended series after its first zero crossing (Box, Jenkins &
   Reinsel, *Time Series Analysis*, 4th ed., ch. 2), accepted above :data:`PERIOD_MIN_ACF` and when the fitted
   span holds at least :data:`MIN_CYCLES` periods. The series is then cut, from its end, into windows of
   1.25 periods (each holds a trough) and each window gives its minimum at the time it was taken (the lower
   envelope). Without a period every sample is fitted.
3. **Slope.** OLS slope of the kept points with a HAC standard error: Bartlett kernel (Newey & West 1987,
   *Econometrica* 55(3):703-708), the lag the larger of Newey & West's (1994) rule of thumb and Andrews'
   (1991) AR(1) plug-in bandwidth ``1.1447 (alpha(1) n)^(1/3)``, ``alpha(1) = 4 rho^2 / ((1-rho)^2 (1+rho)^2)``
   (*Econometrica* 59(3):817-858, section 6), which grows with the residuals' persistence ``rho``.
4. **Level shift.** Growth by one step (a cache filled, a pool grown) is not a leak: when a level shift at
   one point of the fitted span (15 % trimmed at each end) is significant by the sup-Wald test of Andrews (1993,
   *Econometrica* 61(4):821-856, Table 1: 8.85 at 5 % for one parameter, 15 % trimming), with the HAC
   covariance, the growth must also be a leak in the fit with that shift (a linear leak keeps its slope in
   it, a step then flat does not). Run on at least :data:`MIN_SHIFT_POINTS` points.

5. **Persistence.** A leak grows to the end; growth that levels off (a cache warming for 20 minutes, an
   arena reaching its working size) is steep early in the fitted span and flat late, and a straight line through
   it reads as a leak (1.58 MiB/h for ``200 MB + 30 MB (1 - exp(-t / 200 s))`` over 30 minutes, whose last 10
   minutes grow 0.43 MiB/h). So the fitted points of the last :data:`TAIL_FRACTION` of the run are fitted alone
   (same HAC rule) and a growth is not a leak when their 95 % interval lies wholly under the threshold: the
   growth is shown to have settled below it. A tail too noisy to show that leaves the verdict to the whole fit
   (the rule only ever clears, it never flags). Run on at least :data:`MIN_TAIL_POINTS` tail points (troughs:
   :data:`MIN_TAIL_TROUGHS`).

Pure functions over plain sequences; numpy only (scipy lazily for a non-default confidence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

#: fraction of the run (from its start) not fitted: growth to a working size (arenas, caches) settles there.
SETTLE_FRACTION = 1.0 / 3.0
#: autocorrelation a period's peak must reach to count as periodic structure.
PERIOD_MIN_ACF = 0.3
#: periods the fitted span must hold before its troughs are used.
MIN_CYCLES = 6
#: sup-Wald 5 % critical value for one break in one parameter, 15 % trimming (Andrews 1993, Table 1).
SUP_WALD_5PCT = 8.85
#: fraction of the fitted points at each end where no level shift is tried (Andrews 1993).
SHIFT_TRIM = 0.15
#: fewest fitted points on which a level shift is tested (a trough series may hold fewer).
MIN_SHIFT_POINTS = 20
#: Fewest samples left after the settle period for any verdict: on fewer, a few page-sized steps lie on an exact
#: line (a zero-width CI) and seconds of growth would be extrapolated to an hourly leak.
MIN_VERDICT_POINTS = 10
#: shift positions tried (evenly spaced over the trimmed span).
SHIFT_CANDIDATES = 60
#: largest AR(1) coefficient used in Andrews' bandwidth (keeps the lag finite for a near unit root).
MAX_RHO = 0.97
#: the last part of the run (a fraction of it, from its end) whose growth must not have settled below the threshold
TAIL_FRACTION = 1.0 / 3.0
#: fewest fitted samples in the tail for the persistence rule (fewer: the rule does not apply)
MIN_TAIL_POINTS = 10
#: fewest trough points in the tail for the persistence rule when troughs are fitted
MIN_TAIL_TROUGHS = 5


def newey_west_lag(n: int) -> int:
    """Bartlett-kernel truncation lag ``floor(4 (n/100)^(2/9))`` (Newey & West 1994 rule of thumb)."""
    return int(math.floor(4.0 * (max(n, 0) / 100.0) ** (2.0 / 9.0)))


def andrews_lag(residuals: Sequence[float] | np.ndarray) -> int:
    """Bartlett-kernel lag from Andrews' (1991) AR(1) plug-in: ``floor(1.1447 (alpha(1) n)^(1/3))``.

    ``alpha(1) = 4 rho^2 / ((1 - rho)^2 (1 + rho)^2)`` with ``rho`` the lag-1 least-squares AR coefficient of
    ``residuals`` (clipped to [-MAX_RHO, MAX_RHO]); Andrews, *Econometrica* 59(3):817-858 (1991), section 6.
    A persistent series (rho near 1) gets a long lag. At most ``n - 1``; 0 for fewer than 3 residuals or none
    varying.
    """
    u = np.asarray(residuals, dtype=float)
    n = u.size
    den = float(u[:-1] @ u[:-1]) if n >= 3 else 0.0
    if den <= 0.0:
        return 0
    rho = min(max(float(u[1:] @ u[:-1]) / den, -MAX_RHO), MAX_RHO)
    alpha = 4.0 * rho * rho / ((1.0 - rho) ** 2 * (1.0 + rho) ** 2)
    return int(min(n - 1, math.floor(1.1447 * (alpha * n) ** (1.0 / 3.0))))


class LeakSlope(NamedTuple):
    """OLS slope of ``values`` on ``t`` with a Newey-West 95 % CI (units: value units per t unit)."""

    slope: float
    ci95: tuple[float, float]
    se: float
    lag: int
    n: int

    @property
    def significant(self) -> bool:
        """True when the 95 % CI excludes zero on the positive side (growth)."""
        return self.ci95[0] > 0.0


def hac_fit(X: np.ndarray, y: np.ndarray, lag: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """OLS of ``y`` (n,) on the columns of ``X`` (n, p) with a HAC covariance: ``(beta (p,), cov (p, p), lag)``.

    ``cov = (X'X)^-1 S (X'X)^-1``, ``S = Gamma_0 + sum_l w_l (Gamma_l + Gamma_l')``, Bartlett weights
    ``w_l = 1 - l/(L+1)``, ``Gamma_l = sum_t u_t u_{t-l} x_t x_{t-l}'`` (Newey & West 1987, *Econometrica*
    55(3):703-708); ``L`` defaults to the larger of :func:`newey_west_lag` and :func:`andrews_lag` of the OLS
    residuals, so a persistent series gets a long enough lag. The covariance carries the small-sample factor
    ``n / (n - p)`` (HC1: MacKinnon & White 1985, *J. Econometrics* 29(3):305-325), which matters for a trough
    series of a few points.
    """
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    u = y - X @ beta
    n = y.size
    L = max(newey_west_lag(n), andrews_lag(u)) if lag is None else int(lag)
    g = X * u[:, None]
    S = g.T @ g
    for l in range(1, min(L, n - 1) + 1):
        gl = g[l:].T @ g[:-l]
        S += (1.0 - l / (L + 1.0)) * (gl + gl.T)
    inv = np.linalg.pinv(X.T @ X)
    p = X.shape[1]
    return beta, (inv @ S @ inv) * (n / max(n - p, 1)), L


def _quantile(confidence: float, df: int) -> float:
    from scipy.stats import t as student_t

    return float(student_t.ppf(0.5 + confidence / 2.0, max(df, 1)))


def trend_slope(x: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray, *,
                shift_at: int | None = None, lag: int | None = None, confidence: float = 0.95) -> LeakSlope:  # fmt: skip
    """OLS slope of ``values`` against ``x`` with a HAC standard error (:func:`hac_fit`), optionally beside a
    level shift at index ``shift_at`` (a 0/1 column, 1 from that index on).

    The CI uses Student's t quantile with ``n - p`` degrees of freedom (a trough series holds few points; for
    long series it is the normal quantile). Units: ``values`` units per ``x`` unit. scipy lazily (quantile).

    Raises ValueError for fewer than 3 points, mismatched lengths or constant ``x``.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"leak_slope: t and values must be 1-D of one length, got {x.shape} and {y.shape}")
    n = x.size
    if n < 3:
        raise ValueError(f"leak_slope: needs at least 3 points, got {n}")
    if float(np.ptp(x)) <= 0.0:
        raise ValueError("leak_slope: all times are equal; need samples spread over time")
    cols = [np.ones(n), x - x.mean()]
    if shift_at is not None:
        cols.append((np.arange(n) >= shift_at).astype(float))
    beta, cov, L = hac_fit(np.column_stack(cols), y, lag)
    se = math.sqrt(max(float(cov[1, 1]), 0.0))
    q = _quantile(confidence, n - len(cols))
    slope = float(beta[1])
    return LeakSlope(slope, (slope - q * se, slope + q * se), se, L, n)


def leak_slope(t: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
               lag: int | None = None, confidence: float = 0.95) -> LeakSlope:  # fmt: skip
    """OLS slope of ``values`` against ``t`` with a HAC (Newey-West) 95 % CI: :func:`trend_slope` without a
    shift. Autocorrelated noise (AR(1) jitter, a sawtooth) widens the CI instead of faking a trend.

    Raises ValueError for fewer than 3 points, mismatched lengths or constant ``t``.
    """
    return trend_slope(t, values, lag=lag, confidence=confidence)


def level_shift(x: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray) -> tuple[int, float] | None:
    """The most significant single level shift in a trend fit: ``(index, sup-Wald statistic)``, or None.

    For each of :data:`SHIFT_CANDIDATES` indices in the trimmed span, the HAC Wald statistic of the shift
    column beside the trend (:func:`trend_slope`'s model); the largest is compared by the caller with
    :data:`SUP_WALD_5PCT` (Andrews 1993). None under :data:`MIN_SHIFT_POINTS` points.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(values, dtype=float)
    n = y.size
    lo, hi = math.ceil(SHIFT_TRIM * n), math.floor((1.0 - SHIFT_TRIM) * n)
    if n < MIN_SHIFT_POINTS or hi <= lo:
        return None
    best: tuple[int, float] | None = None
    for c in np.unique(np.linspace(lo, hi, SHIFT_CANDIDATES).round().astype(int)):
        X = np.column_stack([np.ones(n), x - x.mean(), (np.arange(n) >= c).astype(float)])
        beta, cov, _ = hac_fit(X, y)
        var = float(cov[2, 2])
        wald = float(beta[2] ** 2 / var) if var > 0 else (math.inf if beta[2] != 0 else 0.0)
        if best is None or wald > best[1]:
            best = (int(c), wald)
    return best


def dominant_period(values: Sequence[float] | np.ndarray, max_lag: int) -> int | None:
    """Period (in samples) of the strongest periodic structure of ``values``, or None.

    The lag in ``[2, max_lag]`` of the highest peak of the sample autocorrelation of the linearly detrended
    series after its first zero crossing, when that peak reaches :data:`PERIOD_MIN_ACF` (Box, Jenkins & Reinsel,
    *Time Series Analysis*, ch. 2: a periodic component shows as ACF peaks at multiples of its period).
    """
    y = np.asarray(values, dtype=float)
    n = y.size
    if max_lag < 2 or n < 2 * max_lag:
        return None
    x = np.arange(n, dtype=float)
    u = y - np.polyval(np.polyfit(x, y, 1), x)
    den = float(u @ u)
    if den <= 1e-18 * max(1.0, float(y @ y)):
        return None
    acf = np.array([float(u[k:] @ u[:-k]) / den for k in range(1, max_lag + 1)])  # acf[k-1] at lag k
    below = np.nonzero(acf < 0.0)[0]
    if below.size == 0:
        return None
    lags = np.arange(1, max_lag + 1)
    peak = (lags > below[0] + 1) & (lags >= 2)
    peak[1:-1] &= (acf[1:-1] >= acf[:-2]) & (acf[1:-1] >= acf[2:])
    peak[-1] = False
    if not peak.any():
        return None
    k = int(lags[peak][np.argmax(acf[peak])])
    return k if acf[k - 1] >= PERIOD_MIN_ACF else None


def troughs(values: Sequence[float] | np.ndarray, period: int) -> np.ndarray:
    """Indices of the troughs of a series with period ``period`` (samples): each sample that is the minimum
    (first of equals) of the ``period + 1`` samples centred on it, whole windows only (no trough is read off a
    cycle cut by the start or the end of the series). One per cycle for a sawtooth."""
    y = np.asarray(values, dtype=float)
    h = max(1, period // 2)
    if y.size < 2 * h + 1:
        return np.zeros(0, dtype=int)
    win = np.lib.stride_tricks.sliding_window_view(y, 2 * h + 1)
    return np.nonzero(np.argmin(win, axis=1) == h)[0] + h


def trend_points(t_s: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
                 settle_fraction: float = SETTLE_FRACTION) -> dict:  # fmt: skip
    """The points a leak is judged on (steps 1-2 of the module docstring).

    Returns ``index`` (int array into the input, time order), ``settle_s`` (seconds from the first sample not
    fitted), ``period_s`` (the periodic structure found, or None) and ``envelope`` (True when troughs are used).
    """
    t = np.asarray(t_s, dtype=float)
    y = np.asarray(values, dtype=float)
    settle = settle_fraction * float(t[-1] - t[0])
    idx = np.nonzero(t >= t[0] + settle)[0]
    if idx.size < 3:
        idx, settle = np.arange(t.size), 0.0
    period = dominant_period(y[idx], idx.size // MIN_CYCLES)
    out = {"index": idx, "settle_s": settle, "period_s": None, "envelope": False, "n_settled": int(idx.size)}
    if period is not None:
        env = troughs(y[idx], period)
        if env.size >= 3:
            dt = float(np.median(np.diff(t[idx])))
            out.update(index=idx[env], period_s=period * dt, envelope=True)
    return out


def leak_verdict(t_s: Sequence[float] | np.ndarray, rss_bytes: Sequence[float] | np.ndarray,
                 requests: Sequence[float] | np.ndarray | None = None, *,
                 bytes_per_hour: float = 1024 * 1024, bytes_per_1000_requests: float = 1024,
                 settle_fraction: float = SETTLE_FRACTION) -> dict:  # fmt: skip
    """Leak verdict for RSS samples (method: module docstring): flagged only when the growth of the points left
    after the settle period and the periodic structure is significant (95 % HAC CI above 0) AND above the
    thresholds, in the straight-line fit and, when a level shift is significant, in the fit with it too (the
    reported slope is the fit with the lower CI bound).

    Args:
        t_s: sample times, s (increasing; any spacing, e.g. 1 Hz or one per soak interval).
        rss_bytes: resident memory at each, bytes.
        requests: cumulative completed requests at each sample (optional); with it the per-request growth
            must exceed ``bytes_per_1000_requests`` too, and be significant.
        bytes_per_hour, bytes_per_1000_requests: thresholds (default 1 MiB/h, 1 KiB per 1,000 requests).
        settle_fraction: fraction of the run, from its start, not fitted.

    Returns:
        dict: ``slope_bytes_per_hour``, ``ci95_bytes_per_hour``, ``lag``, ``n`` (points fitted),
        ``slope_bytes_per_request``, ``ci95_bytes_per_request`` (None without requests), ``settle_s``,
        ``period_s`` (None without periodic structure), ``tail_ci95_bytes_per_hour`` (the last third's 95 % CI when
        the persistence rule ran, else None), ``envelope`` (troughs fitted), ``shift_at_s`` (time of
        a significant level shift, None without one), ``judged`` (False when fewer than
        :data:`MIN_VERDICT_POINTS` samples follow the settle period: then neither significant nor a leak, and
        ``reason`` says so), ``significant``, ``leak``, ``reason``.

    Raises:
        ValueError: fewer than 3 samples, mismatched lengths or constant ``t_s``.
    """
    t = np.asarray(t_s, dtype=float)
    y = np.asarray(rss_bytes, dtype=float)
    if t.shape != y.shape or t.ndim != 1 or t.size < 3:
        raise ValueError(f"leak_verdict: t_s and rss_bytes must be 1-D of one length >= 3, got {t.shape}, {y.shape}")
    pts = trend_points(t, y, settle_fraction)
    k = pts["index"]
    tk, yk = t[k] / 3600.0, y[k]
    shift = level_shift(tk, yk)
    at = shift[0] if shift is not None and shift[1] > SUP_WALD_5PCT else None
    lag = 0 if pts["envelope"] else None  # troughs lie a whole period apart: their noise is independent
    fits = [trend_slope(tk, yk, lag=lag)] + ([] if at is None else [trend_slope(tk, yk, shift_at=at, lag=lag)])
    fit = min(fits, key=lambda f: f.ci95[0])  # the growth must survive the shift: the weaker fit speaks
    out: dict = {"slope_bytes_per_hour": fit.slope, "ci95_bytes_per_hour": list(fit.ci95), "lag": fit.lag,
                 "n": fit.n, "slope_bytes_per_request": None, "ci95_bytes_per_request": None,
                 "settle_s": pts["settle_s"], "period_s": pts["period_s"], "envelope": pts["envelope"],
                 "shift_at_s": None if at is None else float(t[k][at] - t[0]),
                 "significant": fit.significant}  # fmt: skip
    above = fit.slope > bytes_per_hour
    reason = f"{fit.slope / 1048576:.2f} MiB/h (threshold {bytes_per_hour / 1048576:g} MiB/h)"
    req = None if requests is None else np.asarray(requests, dtype=float)[k]
    if req is not None and np.ptp(req) > 0:
        per = min([trend_slope(req, yk, lag=lag)] + ([] if at is None else [trend_slope(req, yk, shift_at=at, lag=lag)]),
                  key=lambda f: f.ci95[0])  # fmt: skip
        out["slope_bytes_per_request"] = per.slope
        out["ci95_bytes_per_request"] = list(per.ci95)
        above = above and per.slope * 1000.0 > bytes_per_1000_requests
        out["significant"] = fit.significant and per.significant
        reason += f", {per.slope * 1000 / 1024:.2f} KiB/1000 req (threshold {bytes_per_1000_requests / 1024:g} KiB)"
    out["judged"] = pts["n_settled"] >= MIN_VERDICT_POINTS
    if not out["judged"]:
        out["significant"] = False
        out["leak"] = False
        out["reason"] = (f"not judged: {pts['n_settled']} samples after {pts['settle_s']:.0f} s of settling"
                         f" (needs >= {MIN_VERDICT_POINTS}): soak longer or sample more often")
        return out
    settled = _settled(t, y, k, lag, bytes_per_hour, pts["envelope"]) if out["significant"] and above else None
    out["tail_ci95_bytes_per_hour"] = None if settled is None else list(settled.ci95)
    out["leak"] = bool(out["significant"] and above and (settled is None or settled.ci95[1] >= bytes_per_hour))
    if settled is not None and not out["leak"]:
        reason += (f"; settled: the last {TAIL_FRACTION * 100:.0f} % of the run grows {settled.slope / 1048576:.2f} "
                   f"MiB/h (95 % CI [{settled.ci95[0] / 1048576:.2f}, {settled.ci95[1] / 1048576:.2f}], under the "
                   "threshold)")
    sig = "significant" if out["significant"] else "not significant (95 % Newey-West CI includes 0)"
    how = f"fitted after {pts['settle_s']:.0f} s of settling"
    if pts["envelope"]:
        how += f", on the troughs of a {pts['period_s']:.0f} s cycle"
    if at is not None:
        how += f", checked beside a level shift at {out['shift_at_s']:.0f} s"
    out["reason"] = f"{reason}; {sig} ({how})"
    return out


def _settled(t: np.ndarray, y: np.ndarray, k: np.ndarray, lag: int | None, bytes_per_hour: float,
             envelope: bool):  # noqa: ANN202 - a LeakSlope or None
    """The HAC fit of the fitted points ``k`` in the last :data:`TAIL_FRACTION` of the run, or None when it holds
    too few of them (step 5 of the module docstring)."""
    tail = k[t[k] >= t[-1] - TAIL_FRACTION * float(t[-1] - t[0])]
    if tail.size < (MIN_TAIL_TROUGHS if envelope else MIN_TAIL_POINTS) or np.ptp(t[tail]) <= 0:
        return None
    return trend_slope(t[tail] / 3600.0, y[tail], lag=lag)


def drift_verdict(t_s: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
                  threshold_per_hour: float) -> dict:  # fmt: skip
    """Drift of a series (e.g. p99 ms per interval) per hour, same Newey-West rule as :func:`leak_verdict`.

    Returns ``slope_per_hour``, ``ci95_per_hour``, ``significant``, ``drift`` (significant
    and above ``threshold_per_hour``).
    """
    fit = leak_slope(np.asarray(t_s, dtype=float) / 3600.0, values)
    return {"slope_per_hour": fit.slope, "ci95_per_hour": list(fit.ci95), "significant": fit.significant,
            "drift": bool(fit.significant and fit.slope > threshold_per_hour)}  # fmt: skip
