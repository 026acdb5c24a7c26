"""stats.leak_slope / leak_verdict (issue 13 item 6): Newey-West slope CI and the leak rule."""

import math

import numpy as np
import pytest

from inferperf.stats import drift_verdict, leak_slope, leak_verdict, newey_west_lag
from inferperf.stats.leak import andrews_lag, troughs


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
    var *= 5 / 3  # small-sample factor n / (n - p) (HC1)
    assert fit.se ** 2 == pytest.approx(var)
    assert fit.ci95[0] == pytest.approx(0.8 - 3.182446305284263 * math.sqrt(var))  # Student t, 3 df, 97.5 %


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


# Issue 23 item 9: synthetic 1 Hz series over one hour. A straight line through the whole run called a plateau
# (allocator arenas, caches filling) a leak and missed a slow leak under a GC sawtooth at most phases.
MIB = 1048576.0
HOUR_T = np.arange(3600.0)


def _jitter(seed: int, sd: float = 0.25 * MIB, rho: float = 0.9) -> np.ndarray:
    """AR(1) noise (a persistent series: 10 s correlation time at 1 Hz), stationary sd ``sd`` bytes."""
    rng = np.random.default_rng(seed)
    e = np.empty(HOUR_T.size)
    e[0] = rng.normal() * sd
    innovations = rng.normal(size=HOUR_T.size) * sd * math.sqrt(1 - rho * rho)
    for i in range(1, e.size):
        e[i] = rho * e[i - 1] + innovations[i]
    return e


def _sawtooth(period_s: float, amplitude: float, phase_s: float) -> np.ndarray:
    return amplitude * (((HOUR_T + phase_s) % period_s) / period_s)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("shape", ["saturating, 99 % by 10 min", "saturating, 99 % by 15 min", "ramp for 10 min",
                                   "ramp for 20 min"])
def test_growth_that_levels_off_is_not_a_leak(shape: str, seed: int) -> None:
    growth = {"saturating, 99 % by 10 min": 150 * MIB * (1 - np.exp(-HOUR_T / 130)),
              "saturating, 99 % by 15 min": 150 * MIB * (1 - np.exp(-HOUR_T / 195)),
              "ramp for 10 min": 120 * MIB * np.minimum(HOUR_T, 600) / 600,
              "ramp for 20 min": 120 * MIB * np.minimum(HOUR_T, 1200) / 1200}[shape]
    rss = 200 * MIB + growth + _jitter(seed)
    old = leak_slope(HOUR_T / 3600, rss, lag=newey_west_lag(HOUR_T.size))  # the whole-run line, lag 7: "a leak"
    assert old.slope > MIB and old.ci95[0] > 0
    v = leak_verdict(HOUR_T, rss)
    assert not v["leak"], v["reason"]
    assert v["settle_s"] == pytest.approx(1200.0, abs=1.0)


@pytest.mark.parametrize("step_at_s", [300, 600, 900, 1800, 2700])
def test_step_growth_then_flat_is_not_a_leak(step_at_s: int) -> None:
    rss = 200 * MIB + 60 * MIB * (HOUR_T >= step_at_s) + _jitter(step_at_s)
    v = leak_verdict(HOUR_T, rss)
    assert not v["leak"], v["reason"]
    if step_at_s > 1200 + 0.15 * 2400:  # inside the fitted span: found and checked beside
        assert v["shift_at_s"] == pytest.approx(step_at_s, abs=0.05 * 2400)


@pytest.mark.parametrize("period_s,amplitude", [(120, 30 * MIB), (180, 40 * MIB), (300, 20 * MIB)])
@pytest.mark.parametrize("phase", [0.0, 0.25, 0.5, 0.75])
def test_sawtooth_alone_is_not_a_leak_and_a_slow_leak_under_it_is(period_s: float, amplitude: float,
                                                                   phase: float) -> None:  # fmt: skip
    base = 200 * MIB + _sawtooth(period_s, amplitude, phase * period_s) + _jitter(0)
    alone = leak_verdict(HOUR_T, base)
    assert not alone["leak"], alone["reason"]
    assert alone["envelope"] and alone["period_s"] == pytest.approx(period_s, rel=0.02)
    leaking = leak_verdict(HOUR_T, base + 4 * MIB * HOUR_T / 3600)  # 4 MiB/h under the teeth
    assert leaking["leak"], leaking["reason"]
    assert leaking["slope_bytes_per_hour"] == pytest.approx(4 * MIB, rel=0.35)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_slow_leak_in_noise_is_a_leak_and_flat_noise_is_not(seed: int) -> None:
    noise = _jitter(seed, sd=0.5 * MIB)
    assert leak_verdict(HOUR_T, 200 * MIB + 3 * MIB * HOUR_T / 3600 + noise)["leak"]
    assert not leak_verdict(HOUR_T, 200 * MIB + noise)["leak"]


