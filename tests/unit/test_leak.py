"""stats.leak_slope / leak_verdict (issue 13 item 6): Newey-West slope CI and the leak rule."""

import math

import numpy as np
import pytest

from inferperf.stats import drift_verdict, leak_slope, leak_verdict, newey_west_lag


def test_lag_rule():
    assert newey_west_lag(100) == 4
    assert newey_west_lag(10) == math.floor(4 * 0.1 ** (2 / 9))


def test_newey_west_variance_by_hand():
    t = [0.0, 1.0, 2.0, 3.0, 4.0]
    y = [1.0, 3.0, 2.0, 5.0, 4.0]
    fit = leak_slope(t, y, lag=1)
    # OLS by hand: xbar 2, ybar 3, sxy = 8, sxx = 10 -> slope 0.8, intercept 1.4
    assert fit.slope == pytest.approx(0.8)
    u = [y[i] - (1.4 + 0.8 * t[i]) for i in range(5)]  # -0.4, 0.8, -1.0, 1.2, -0.6
    # slope variance = sum_ij c_i c_j u_i u_j k(|i-j|), c_i = (t_i - 2)/10, Bartlett k(0)=1, k(1)=1/2
    c = [(ti - 2.0) / 10.0 for ti in t]
    var = sum((c[i] * u[i]) ** 2 for i in range(5))
    var += 2 * 0.5 * sum(c[i] * u[i] * c[i - 1] * u[i - 1] for i in range(1, 5))
    assert fit.se ** 2 == pytest.approx(var)
    assert fit.ci95[0] == pytest.approx(0.8 - 1.959963984540054 * math.sqrt(var))


def test_bad_input_raises():
    with pytest.raises(ValueError):
        leak_slope([0, 1], [1, 2])
    with pytest.raises(ValueError):
        leak_slope([1, 1, 1], [1, 2, 3])


def test_fixed_growth_per_request_flagged():
    t = np.arange(120) * 10.0  # 20 minutes, 10 s intervals
    req = t * 50.0  # 50 req/s
    rss = 200e6 + req * 64.0 + np.random.default_rng(1).normal(0, 20e3, t.size)  # 64 B per request
    v = leak_verdict(t, rss, req)
    assert v["leak"] and v["significant"]
    assert v["slope_bytes_per_request"] == pytest.approx(64.0, rel=0.05)


def test_flat_not_flagged():
    t = np.arange(60) * 10.0
    rss = 200e6 + np.random.default_rng(2).normal(0, 50e3, t.size)
    assert not leak_verdict(t, rss, t * 10)["leak"]


def test_sawtooth_not_flagged():
    t = np.arange(120) * 10.0
    rss = 200e6 + (np.arange(120) % 12) * 2e6  # arena grows then is freed, 10 full teeth
    v = leak_verdict(t, rss, t * 10)
    assert not v["leak"]


def test_ar1_flat_false_positive_rate():
    flagged = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        e = np.empty(100)
        e[0] = rng.normal()
        for i in range(1, 100):
            e[i] = 0.7 * e[i - 1] + rng.normal()
        t = np.arange(100) * 10.0
        # 10 MB-scale noise around flat: any "trend" is noise
        if leak_verdict(t, 200e6 + 1e6 * e, bytes_per_hour=0.0)["significant"]:
            flagged += 1
    assert flagged <= 10


def test_latency_drift():
    t = np.arange(60) * 10.0
    p99 = 20 + t / 60.0  # +1 ms per minute
    assert drift_verdict(t, p99, threshold_per_hour=1.0)["drift"]
    assert not drift_verdict(t, 20 + np.random.default_rng(3).normal(0, 1, 60), 1.0)["drift"]
