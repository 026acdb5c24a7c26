"""significance: hand-computed corrections and tests, seeded bootstrap intervals, degenerate inputs."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps

from inferperf import significance as sg
from inferperf.stats import intervals_separate


# --- multiple comparisons --------------------------------------------------------------------------------------


def test_holm_hand_values():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running max 0.02, 0.03, 0.06, 0.06
    out = sg.holm([0.01, 0.04, 0.03, 0.005])
    assert out.pvalues == pytest.approx((0.03, 0.06, 0.06, 0.02))
    assert out.reject == (True, False, False, True) and out.method == "holm" and out.alpha == 0.05
    assert sg.holm([0.5, 0.5]).pvalues == (1.0, 1.0)  # 2 x 0.5 = 1, clipped and carried
    assert sg.holm([]).pvalues == () and sg.holm([]).reject == ()


def test_benjamini_hochberg_hand_values():
    # 4 p-values: m p_(i) / i = 0.02, 0.02, 0.04, 0.04; running min from the top leaves them
    out = sg.benjamini_hochberg([0.01, 0.04, 0.03, 0.005])
    assert out.pvalues == pytest.approx((0.02, 0.04, 0.04, 0.02)) and out.reject == (True,) * 4
    assert sg.benjamini_hochberg([0.01, 0.04, 0.03, 0.005], alpha=0.03).reject == (True, False, False, True)
    # 8 p-values: 8 p / i = .008 .032 .104 .082 .0672 .08 .0846 .205; running min from the top
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205]
    out = sg.benjamini_hochberg(p)
    assert out.pvalues == pytest.approx((0.008, 0.032, 0.0672, 0.0672, 0.0672, 0.08, 0.074 * 8 / 7, 0.205))
    assert out.reject == (True, True) + (False,) * 6
    assert sg.holm(p).reject == (True, False, False, False, False, False, False, False)  # Holm is stricter
    assert sg.adjust(p, "bh") == out and sg.adjust(p) == sg.holm(p)


def test_corrections_refuse_bad_input():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        sg.holm([0.1, float("nan")])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        sg.benjamini_hochberg([1.5])
    with pytest.raises(ValueError, match="alpha"):
        sg.holm([0.1], alpha=0)
    with pytest.raises(ValueError, match="holm or bh"):
        sg.adjust([0.1], "bonferroni")  # type: ignore[arg-type]


# --- between-run tests -----------------------------------------------------------------------------------------


def test_welch_t_hand_formula():
    # means 2 and 6, variances 1 and 4, n 3 and 3: se^2 = 1/3 + 4/3 = 5/3, t = -4 / sqrt(5/3)
    # Welch-Satterthwaite df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 50/17
    r = sg.welch_t_test([1, 2, 3], [4, 6, 8])
    assert r.statistic == pytest.approx(-4 / math.sqrt(5 / 3)) and r.df == pytest.approx(50 / 17)
    assert r.pvalue == pytest.approx(2 * sps.t.sf(4 / math.sqrt(5 / 3), 50 / 17))
    assert r.pvalue == pytest.approx(0.0548, abs=1e-4) and r.n == (3, 3) and r.test == "welch-t"
    assert sg.welch_t_test([1, 2, 3], [4, 6, 8], "less").pvalue == pytest.approx(r.pvalue / 2)


def test_mann_whitney_exact_floor():
    # complete separation: U = 0, exact two-sided p = 2 / C(6, 3) = 0.1: three runs a side can never pass 5 %
    r = sg.mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert r.statistic == 0 and r.pvalue == pytest.approx(0.1) and r.min_pvalue == pytest.approx(0.1)
    r4 = sg.mann_whitney_u([1, 2, 3, 4], [5, 6, 7, 8])
    assert r4.pvalue == pytest.approx(2 / 70) and r4.min_pvalue == pytest.approx(2 / 70)
    assert sg.mann_whitney_u([5, 6, 7, 8], [1, 2, 3, 4], "greater").pvalue == pytest.approx(1 / 70)


def test_between_run_tests_refuse_degenerate_input():
    with pytest.raises(ValueError, match="at least 2 values per side; a has 1"):
        sg.welch_t_test([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="zero variance"):
        sg.welch_t_test([1.0, 1.0], [2.0, 2.0])
    with pytest.raises(ValueError, match="b has 0"):
        sg.mann_whitney_u([1.0], [])
    with pytest.raises(ValueError, match="NaN"):
        sg.mann_whitney_u([1.0, float("nan")], [1.0])


# --- Fieller ratio of means ------------------------------------------------------------------------------------


def test_fieller_hand_values():
    cur, base = [10, 11, 12, 11], [9, 10, 9.5, 10.5]
    a, b = 11.0, 9.75
    va, vb = (2 / 3) / 4, (1.25 / 3) / 4  # sample variances / n
    r = a / b
    df = (va + r * r * vb) ** 2 / (va**2 / 3 + r**4 * vb**2 / 3)
    t = sps.t.ppf(0.975, df)
    half = t * math.sqrt(a * a * vb + b * b * va - t * t * va * vb)
    ci = sg.mean_ratio_ci(cur, base)
    assert ci.estimate == pytest.approx(r) and ci.method == "Fieller" and ci.n == (4, 4)
    assert (ci.low, ci.high) == pytest.approx(((a * b - half) / (b * b - t * t * vb), (a * b + half) / (b * b - t * t * vb)))
    # the defining property: at both ends (a - r b)^2 = t^2 (va + r^2 vb)
    for end in (ci.low, ci.high):
        assert (a - end * b) ** 2 == pytest.approx(t * t * (va + end * end * vb))
    assert ci.low < 1.0 < ci.high  # 13 % up, but four runs do not show it


def test_fieller_covers_true_ratio_and_handles_edges():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(300):
        ci = sg.mean_ratio_ci(rng.normal(110, 6, 5), rng.normal(100, 5, 5))
        hits += ci.low <= 1.1 <= ci.high
    assert 0.92 <= hits / 300 <= 0.99
    flat = sg.mean_ratio_ci([2.0, 2.0], [1.0, 1.0])
    assert (flat.low, flat.high) == (2.0, 2.0) and flat.notes
    wild = sg.mean_ratio_ci([1.0, 1.1, 0.9], [-1.0, 1.0, 0.5])  # baseline mean not clearly above 0
    assert wild.low == -math.inf and wild.high == math.inf and "unbounded" in wild.notes[0]
    assert not intervals_separate(wild.as_pair(), [5.0, 6.0])
    with pytest.raises(ValueError, match="positive baseline mean"):
        sg.mean_ratio_ci([1.0, 2.0], [-1.0, -2.0])
    with pytest.raises(ValueError, match="at least 2"):
        sg.mean_ratio_ci([1.0], [1.0, 2.0])


# --- bootstrap intervals ---------------------------------------------------------------------------------------


def lognormal_pair(seed, n=300, ratio=1.2):
    rng = np.random.default_rng(seed)
    return rng.lognormal(math.log(ratio), 0.5, n), rng.lognormal(0.0, 0.5, n)  # medians ratio and 1


def test_ratio_of_medians_covers_truth_and_is_deterministic():
    cur, base = lognormal_pair(1)
    ci = sg.percentile_ratio_ci(cur, base)
    assert ci.low < 1.2 < ci.high and ci.low > 1.0  # 20 % slower is seen at n = 300
    assert ci.estimate == pytest.approx(np.median(cur) / np.median(base))
    assert ci.method == "BCa bootstrap" and ci.seed == 0 and ci.n_resamples == 2000 and ci.n == (300, 300)
    assert sg.percentile_ratio_ci(cur, base) == ci  # same seed, same interval
    other = sg.percentile_ratio_ci(cur, base, seed=1)
    assert other.seed == 1 and (other.low, other.high) != (ci.low, ci.high)
    assert intervals_separate(ci.as_pair(), [0.9, 1.0])


def test_ratio_interval_coverage_on_seeded_samples():
    hits = 0
    for seed in range(40):
        cur, base = lognormal_pair(100 + seed, n=60)
        ci = sg.percentile_ratio_ci(cur, base, method="percentile", n_resamples=1000, seed=seed)
        hits += ci.low <= 1.2 <= ci.high
    assert hits >= 34  # nominal 95 % of 40 = 38


def test_percentile_difference_covers_shift():
    rng = np.random.default_rng(3)
    base = rng.lognormal(0.0, 0.4, 1000)
    cur = rng.lognormal(0.0, 0.4, 1000) + 0.5  # every latency 0.5 ms longer: p99 difference 0.5
    ci = sg.percentile_difference_ci(cur, base, q=99)
    assert ci.low < 0.5 < ci.high and ci.notes == ()
    assert ci.estimate == pytest.approx(np.percentile(cur, 99) - np.percentile(base, 99))
    same = sg.percentile_difference_ci(base, base, q=99)
    assert same.estimate == 0 and same.low <= 0 <= same.high
    few = sg.percentile_difference_ci(cur[:50], base[:50], q=99, method="percentile")
    assert any("fewer than 100" in n for n in few.notes)


def test_bootstrap_degenerate_inputs():
    with pytest.raises(ValueError, match="at least 2 values per side; current has 0"):
        sg.percentile_ratio_ci([], [1.0, 2.0])
    with pytest.raises(ValueError, match="baseline has 1"):
        sg.percentile_difference_ci([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive baseline"):
        sg.percentile_ratio_ci([1.0, 2.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="NaN"):
        sg.percentile_ratio_ci([1.0, float("inf")], [1.0, 2.0])
    with pytest.raises(ValueError, match="BCa or percentile"):
        sg.percentile_ratio_ci([1.0, 2.0], [1.0, 2.0], method="basic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence"):
        sg.percentile_ratio_ci([1.0, 2.0], [1.0, 2.0], confidence=95)
    with pytest.raises(ValueError, match="too few"):
        sg.percentile_ratio_ci([1.0, 2.0], [1.0, 2.0], n_resamples=10)
    flat = sg.percentile_ratio_ci([1.0, 1.0, 1.0], [2.0, 2.0, 2.0])  # no spread: the point, said so
    assert (flat.estimate, flat.low, flat.high) == (0.5, 0.5, 0.5)
    assert any("same value" in n for n in flat.notes) and any("run narrow" in n for n in flat.notes)
    zeros = sg.percentile_difference_ci([0.0, 0.0], [0.0, 0.0])
    assert (zeros.low, zeros.high) == (0.0, 0.0)


def test_large_inputs_are_thinned_deterministically():
    cur, base = lognormal_pair(5, n=20_000)
    ci = sg.percentile_ratio_ci(cur, base, max_samples=1000, method="percentile")
    assert ci.n == (1000, 1000) and "thinned" in ci.notes[0]
    assert ci.estimate == pytest.approx(np.median(cur) / np.median(base))  # the estimate uses all the data
    assert ci.low < 1.2 < ci.high
    assert sg.percentile_ratio_ci(cur, base, max_samples=1000, method="percentile") == ci


def test_import_does_not_pull_scipy():
    code = "import sys, inferperf.significance; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
