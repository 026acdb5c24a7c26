"""Spike detection, steady-state detection, memory growth and capacity planning (pure functions)."""

from __future__ import annotations

import numpy as np
import pytest

from inferperf.analysis.capacity import instances_for
from inferperf.analysis.spikes import find_spikes, spike_threshold_ns
from inferperf.analysis.steady import memory_growth, steady_state


def _clean(n: int = 2000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (1_000_000 * (1.0 + 0.05 * rng.standard_normal(n))).astype(np.int64)  # 1 ms +- 5 %


def test_planted_every_20th_query_spike_is_found_with_its_period():
    lat = _clean()
    lat[19::20] = 5_000_000
    starts = np.cumsum(lat) - lat
    s = find_spikes(lat, starts)
    assert s.count == len(lat[19::20]) == 100
    assert s.share == pytest.approx(0.05)
    assert s.period_queries == 20
    assert s.period_share == 1.0
    assert s.max_ms == pytest.approx(5.0)
    assert s.indices[:3] == [19, 39, 59]
    assert s.period_s is not None and s.period_s == pytest.approx(20 * 1.2e-3, rel=0.1)


def test_clean_data_has_no_spikes():
    for seed in range(5):
        s = find_spikes(_clean(seed=seed))
        assert s.count == 0 and s.period_queries is None and s.indices == []


def test_random_spikes_have_no_period():
    lat = _clean(seed=1)
    rng = np.random.default_rng(7)
    at = np.sort(rng.choice(len(lat), 40, replace=False))
    lat[at] = 6_000_000
    s = find_spikes(lat)
    assert s.count == 40
    assert s.period_queries is None


def test_period_is_found_per_sequence_not_across_runs():
    one = _clean(500)
    one[9::10] = 4_000_000
    two = _clean(500, seed=3)
    two[4::10] = 4_000_000  # same period, other phase: joined end to end the gaps would break
    lat = np.concatenate([one, two])
    runs = np.repeat([0, 1], 500)
    assert find_spikes(lat, None, runs).period_queries == 10


def test_spike_threshold_is_at_least_twice_the_median():
    assert spike_threshold_ns([100, 100, 100, 100]) == 200.0
    with pytest.raises(ValueError):
        find_spikes([])


def test_steady_state_finds_the_end_of_a_slow_start():
    lat = np.concatenate([np.full(300, 3_000_000), _clean(1700)])
    st = steady_state(lat, warmup_given=100)
    assert st.settled
    assert 300 <= st.end_index <= 300 + st.block
    assert st.measured_unsettled == st.end_index - 100
    assert st.advice_warmup_queries == 500
    assert st.first_median_ms == pytest.approx(3.0)


def test_steady_state_of_a_flat_sequence_starts_at_zero():
    st = steady_state(_clean(), warmup_given=10)
    assert st.settled and st.end_index == 0 and st.measured_unsettled == 0 and st.advice_warmup_queries is None


def test_memory_growth_needs_a_long_enough_run():
    t = np.arange(0, 60, 0.1)
    growing = 100 * 2**20 + t * 4 * 2**20
    m = memory_growth(t, growing)
    assert m is not None and m.growing and m.slope_bytes_per_s == pytest.approx(4 * 2**20)
    assert not memory_growth(t[:20], growing[:20]).growing  # 2 s: arenas filling, not a leak
    assert not memory_growth(t, np.full(t.size, 100 * 2**20)).growing
    assert memory_growth([0.1, 0.2], [1, 2]) is None


def test_instances_for_rounds_up_with_headroom():
    assert instances_for(1000, 250) == 4
    assert instances_for(1000, 250, headroom=0.2) == 5
    assert instances_for(1, 1e6) == 1
    with pytest.raises(ValueError):
        instances_for(1000, 0)
    with pytest.raises(ValueError):
        instances_for(1000, 10, headroom=1.0)
