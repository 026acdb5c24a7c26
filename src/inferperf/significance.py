"""Significance between two sets of run-level figures: the ratio-of-means interval, its bootstrap, corrections.

The machinery `compare` (the CI gate) and `tune`'s validation use to say whether a change is real.
Part of the base layer, beside :mod:`inferperf.stats` (which keeps the one-sample summaries and
:func:`inferperf.stats.intervals_separate`, the one rule for "do two intervals separate"); like it,
pure functions over plain sequences, no I/O, and scipy imported lazily inside the functions
(``import inferperf`` must not import scipy).

What to feed them (DESIGN: "Repeats are separate runs ... run-level figures get their
confidence interval from the runs"):

* Run-level figures, one value per run (throughput, per-run p50/p99, cold start, peak RSS,
  from ``--repeat`` Results): :func:`mean_ratio_ci` (Fieller) for a few runs a side,
  :func:`bootstrap_log_ratio_se` (the one bootstrap) from :data:`FEW_FOR_BOOTSTRAP` runs a side.
* One run per side: :func:`bootstrap_log_ratio_se` over per-window figures (``metrics.windows``'
  ``p50_ms`` or ``queries_per_s``) as blocks; never a test on pooled per-query samples of two
  sequential runs (it calls most no-op changes significant).
* Many cases x metrics: :func:`holm` (family-wise error) or :func:`benjamini_hochberg`
  (false-discovery rate) over the p-values (:func:`adjust` by name).

Sources:
    * Bootstrap standard error: Efron & Tibshirani, *An Introduction to the Bootstrap* (1993), ch. 6 and 13.
    * Ratio of means: Fieller, *J. R. Stat. Soc. B* 16 (1954) 175-185, with the
      Welch-Satterthwaite degrees of freedom at the ratio estimate for unequal variances
      (Tamhane & Logan, *J. Biopharm. Stat.* 14 (2004) 843-856; as R's
      ``mratios::ttestratio(var.equal=FALSE)``).
    * Holm, *Scand. J. Stat.* 6 (1979) 65-70; Benjamini & Hochberg, *J. R. Stat. Soc. B* 57
      (1995) 289-300 (through :func:`scipy.stats.false_discovery_control`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Values = Sequence[float] | np.ndarray

#: Bootstrap resamples by default: interval endpoints need >= 1000 (Efron & Tibshirani 1993, ch. 14).
N_RESAMPLES = 2000
#: Seed used when none is given: results are reproducible by default, and the seed is recorded.
DEFAULT_SEED = 0
#: Below this many values per side bootstrap intervals run too narrow (Hesterberg, *Am. Stat.* 69 (2015) 371-386).
FEW_FOR_BOOTSTRAP = 10


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval, and how it was made.

    Attributes:
        estimate: the statistic on the data (a ratio: unitless).
        low, high: the interval's ends (same unit; ``-inf``/``inf`` when unbounded).
        confidence: the coverage asked for, e.g. 0.95.
        method: how the interval was made, e.g. ``"Fieller"``.
        n: values per side (current, baseline) the interval rests on.
        notes: caveats (no spread, an unbounded interval).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    n: tuple[int, int]
    notes: tuple[str, ...] = ()

    def as_pair(self) -> list[float]:
        """``[low, high]``, the form :func:`inferperf.stats.intervals_separate` takes."""
        return [self.low, self.high]


@dataclass(frozen=True)
class Adjusted:
    """Multiple-comparison adjusted p-values, in the input order.

    Attributes:
        method: ``"holm"`` or ``"bh"``.
        alpha: the family-wise error rate (Holm) or false-discovery rate (BH) controlled.
        pvalues: adjusted p-values (each in [0, 1]).
        reject: ``pvalue <= alpha`` per hypothesis.
    """

    method: str
    alpha: float
    pvalues: tuple[float, ...]
    reject: tuple[bool, ...]


def _sample(values: Values, side: str, what: str, min_n: int) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{what}: {side} must be 1-D, got shape {list(arr.shape)}")
    if arr.size < min_n:
        raise ValueError(f"{what} needs at least {min_n} values per side; {side} has {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: {side} holds NaN or infinite values: drop them first")
    return arr


def _check(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} outside (0, 1): use e.g. 0.95")


def fieller_df(va: float, vb: float, r: float, n_a: int, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom of ``va + r² vb`` (squared standard errors of the two means, sizes
    ``n_a``, ``n_b`` >= 2), evaluated at the ratio ``r``: the df of :func:`mean_ratio_ci` (at r = a/b), and the
    one a test matching that interval must use (Tamhane & Logan 2004)."""
    return (va + r * r * vb) ** 2 / (va**2 / (n_a - 1) + r**4 * vb**2 / (n_b - 1))


