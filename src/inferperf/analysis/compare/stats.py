"""The interval of a change (current / baseline) from run-level figures, and one-sided p-values past a bound.

Intervals rest on the variation *between runs* (one figure per run: throughput, the run's own
p50 or p99, cold start, peak RSS), never on pooled per-query samples of two sequential runs.
Each interval is the inversion of the very test that gives the p-values (same statistic, same
degrees of freedom), so a bound lies outside the 95 % interval exactly when its one-sided p-value
is below 0.025: a verdict never reads "past the threshold but not significant" from one test.

* 2-9 runs a side: Fieller's interval for the ratio of mean run figures
  (:func:`inferperf.significance.mean_ratio_ci`) and the Fieller t test, both with the
  Welch-Satterthwaite df at the estimate (:func:`inferperf.significance.fieller_df`).
  Below 10 values a side the bootstrap runs narrow (Hesterberg 2015), so it is not used there.
* >= 10 runs a side: the bootstrap standard error of the log ratio of means (each side resampled on
  its own; :func:`inferperf.significance.bootstrap_log_ratio_se`, the one bootstrap); interval and p-values from the normal approximation on the log scale (Efron & Tibshirani
  1993, ch. 13, the standard bootstrap interval).
* Fewer than 2 runs on a side: the windows of each run are the blocks of a block bootstrap (the
  ratio of mean window figures); it sees only the noise within a run, so the interval is centred
  on the runs' own figures and its log-scale standard error widened :data:`ONE_RUN_WIDEN` times:
  verdicts lean to ``inconclusive`` and the output says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...significance import (DEFAULT_SEED, FEW_FOR_BOOTSTRAP, N_RESAMPLES, bootstrap_log_ratio_se, fieller_df,
                              mean_ratio_ci)

#: Widening (log scale) of a window-block interval: within-run noise understates between-run noise.
ONE_RUN_WIDEN = 2.0
#: Standard normal 0.975 quantile: the half-width of a 95 % interval in standard errors.
Z_975 = 1.959963984540054


@dataclass(frozen=True)
class Change:
    """A ratio current / baseline with its 95 % confidence interval.

    Attributes:
        ratio: the estimate (unitless; 1.08 = 8 % higher).
        low, high: the interval's ends (``-inf``/``inf`` when unbounded).
        method: how the interval was made, in words.
        n: values per side (baseline, current): runs, or windows for a block bootstrap.
        fieller: ``(a, b, va, vb, df)`` (current mean, baseline mean, their squared standard
            errors, the interval's degrees of freedom) for Fieller's test; ``None`` for the bootstrap.
        log_se: standard error of ``log(ratio)`` (bootstrap), for normal-approximation p-values.
    """

    ratio: float
    low: float
    high: float
    method: str
    n: tuple[int, int]
    fieller: tuple[float, float, float, float, float] | None = None
    log_se: float = 0.0

    def p_above(self, bound: float) -> float:
        """One-sided p-value of "ratio <= bound" (small: evidence the ratio lies above ``bound``)."""
        return _p(self, bound, above=True)

    def p_below(self, bound: float) -> float:
        """One-sided p-value of "ratio >= bound" (small: evidence the ratio lies below ``bound``)."""
        return _p(self, bound, above=False)


def _p(c: Change, r0: float, above: bool) -> float:
    if c.fieller is not None:
        from scipy.special import stdtr  # Student's t CDF (scipy.stats.t without importing scipy.stats: ~0.4 s)

        a, b, va, vb, df = c.fieller  # df of the interval, not re-estimated at r0: the test the interval inverts
        diff = a - r0 * b
        var = va + r0 * r0 * vb
        if var == 0:
            return 0.0 if (diff > 0 if above else diff < 0) else 1.0
        tstat = diff / math.sqrt(var)
        return float(stdtr(df, -tstat) if above else stdtr(df, tstat))
    if not (c.ratio > 0 and r0 > 0):
        return 1.0
    d = math.log(c.ratio) - math.log(r0)
    if c.log_se == 0:
        return 0.0 if (d > 0 if above else d < 0) else 1.0
    from scipy.special import ndtr  # standard normal CDF

    z = d / c.log_se
    return float(ndtr(-z) if above else ndtr(z))


def _normal_change(ratio: float, se: float, method: str, n: tuple[int, int]) -> Change:
    """``ratio`` with the 95 % interval exp(log ratio ± z·se), the inversion of :func:`_p`'s normal test."""
    if not (ratio > 0 and math.isfinite(se)):
        return Change(ratio, -math.inf, math.inf, method + " (undefined)", n, log_se=math.inf)
    centre = math.log(ratio)
    return Change(ratio, math.exp(centre - Z_975 * se), math.exp(centre + Z_975 * se), method, n, log_se=se)


def run_change(base: list[float], cur: list[float], seed: int = DEFAULT_SEED) -> Change | None:
    """Change from per-run figures (>= 2 a side); ``None`` with fewer.

    Raises:
        nothing on degenerate data: an unbounded interval comes back instead (a baseline mean that
        is not clearly above zero).
    """
    b, c = np.asarray(base, dtype=np.float64), np.asarray(cur, dtype=np.float64)
    if b.size < 2 or c.size < 2 or b.mean() <= 0:
        return None
    n = (int(b.size), int(c.size))
    if min(n) >= FEW_FOR_BOOTSTRAP:  # from 10 runs a side on the bootstrap; below, Fieller
        return _normal_change(float(c.mean() / b.mean()), bootstrap_log_ratio_se(c, b, N_RESAMPLES, seed),
                              f"bootstrap of per-run figures ({N_RESAMPLES} resamples), normal on the log scale", n)
    iv = mean_ratio_ci(c, b)
    a_, b_, va, vb = float(c.mean()), float(b.mean()), float(c.var(ddof=1)) / c.size, float(b.var(ddof=1)) / b.size
    df = fieller_df(va, vb, a_ / b_, c.size, b.size) if va + vb > 0 else math.inf
    return Change(iv.estimate, iv.low, iv.high, "Fieller interval of the ratio of per-run means", n,
                  fieller=(a_, b_, va, vb, df))


def block_change(base_blocks: list[float], cur_blocks: list[float], figure_ratio: float,
                 seed: int = DEFAULT_SEED) -> Change | None:
    """Change from time windows as blocks (one run a side): centred on ``figure_ratio`` (the runs' own
    figures' ratio), the block bootstrap's log-scale standard error widened :data:`ONE_RUN_WIDEN` times;
    ``None`` with < 2 windows a side."""
    b, c = np.asarray(base_blocks, dtype=np.float64), np.asarray(cur_blocks, dtype=np.float64)
    if b.size < 2 or c.size < 2 or b.mean() <= 0 or c.mean() <= 0 or figure_ratio <= 0:
        return None
    se = bootstrap_log_ratio_se(c, b, N_RESAMPLES, seed)
    return _normal_change(figure_ratio, ONE_RUN_WIDEN * se,
                          f"block bootstrap over windows, one run a side: widened x{ONE_RUN_WIDEN:g}",
                          (int(b.size), int(c.size)))
