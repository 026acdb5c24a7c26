"""Significance between two sets of measurements: bootstrap intervals, between-run tests, multiple comparisons.

The machinery `compare` (the CI gate), the report and `profile --diff` use to say whether a
change is real. Part of the base layer, beside :mod:`inferperf.stats` (which keeps the
one-sample summaries and :func:`inferperf.stats.intervals_separate`, the one rule for
"do two intervals separate"); like it, pure functions over plain sequences, no I/O, and
scipy imported lazily inside the functions (``import inferperf`` must not import scipy).

What to feed them (DESIGN: "Repeats are separate runs ... run-level figures get their
confidence interval from the runs"):

* Run-level figures, one value per run (throughput, per-run p50/p99, cold start, peak RSS,
  from ``--repeat`` Results): :func:`mean_ratio_ci` (Fieller), :func:`welch_t_test`,
  :func:`mann_whitney_u`, or the bootstrap functions over those per-run values.
* One run per side: the bootstrap functions over per-window figures (``metrics.windows``'
  ``p50_ms`` or ``queries_per_s``), which treats windows as blocks; never a test on pooled
  per-query samples of two sequential runs (it calls most no-op changes significant).
* Many cases x metrics: :func:`holm` (family-wise error) or :func:`benjamini_hochberg`
  (false-discovery rate) over the p-values.

Sources:
    * Bootstrap (percentile and BCa intervals): Efron & Tibshirani, *An Introduction to the
      Bootstrap* (1993), ch. 13-14; through :func:`scipy.stats.bootstrap`.
    * Welch's t-test: Welch, *Biometrika* 34 (1947) 28-35.
    * Mann-Whitney U: Mann & Whitney, *Ann. Math. Stat.* 18 (1947) 50-60.
    * Ratio of means: Fieller, *J. R. Stat. Soc. B* 16 (1954) 175-185, with the
      Welch-Satterthwaite degrees of freedom at the ratio estimate for unequal variances
      (Tamhane & Logan, *J. Biopharm. Stat.* 14 (2004) 843-856; as R's
      ``mratios::ttestratio(var.equal=FALSE)``).
    * Holm, *Scand. J. Stat.* 6 (1979) 65-70; Benjamini & Hochberg, *J. R. Stat. Soc. B* 57
      (1995) 289-300 (through :func:`scipy.stats.false_discovery_control`).
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Values = Sequence[float] | np.ndarray
Alternative = Literal["two-sided", "less", "greater"]
BootstrapMethod = Literal["BCa", "percentile"]

#: Bootstrap resamples by default: interval endpoints need >= 1000 (Efron & Tibshirani 1993, ch. 14).
N_RESAMPLES = 2000
#: Seed used when none is given: results are reproducible by default, and the seed is recorded.
DEFAULT_SEED = 0
#: Per-side sample cap for the bootstrap. Larger inputs are thinned to this many evenly spaced order
#: statistics (deterministic; the empirical distribution's shape is kept). The interval then reflects
#: the uncertainty of this many samples, so it is wider than the full data's: conservative.
MAX_BOOTSTRAP_SAMPLES = 4000
#: Below this many values per side bootstrap intervals run too narrow (Hesterberg, *Am. Stat.* 69 (2015) 371-386).
FEW_FOR_BOOTSTRAP = 10


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval, and how it was made.

    Attributes:
        estimate: the statistic on the full data (ratio: unitless; difference: the inputs' unit).
        low, high: the interval's ends (same unit; ``-inf``/``inf`` when unbounded).
        confidence: the coverage asked for, e.g. 0.95.
        method: how the interval was made, e.g. ``"BCa bootstrap"`` or ``"Fieller"``.
        n: samples per side (current, baseline) the interval rests on, after thinning.
        n_resamples, seed: bootstrap settings (``None`` for closed-form intervals).
        notes: caveats (thinned input, too few values, a fallback taken).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    n: tuple[int, int]
    n_resamples: int | None = None
    seed: int | None = None
    notes: tuple[str, ...] = ()

    def as_pair(self) -> list[float]:
        """``[low, high]``, the form :func:`inferperf.stats.intervals_separate` takes."""
        return [self.low, self.high]


@dataclass(frozen=True)
class HypothesisTest:
    """Outcome of a two-sample test.

    Attributes:
        test: ``"welch-t"`` or ``"mann-whitney-u"``.
        statistic: t (unitless) or U (count of pairs, for the first sample).
        pvalue: probability, under no difference, of a result at least this extreme.
        df: degrees of freedom (Welch), ``None`` for U.
        n: sample sizes (a, b).
        alternative: ``two-sided``, ``less`` (a below b) or ``greater``.
        min_pvalue: the smallest p-value the test can give at these sizes (U: 2 / C(n_a + n_b, n_a)
            two-sided; Welch: 0.0). With 3 runs per side U's is 0.1: no 5 % test can pass.
    """

    test: str
    statistic: float
    pvalue: float
    df: float | None
    n: tuple[int, int]
    alternative: str
    min_pvalue: float = 0.0


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


def _thin(arr: np.ndarray, max_samples: int) -> np.ndarray:
    """``max_samples`` evenly spaced order statistics of ``arr`` (all of it when small enough)."""
    if arr.size <= max_samples:
        return arr
    idx = np.round(np.linspace(0, arr.size - 1, max_samples)).astype(np.int64)
    return np.sort(arr)[idx]


def _check(confidence: float, q: float = 50.0) -> None:
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile level {q} outside [0, 100]")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} outside (0, 1): use e.g. 0.95")


def _batch(*sizes: int) -> int:
    """Resamples per vectorized batch: about 2 million values per side in memory at once (16 MB)."""
    return max(1, 2_000_000 // max(sizes))


def _two_sample_bootstrap(current: np.ndarray, baseline: np.ndarray, statistic: Callable[..., np.ndarray],
                          estimate: float, *, confidence: float, n_resamples: int, method: BootstrapMethod,
                          seed: int, max_samples: int, notes: tuple[str, ...] = ()) -> Interval:
    """Resample each side independently; ``statistic(cur, base, axis)`` is vectorized along ``axis``."""
    from scipy.stats import bootstrap

    if method not in ("BCa", "percentile"):
        raise ValueError(f"unknown bootstrap method {method!r}: use BCa or percentile")
    if n_resamples < 100:
        raise ValueError(f"n_resamples={n_resamples} is too few for a {confidence:.0%} interval: use >= 1000")
    notes_ = list(notes)
    cur, base = _thin(current, max_samples), _thin(baseline, max_samples)
    if cur.size < current.size or base.size < baseline.size:
        notes_.append(f"thinned to {max_samples} order statistics per side: the interval is conservative (wider)")
    if min(cur.size, base.size) < FEW_FOR_BOOTSTRAP:
        notes_.append(f"fewer than {FEW_FOR_BOOTSTRAP} values on a side: bootstrap intervals run narrow")
    rng = np.random.default_rng(seed)
    seed_arg = {"rng": rng} if "rng" in inspect.signature(bootstrap).parameters else {"random_state": rng}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples: handled below, not warned about
        res = bootstrap((cur, base), statistic, n_resamples=n_resamples, batch=_batch(cur.size, base.size),
                        vectorized=True, paired=False, confidence_level=confidence, method=method, **seed_arg)
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    label = f"{method} bootstrap"
    dist = np.asarray(res.bootstrap_distribution, dtype=np.float64)
    if not (math.isfinite(low) and math.isfinite(high)):
        if np.all(dist == dist[0]):
            low = high = float(dist[0])
            notes_.append("every resample gives the same value: no spread to estimate")
        else:
            alpha = 1.0 - confidence
            low, high = (float(x) for x in np.percentile(dist, [100 * alpha / 2, 100 * (1 - alpha / 2)]))
            label = "percentile bootstrap"
            notes_.append(f"{method} undefined for these data: percentile interval instead")
    return Interval(estimate, low, high, confidence, label, (cur.size, base.size), n_resamples, seed, tuple(notes_))


def percentile_ratio_ci(current: Values, baseline: Values, q: float = 50.0, *, confidence: float = 0.95,
                        n_resamples: int = N_RESAMPLES, method: BootstrapMethod = "BCa", seed: int = DEFAULT_SEED,
                        max_samples: int = MAX_BOOTSTRAP_SAMPLES) -> Interval:
    """Bootstrap interval of ``percentile(current, q) / percentile(baseline, q)``: by default the ratio of medians.

    Each side is resampled on its own (independent samples); percentiles use linear
    interpolation. A ratio of 1.08 on latency means current is 8 % slower.

    Args:
        current, baseline: 1-D positive values in one unit (latency ms, queries/s, ...).
        q: percentile level in [0, 100]; 50 is the median.
        confidence: coverage in (0, 1).
        n_resamples: bootstrap resamples (>= 100; default :data:`N_RESAMPLES`).
        method: ``BCa`` (bias-corrected and accelerated; falls back to the percentile interval,
            noted, when BCa is undefined) or ``percentile``.
        seed: seed of the resampling (recorded in the result): same seed, same interval.
        max_samples: per-side cap; larger inputs are thinned (see :data:`MAX_BOOTSTRAP_SAMPLES`).

    Returns:
        An :class:`Interval` of the unitless ratio; its estimate uses all the data.

    Raises:
        ValueError: fewer than 2 values on a side, NaN/inf values, a baseline value <= 0, a
            negative current value, or a bad level, confidence, method or resample count.
    """
    _check(confidence, q)
    cur = _sample(current, "current", "percentile ratio", 2)
    base = _sample(baseline, "baseline", "percentile ratio", 2)
    if np.any(base <= 0):
        raise ValueError("percentile ratio needs positive baseline values: use percentile_difference_ci instead")
    if np.any(cur < 0):
        raise ValueError("percentile ratio needs non-negative current values: use percentile_difference_ci instead")

    def ratio(c: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.percentile(c, q, axis=axis) / np.percentile(b, q, axis=axis)

    est = float(np.percentile(cur, q) / np.percentile(base, q))
    return _two_sample_bootstrap(cur, base, ratio, est, confidence=confidence, n_resamples=n_resamples,
                                 method=method, seed=seed, max_samples=max_samples)


def percentile_difference_ci(current: Values, baseline: Values, q: float = 99.0, *, confidence: float = 0.95,
                             n_resamples: int = N_RESAMPLES, method: BootstrapMethod = "BCa",
                             seed: int = DEFAULT_SEED, max_samples: int = MAX_BOOTSTRAP_SAMPLES) -> Interval:
    """Bootstrap interval of ``percentile(current, q) - percentile(baseline, q)``: by default the p99 difference.

    A tail percentile rests on the few samples beyond it: with fewer than
    :func:`inferperf.stats.min_samples_for` (q) samples a side, the interval is mostly the maximum's
    (a note says so). Other arguments, the seed and the thinning are as :func:`percentile_ratio_ci`.

    Args:
        current, baseline: 1-D values in one unit (e.g. latency in ms).
        q: percentile level in [0, 100].

    Returns:
        An :class:`Interval` in the inputs' unit (positive: current is higher).

    Raises:
        ValueError: fewer than 2 values on a side, NaN/inf values, or a bad level, confidence,
            method or resample count.
    """
    from .stats import min_samples_for

    _check(confidence, q)
    cur = _sample(current, "current", "percentile difference", 2)
    base = _sample(baseline, "baseline", "percentile difference", 2)

    def diff(c: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.percentile(c, q, axis=axis) - np.percentile(b, q, axis=axis)

    need = min_samples_for(q)
    few = min(cur.size, base.size) < need
    notes = (f"p{q:g} from fewer than {need} samples a side: the interval mostly reflects the maximum",) if few else ()
    est = float(np.percentile(cur, q) - np.percentile(base, q))
    return _two_sample_bootstrap(cur, base, diff, est, confidence=confidence, n_resamples=n_resamples,
                                 method=method, seed=seed, max_samples=max_samples, notes=notes)


def welch_t_test(a: Values, b: Values, alternative: Alternative = "two-sided") -> HypothesisTest:
    """Welch's unequal-variance t-test of mean(a) vs mean(b), for run-level values (one per run).

    t = (mean_a - mean_b) / sqrt(s_a²/n_a + s_b²/n_b), with Welch-Satterthwaite degrees of freedom
    (Welch 1947); through ``scipy.stats.ttest_ind(equal_var=False)``. Not for raw per-query
    latencies: they are skewed (use the bootstrap or :func:`mann_whitney_u`).

    Raises:
        ValueError: fewer than 2 values on a side, NaN/inf values, both sides without spread.
    """
    from scipy.stats import ttest_ind

    x = _sample(a, "a", "Welch t-test", 2)
    y = _sample(b, "b", "Welch t-test", 2)
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    if va + vb == 0:
        raise ValueError("Welch t-test: both samples have zero variance, t is undefined: compare the values directly")
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    res = ttest_ind(x, y, equal_var=False, alternative=alternative)
    return HypothesisTest("welch-t", float(res.statistic), float(res.pvalue), float(df), (x.size, y.size), alternative)


def mann_whitney_u(a: Values, b: Values, alternative: Alternative = "two-sided") -> HypothesisTest:
    """Mann-Whitney U rank test (Mann & Whitney 1947) of a vs b, for run-level values; no normality assumed.

    Through ``scipy.stats.mannwhitneyu`` (exact p-value for small samples without ties, normal
    approximation otherwise). ``statistic`` is U of ``a``; ``min_pvalue`` says whether the sizes can
    reach significance at all.

    Raises:
        ValueError: an empty side, NaN/inf values.
    """
    from scipy.stats import mannwhitneyu

    x = _sample(a, "a", "Mann-Whitney U", 1)
    y = _sample(b, "b", "Mann-Whitney U", 1)
    res = mannwhitneyu(x, y, alternative=alternative)
    floor = (2.0 if alternative == "two-sided" else 1.0) / math.comb(x.size + y.size, x.size)
    return HypothesisTest("mann-whitney-u", float(res.statistic), float(res.pvalue), None, (x.size, y.size),
                          alternative, min(1.0, floor))


def fieller_df(va: float, vb: float, r: float, n_a: int, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom of ``va + r² vb`` (squared standard errors of the two means, sizes
    ``n_a``, ``n_b`` >= 2), evaluated at the ratio ``r``: the df of :func:`mean_ratio_ci` (at r = a/b), and the
    one a test matching that interval must use (Tamhane & Logan 2004)."""
    return (va + r * r * vb) ** 2 / (va**2 / (n_a - 1) + r**4 * vb**2 / (n_b - 1))


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