def pooled_t_pvalue(left: Values, right: Values) -> float:
    """Two-sided Student's t-test p-value between two samples, pooled variance (as ``scipy.stats.ttest_ind`` with
    ``equal_var=True``, which Apache Otava's change-point test calls); 1.0 when it cannot be computed (an empty
    side, or 2 values in all), 0.0 for two distinct constant sides."""
    a, b = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
    n1, n2 = a.size, b.size
    if n1 == 0 or n2 == 0 or n1 + n2 <= 2:
        return 1.0
    from scipy.special import stdtr  # Student's t CDF without importing scipy.stats (~0.4-4 s)

    m1, m2 = float(a.mean()), float(b.mean())
    v1 = float(a.var(ddof=1)) if n1 > 1 else 0.0
    v2 = float(b.var(ddof=1)) if n2 > 1 else 0.0
    df = n1 + n2 - 2
    se = math.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / df * (1 / n1 + 1 / n2))
    if se == 0.0:
        return 0.0 if m1 != m2 else 1.0
    return float(min(1.0, 2 * stdtr(df, -abs(m1 - m2) / se)))


def welch_t_pvalue(old: Values, new: Values, sign: float = 1.0) -> float:
    """One-sided Welch t-test p-value that ``sign x (mean(new) - mean(old)) > 0`` (Welch-Satterthwaite df:
    :func:`fieller_df` at ratio 1); ``nan`` with fewer than 2 values a side; 0 or 1 for two constant sides."""
    a, b = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    if a.size < 2 or b.size < 2:
        return math.nan
    from scipy.special import stdtr

    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    if va + vb == 0:
        return 0.0 if sign * (b.mean() - a.mean()) > 0 else 1.0
    t = sign * (b.mean() - a.mean()) / math.sqrt(va + vb)
    return float(stdtr(fieller_df(va, vb, 1.0, a.size, b.size), -t))


def prediction_t_pvalue(x: float, baseline: Values, sign: float = 1.0) -> float:
    """One-sided p that one new value ``x`` lies beyond ``k`` baseline values in direction ``sign``: the prediction
    interval's t = sign (x - mean) / (s sqrt(1 + 1/k)), k - 1 df (Hahn & Meeker, *Statistical Intervals*, 1991,
    sec. 4.4); 0 or 1 for a constant baseline, ``nan`` with fewer than 2 baseline values."""
    b = np.asarray(baseline, dtype=float)
    if b.size < 2:
        return math.nan
    from scipy.special import stdtr

    sd = float(b.std(ddof=1))
    if sd == 0.0:
        return 0.0 if sign * (x - b.mean()) > 0 else 1.0
    t = sign * (x - b.mean()) / (sd * math.sqrt(1 + 1 / b.size))
    return float(stdtr(b.size - 1, -t))


def mean_ratio_ci(current: Values, baseline: Values, confidence: float = 0.95) -> Interval:
    """Fieller's interval for mean(current) / mean(baseline) of run-level values (one per run).

    With a, b the means and v_a = s_a²/n_a, v_b = s_b²/n_b, the interval is the set of ratios r with
    (a - r·b)² <= t² (v_a + r² v_b) (Fieller 1954):
    ``[ab ± t·sqrt(a²v_b + b²v_a - t²v_a·v_b)] / (b² - t²v_b)``, t the Student quantile with the
    Welch-Satterthwaite degrees of freedom of v_a + r²v_b at r = a/b (Tamhane & Logan 2004).
    Chosen over a log-scale Welch interval because it targets the ratio of arithmetic means
    (throughput = queries / time) rather than of geometric means.

    Returns:
        An :class:`Interval` of the unitless ratio; ``(-inf, inf)`` (noted) when the baseline mean is
        not significantly above zero (b² <= t²v_b); the point ``a/b`` when neither side varies.

    Raises:
        ValueError: fewer than 2 values on a side, NaN/inf values, a baseline mean <= 0, or a bad confidence.
    """
    from scipy.special import stdtrit  # Student's t quantile (what scipy.stats.t.ppf calls; no scipy.stats import)

    _check(confidence)
    x = _sample(current, "current", "mean ratio", 2)
    y = _sample(baseline, "baseline", "mean ratio", 2)
    a, b = float(x.mean()), float(y.mean())
    if b <= 0:
        raise ValueError("mean ratio needs a positive baseline mean: compare differences instead")
    va, vb = float(x.var(ddof=1)) / x.size, float(y.var(ddof=1)) / y.size
    r = a / b
    n = (x.size, y.size)
    if va + vb == 0:
        return Interval(r, r, r, confidence, "Fieller", n, notes=("neither side varies: the interval is the point",))
    df = fieller_df(va, vb, r, x.size, y.size)
    tq = float(stdtrit(df, 0.5 + confidence / 2.0))
    denom = b * b - tq * tq * vb
    if denom <= 0:
        return Interval(r, -math.inf, math.inf, confidence, "Fieller", n,
                        notes=("baseline mean not significantly above zero: the interval is unbounded",))
    half = tq * math.sqrt(a * a * vb + b * b * va - tq * tq * va * vb)
    return Interval(r, (a * b - half) / denom, (a * b + half) / denom, confidence, "Fieller", n)


