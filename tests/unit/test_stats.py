import math

import numpy as np
import pytest

from inferperf import stats


def test_hand_values_linear_and_nearest_rank():
    v = list(range(1, 101))
    assert stats.percentile(v, 99) == pytest.approx(99.01)
    assert stats.percentile(v, 99, "nearest-rank") == 99
    w = [15, 20, 35, 40, 50]
    assert stats.percentile(w, 90) == pytest.approx(46.0)
    assert stats.percentile(w, 90, "nearest-rank") == 50


def test_percentiles_never_exceed_max_and_are_ordered():
    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 99, 1001):
        ns = rng.lognormal(15, 1, n).astype(np.int64)
        for method in ("linear", "nearest-rank"):
            s = stats.latency_summary(ns, method)
            assert s["min"] <= s["p50"] <= s["p90"] <= s["p95"] <= s["p99"] <= s["p999"] <= s["max"]
            assert s["max"] == pytest.approx(ns.max() / 1e6)
            assert s["percentile_method"] == method


def test_summary_in_ms_from_ns():
    s = stats.latency_summary([1_000_000, 2_000_000, 3_000_000])
    assert s["count"] == 3 and s["mean"] == pytest.approx(2.0) and s["p50"] == pytest.approx(2.0)
    assert s["std"] == pytest.approx(1.0)


def test_bad_arguments():
    with pytest.raises(ValueError):
        stats.percentile([], 50)
    with pytest.raises(ValueError):
        stats.percentile([1], 101)
    with pytest.raises(ValueError):
        stats.percentile([1], 50, "nearest")


def test_median_ci_order_statistics():
    # n=100: the classical 95 % distribution-free interval is X(40)..X(61) (Conover, table A3).
    lo, hi = stats.median_ci(list(range(1, 101)))
    assert (lo, hi) == (40, 61)
    # n=5: no 95 % interval exists; the range is returned.
    assert stats.median_ci([5, 1, 3, 2, 4]) == (1, 5)
    # coverage check: the median lies in the interval for most samples
    rng = np.random.default_rng(0)
    hits = sum(lo <= 0 <= hi for lo, hi in (stats.median_ci(rng.standard_normal(51)) for _ in range(400)))
    assert 0.93 <= hits / 400 <= 0.995


def test_quantile_ci_order_statistics():
    # at q = 50 it is the median interval: X(40)..X(61) for n = 100 (Conover, table A3)
    assert stats.quantile_ci(list(range(1, 101)), 50) == (40, 61)
    # p99 from 50 samples: no order statistic lies far enough beyond it for an upper end
    lo, hi = stats.quantile_ci(list(range(1, 51)), 99)
    assert lo <= 50 and math.isnan(hi)
    assert not stats.intervals_separate([lo, hi], [1000.0, 2000.0])  # NaN end: no claim
    # coverage of the true p90 of N(0, 1) (1.2816) over seeded samples
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(200):
        lo, hi = stats.quantile_ci(rng.standard_normal(300), 90)
        hits += lo <= 1.2815515655446004 <= hi
    assert 0.92 <= hits / 200 <= 0.995
    with pytest.raises(ValueError, match="at least one sample"):
        stats.quantile_ci([], 50)
    with pytest.raises(ValueError, match=r"q in \(0, 100\)"):
        stats.quantile_ci([1.0], 100)


def test_mean_ci_and_cv():
    lo, hi = stats.mean_ci([10.0, 12.0, 14.0])
    assert lo < 12.0 < hi
    assert hi - lo == pytest.approx(2 * 4.302652729911275 * 2.0 / math.sqrt(3), rel=1e-6)
    assert stats.mean_ci([5.0]) == (5.0, 5.0)
    assert stats.cv_percent([10, 10, 10]) == 0.0
    assert math.isnan(stats.cv_percent([1.0]))


def test_percentile_notes_thresholds():
    assert stats.min_samples_for(99) == 100 and stats.min_samples_for(99.9) == 1000
    assert stats.min_samples_for(90) == 10 and stats.min_samples_for(95) == 20
    notes = stats.percentile_notes(50)
    assert any(n.startswith("p99 from 50") for n in notes) and any(n.startswith("p99.9") for n in notes)
    assert not any(n.startswith("p90") or n.startswith("p95") for n in notes)
    assert stats.percentile_notes(1000) == []
    assert stats.percentile_notes(1) == ["p50 from 1 samples: needs >= 2 to mean more than the maximum",
                                         "p90 from 1 samples: needs >= 10 to mean more than the maximum",
                                         "p95 from 1 samples: needs >= 20 to mean more than the maximum",
                                         "p99 from 1 samples: needs >= 100 to mean more than the maximum",
                                         "p99.9 from 1 samples: needs >= 1000 to mean more than the maximum"]
    assert stats.percentile_notes(0) == []  # nothing reported (a load step the server refused printed 5 such lines)


def test_windows_by_completion_time():
    # 10 queries of 1 ms back to back over 10 ms, two windows of 5 ms
    starts = [i * 1_000_000 for i in range(10)]
    lat = [1_000_000] * 10
    w = stats.windows(starts, lat, 10_000_000, 2)
    # completions at 1..10 ms: windows are (0, 5] and (5, 10]
    assert [x["count"] for x in w] == [5, 5]
    assert w[1]["queries_per_s"] == pytest.approx(5 / 0.005)
    assert w[0]["t_s"] == 0 and w[1]["t_s"] == pytest.approx(0.005)
    assert w[0]["p50_ms"] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        stats.windows(starts, lat, 0, 2)