def test_andrews_lag_grows_with_persistence() -> None:
    rng = np.random.default_rng(0)
    white = rng.normal(size=3600)
    assert andrews_lag(white) <= newey_west_lag(3600)
    assert andrews_lag(_jitter(0)) > 5 * newey_west_lag(3600)  # rho 0.9: Andrews (1991) gives ~60
    # by hand: rho = 0.5 exactly -> alpha = 4 * 0.25 / (0.25 * 2.25) = 16/9
    u = np.array([1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125])
    rho = float(u[1:] @ u[:-1]) / float(u[:-1] @ u[:-1])
    assert rho == pytest.approx(0.5)
    assert andrews_lag(u) == math.floor(1.1447 * (16 / 9 * 6) ** (1 / 3))


def test_troughs_one_per_cycle() -> None:
    y = _sawtooth(60, 10.0, 17.0)[:600]
    k = troughs(y, 60)
    assert len(k) == 9 and np.all(np.diff(k) == 60) and np.all(y[k] == 0.0)


def test_sawtooth_alone_false_leak_rate() -> None:
    """Seven troughs (a 5 min cycle over the 40 fitted minutes) hold little information: the 95 % CI must stay
    honest on them (no HAC lag on troughs: a Bartlett lag of 2 flagged ~9 % of flat runs as significant)."""
    flagged = sum(leak_verdict(HOUR_T, 200 * MIB + _sawtooth(300, 20 * MIB, 150) + _jitter(seed))["leak"]
                  for seed in range(100, 200))  # fmt: skip
    assert flagged <= 5


def test_a_few_points_on_an_exact_line_are_not_judged() -> None:
    """3 samples growing in whole pages lie on a line (zero-width CI): seconds of growth are no hourly verdict."""
    mib = 1048576.0
    few = leak_verdict([1.0, 2.0, 3.0], [110.62 * mib, 110.71 * mib, 110.80 * mib])
    assert few["judged"] is False and few["leak"] is False and few["significant"] is False
    assert "not judged" in few["reason"]
    six = leak_verdict([float(i) for i in range(6)], [100 * mib + 4096.0 * i for i in range(6)])
    assert six["judged"] is False and six["leak"] is False


def test_enough_points_of_steady_growth_are_still_a_leak() -> None:
    """The must-say-yes side of the minimum: 60 samples a minute apart growing 10 MiB/h with page noise."""
    rng = np.random.default_rng(7)
    t = np.arange(60) * 60.0
    rss = 200 * 1048576.0 + 10 * 1048576.0 * t / 3600.0 + 4096.0 * rng.integers(0, 4, t.size)
    v = leak_verdict(t, rss)
    assert v["judged"] is True and v["leak"] is True


HALF_HOUR_T = np.arange(1800.0)


@pytest.mark.parametrize("page_noise", [False, True])
def test_growth_that_settles_below_the_threshold_is_not_a_leak(page_noise: bool) -> None:
    """Issue 37 item 11: 200 MB + 30 MB (1 - exp(-t / 200 s)) over 30 minutes (0.43 MiB/h in its last 10) read as a
    significant leak of 1.58 MiB/h, and a ramp to 1,200 s then 10 flat minutes as 43 MiB/h. The growth of the
    last third of the run is fitted alone: settled under the threshold, it is no leak (and it says so)."""
    noise = 4096.0 * np.random.default_rng(3).integers(0, 4, HALF_HOUR_T.size) if page_noise else 0.0
    saturating = 200e6 + 30e6 * (1 - np.exp(-HALF_HOUR_T / 200)) + noise
    ramp = 200e6 + 30e6 * np.minimum(HALF_HOUR_T, 1200) / 1200 + noise
    for rss, whole in ((saturating, 1.5 * MIB), (ramp, 40 * MIB)):
        v = leak_verdict(HALF_HOUR_T, rss)
        assert v["significant"] and v["slope_bytes_per_hour"] > whole  # the straight line still reads growth
        assert not v["leak"] and "settled: the last 33 % of the run grows" in v["reason"], v["reason"]
        assert v["tail_ci95_bytes_per_hour"][1] < MIB
    steady = leak_verdict(HALF_HOUR_T, 200e6 + 3 * MIB * HALF_HOUR_T / 3600 + noise)  # must say yes: to the end
    assert steady["leak"] and steady["tail_ci95_bytes_per_hour"][1] >= MIB, steady["reason"]
