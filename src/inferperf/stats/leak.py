"""Leak and drift verdicts over a soak's series: RSS bytes, p99 ms per interval.

Pure functions over plain sequences; numpy only (scipy lazily for a non-default confidence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


def newey_west_lag(n: int) -> int:
    """Bartlett-kernel truncation lag ``floor(4 (n/100)^(2/9))`` (Newey & West 1994 rule of thumb)."""
    return int(math.floor(4.0 * (max(n, 0) / 100.0) ** (2.0 / 9.0)))


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


def leak_slope(t: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
               lag: int | None = None, confidence: float = 0.95) -> LeakSlope:  # fmt: skip
    """OLS slope of ``values`` against ``t`` with a HAC (Newey-West) standard error.

    The variance of the slope is ``(X'X)^-1 S (X'X)^-1`` with
    ``S = sum_l w_l (Gamma_l + Gamma_l')``, Bartlett weights ``w_l = 1 - l/(L+1)``
    and ``Gamma_l = sum_t u_t u_{t-l} x_t x_{t-l}'`` (Newey & West 1987,
    Econometrica 55(3):703-708); ``L`` defaults to :func:`newey_west_lag`.
    Autocorrelated noise (a GC/arena sawtooth, AR(1) jitter) widens the CI
    instead of faking a trend. The CI uses the normal quantile. Pure, numpy only
    (scipy lazily for non-default confidence).

    Raises ValueError for fewer than 3 points, mismatched lengths or constant ``t``.
    """
    x = np.asarray(t, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"leak_slope: t and values must be 1-D of one length, got {x.shape} and {y.shape}")
    n = x.size
    if n < 3:
        raise ValueError(f"leak_slope: needs at least 3 points, got {n}")
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if sxx <= 0.0:
        raise ValueError("leak_slope: all times are equal; need samples spread over time")
    slope = float(xc @ (y - y.mean()) / sxx)
    u = (y - y.mean()) - slope * xc
    X = np.column_stack([np.ones(n), x])
    L = newey_west_lag(n) if lag is None else int(lag)
    g = X * u[:, None]
    S = g.T @ g
    for l in range(1, min(L, n - 1) + 1):
        w = 1.0 - l / (L + 1.0)
        gl = g[l:].T @ g[:-l]
        S += w * (gl + gl.T)
    inv = np.linalg.inv(X.T @ X)
    var = float((inv @ S @ inv)[1, 1])
    se = math.sqrt(max(var, 0.0))
    if confidence == 0.95:
        z = 1.959963984540054
    else:
        from scipy.stats import norm

        z = float(norm.ppf(0.5 + confidence / 2.0))
    return LeakSlope(slope, (slope - z * se, slope + z * se), se, L, n)


def leak_verdict(t_s: Sequence[float] | np.ndarray, rss_bytes: Sequence[float] | np.ndarray,
                 requests: Sequence[float] | np.ndarray | None = None, *,
                 bytes_per_hour: float = 1024 * 1024, bytes_per_1000_requests: float = 1024) -> dict:  # fmt: skip
    """Leak verdict for RSS samples: flagged only when the growth is significant AND above the thresholds.

    ``t_s`` seconds, ``rss_bytes`` bytes, ``requests`` cumulative completed requests
    at each sample (optional). Thresholds default to 1 MiB/h and 1 KiB per 1,000
    requests; with ``requests`` both must be exceeded. Returns a dict with
    ``slope_bytes_per_hour``, ``ci95_bytes_per_hour``, ``slope_bytes_per_request``,
    ``ci95_bytes_per_request`` (None without requests), ``significant``, ``leak``, ``reason``.
    """
    fit = leak_slope(np.asarray(t_s, dtype=float) / 3600.0, rss_bytes)
    out: dict = {"slope_bytes_per_hour": fit.slope, "ci95_bytes_per_hour": list(fit.ci95), "lag": fit.lag,
                 "n": fit.n, "slope_bytes_per_request": None, "ci95_bytes_per_request": None,
                 "significant": fit.significant}  # fmt: skip
    above = fit.slope > bytes_per_hour
    reason = f"{fit.slope / 1048576:.2f} MiB/h (threshold {bytes_per_hour / 1048576:g} MiB/h)"
    if requests is not None and np.ptp(np.asarray(requests, dtype=float)) > 0:
        per = leak_slope(requests, rss_bytes)
        out["slope_bytes_per_request"] = per.slope
        out["ci95_bytes_per_request"] = list(per.ci95)
        above = above and per.slope * 1000.0 > bytes_per_1000_requests
        out["significant"] = fit.significant and per.significant
        reason += f", {per.slope * 1000 / 1024:.2f} KiB/1000 req (threshold {bytes_per_1000_requests / 1024:g} KiB)"
    out["leak"] = bool(out["significant"] and above)
    sig = "significant" if out["significant"] else "not significant (95 % Newey-West CI includes 0)"
    out["reason"] = f"{reason}; {sig}"
    return out


def drift_verdict(t_s: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
                  threshold_per_hour: float) -> dict:  # fmt: skip
    """Drift of a series (e.g. p99 ms per interval) per hour, same Newey-West rule as :func:`leak_verdict`.

    Returns ``slope_per_hour``, ``ci95_per_hour``, ``significant``, ``drift`` (significant
    and above ``threshold_per_hour``).
    """
    fit = leak_slope(np.asarray(t_s, dtype=float) / 3600.0, values)
    return {"slope_per_hour": fit.slope, "ci95_per_hour": list(fit.ci95), "significant": fit.significant,
            "drift": bool(fit.significant and fit.slope > threshold_per_hour)}  # fmt: skip