def bootstrap_log_ratio_se(current: Values, baseline: Values, n_resamples: int = N_RESAMPLES,
                           seed: int = DEFAULT_SEED) -> float:
    """Bootstrap standard error of ``log(mean(current) / mean(baseline))``, each side resampled on its own
    (independent samples; Efron & Tibshirani 1993, ch. 6): the spread, over ``n_resamples`` seeded resamples,
    of the resampled log ratio. Run-level figures (one per run) or per-window figures (blocks) go in.

    Returns:
        The standard error (unitless, on the natural-log scale); ``inf`` when over half the resamples have
        a mean <= 0 or NaN on a side (no log ratio; callers treat a non-finite error as an undefined
        interval); 0 (up to rounding) when neither side varies.

    Raises:
        ValueError: an empty or not 1-D side, or fewer than 100 resamples.
    """
    if n_resamples < 100:
        raise ValueError(f"n_resamples={n_resamples} is too few for a standard error: use >= 1000")
    cur, base = np.asarray(current, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    for side, arr in (("current", cur), ("baseline", base)):
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"bootstrap log ratio needs 1-D values on each side; {side} has shape {list(arr.shape)}")
    rng = np.random.default_rng(seed)
    mc = cur[rng.integers(0, cur.size, (n_resamples, cur.size))].mean(axis=1)
    mb = base[rng.integers(0, base.size, (n_resamples, base.size))].mean(axis=1)
    ok = (mb > 0) & (mc > 0)
    if int(ok.sum()) < n_resamples // 2:
        return math.inf
    return float(np.std(np.log(mc[ok] / mb[ok]), ddof=1))


def _pvalues(pvalues: Values, alpha: float) -> np.ndarray:
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"p-values must be 1-D, got shape {list(p.shape)}")
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]: drop NaN p-values (untestable cases) first")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha {alpha} outside (0, 1): use e.g. 0.05")
    return p


def holm(pvalues: Values, alpha: float = 0.05) -> Adjusted:
    """Holm's step-down adjustment (Holm 1979): controls the family-wise error rate at ``alpha``.

    Sorted ascending, p_(i) becomes max_{j<=i} min(1, (m - j + 1) p_(j)); rejects where the adjusted
    p-value <= ``alpha``. Valid under any dependence between the tests. No input: no output.

    Raises:
        ValueError: not 1-D, values outside [0, 1] or NaN, ``alpha`` outside (0, 1).
    """
    p = _pvalues(pvalues, alpha)
    m = p.size
    order = np.argsort(p, kind="stable")
    adj_sorted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    adj = np.empty(m)
    adj[order] = adj_sorted
    return Adjusted("holm", alpha, tuple(float(v) for v in adj), tuple(bool(v <= alpha) for v in adj))


def benjamini_hochberg(pvalues: Values, alpha: float = 0.05) -> Adjusted:
    """Benjamini-Hochberg step-up adjustment (1995): controls the false-discovery rate at ``alpha``.

    Sorted ascending, p_(i) becomes min_{j>=i} min(1, m p_(j) / j) (through
    ``scipy.stats.false_discovery_control(method="bh")``); rejects where it is <= ``alpha``. Valid for
    independent or positively dependent tests. No input: no output.

    Raises:
        ValueError: not 1-D, values outside [0, 1] or NaN, ``alpha`` outside (0, 1).
    """
    p = _pvalues(pvalues, alpha)
    if p.size == 0:
        return Adjusted("bh", alpha, (), ())
    from scipy.stats import false_discovery_control

    adj = np.asarray(false_discovery_control(p, method="bh"), dtype=np.float64)
    return Adjusted("bh", alpha, tuple(float(v) for v in adj), tuple(bool(v <= alpha) for v in adj))


def adjust(pvalues: Values, method: Literal["holm", "bh"] = "holm", alpha: float = 0.05) -> Adjusted:
    """:func:`holm` or :func:`benjamini_hochberg` by name (``holm`` or ``bh``); ValueError on another name."""
    if method == "holm":
        return holm(pvalues, alpha)
    if method == "bh":
        return benjamini_hochberg(pvalues, alpha)
    raise ValueError(f"unknown correction {method!r}: use holm or bh")
