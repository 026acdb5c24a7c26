"""The load driver on the fake clock against a simulated server (issue 13's cases, exact or near exact)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from inferperf.clock import FakeClock
from inferperf.loadgen.driver import Closed, Open, StepSamples, WindowRule, run_step, window_figures
from inferperf.loadgen.transport import SimulatedServer
from inferperf.measure import arrivals
from tests.fake_loop import run_fake

MS = 1_000_000


def step(clock: FakeClock, server: SimulatedServer, mode: Any, **kw: Any) -> StepSamples:
    kw.setdefault("warmup_s", 0.0)
    kw.setdefault("cpu", lambda: 0.0)
    return run_fake(clock, lambda: run_step(server, mode, clock=clock, **kw), timeout_s=600.0)


def ok_latency_ms(s: StepSamples, corrected: bool = True) -> np.ndarray:
    sel = s.measured() & (s.error == 0)
    start = s.scheduled_ns if corrected else s.sent_ns
    return (s.done_ns[sel] - start[sel]) / 1e6


def test_closed_loop_conc_8_against_8_slots_of_20ms_gives_400_per_s_and_20ms() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.020, slots=8)
    s = step(clock, server, Closed(8), warmup_s=1.0, duration_s=10.0, windows=WindowRule(interval_ms=1000))
    lat = ok_latency_ms(s)
    assert lat.size / s.duration_s == pytest.approx(400, rel=1e-3)
    assert np.percentile(lat, 50) == pytest.approx(20.0, abs=1e-3)
    assert np.percentile(lat, 99) == pytest.approx(20.0, abs=1e-3)
    assert (s.scheduled_ns == s.sent_ns).all() and s.mode == "closed"
    assert s.stable is True and len(s.windows_ns) == 10
    assert server.connections_opened == 8 and s.connections_peak == 8
    assert s.measure_start_ns - s.t0_ns == 1_000_000_000  # warm-up never counted


def test_open_loop_freeze_shows_in_the_corrected_tail_not_the_uncorrected_one() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.001, slots=1, freezes=[(3.0, 4.0)])
    s = step(clock, server, Open(arrivals.constant(100), max_connections=1), duration_s=10.0)
    corrected, uncorrected = ok_latency_ms(s), ok_latency_ms(s, corrected=False)
    assert corrected.size == pytest.approx(1000, abs=2)
    assert 850 <= np.percentile(corrected, 99) <= 1000
    assert np.percentile(uncorrected, 99) < 5
    assert s.connections_ran_out > 90  # the one connection ran out during the freeze: reported


def test_rate_3_with_8_connections_sends_3_per_second() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.005, slots=8)
    s = step(clock, server, Open(arrivals.constant(3), max_connections=8), duration_s=10.0)
    sent = s.sent_ns[(s.sent_ns > s.measure_start_ns) & (s.sent_ns <= s.measure_end_ns)]
    assert sent.size / s.duration_s == pytest.approx(3.0, abs=0.1)
    assert (s.sent_ns - s.scheduled_ns).max() < 1000  # on time (< 1 us of float rounding)
    assert s.connections_peak == 1  # one connection suffices at 3 req/s and 5 ms


def test_a_trace_replays_exactly_and_ends_the_step() -> None:
    offsets = [0, 10 * MS, 10 * MS, 500 * MS, 1_200 * MS, 1_201 * MS]
    clock = FakeClock(5 * MS)
    server = SimulatedServer(clock, service_s=0.002, slots=4)
    s = step(clock, server, Open(arrivals.trace(offsets), max_connections=4), windows=WindowRule(interval_ms=500))
    assert (s.scheduled_ns - s.t0_ns).tolist() == offsets
    assert np.abs(s.sent_ns - s.scheduled_ns).max() < 1000
    assert (s.done_ns >= 0).all() and s.incomplete_mask().sum() == 0
    assert clock.now_ns() < s.t0_ns + 2_000 * MS  # ended with the trace, not after max_trials windows


def test_requests_n_stops_after_n_measured_sends_and_waits_for_them() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.010, slots=2)
    s = step(clock, server, Closed(4), warmup_s=0.5, requests=50)
    m = s.measured()
    assert (s.sent_ns >= s.measure_start_ns).sum() == 50
    assert m.sum() == 50 and s.incomplete_mask().sum() == 0


def test_windows_run_until_stable_or_max_trials_and_unstable_is_marked() -> None:
    clock = FakeClock()
    steady = SimulatedServer(clock, service_s=0.004, slots=1)
    s = step(clock, steady, Closed(1), windows=WindowRule(interval_ms=1000, max_trials=10))
    assert s.stable is True and len(s.windows_ns) == 3
    assert s.measure_end_ns - s.measure_start_ns == 3_000 * MS

    clock = FakeClock()
    slowing = SimulatedServer(clock, service_s=lambda i: 0.001 * (1 + i // 200), slots=1)
    s = step(clock, slowing, Closed(1), windows=WindowRule(interval_ms=1000, max_trials=5))
    assert s.stable is False and len(s.windows_ns) == 5
    assert s.measure_end_ns - s.measure_start_ns == 3_000 * MS  # the last 3 windows, kept


def test_a_target_that_dies_ends_the_step_on_time_with_errors_by_kind() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.010, slots=4, die_at_s=3.0)
    s = step(clock, server, Closed(4), duration_s=6.0, windows=WindowRule(interval_ms=1000))
    assert s.measure_end_ns == s.t0_ns + 6_000 * MS
    assert clock.now_ns() - s.measure_end_ns < 50 * MS  # ended on time
    kinds = {s.error_kinds[c] for c in np.unique(s.error[s.error > 0])}
    assert kinds == {"disconnected", "connect"}
    last = window_figures(s, *s.windows_ns[-1])
    assert last["count"] == 0
    errors_done = s.done_ns[s.error > 0]
    assert errors_done.min() >= 3_000 * MS  # each error keeps its own timestamp
    # backoff after a failed connect: ~4 streams x 100 per s x 3 s, not a hot loop
    assert (s.error > 0).sum() < 2000


def test_timeouts_are_errors_and_outstanding_requests_are_incomplete() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=2.0, slots=1)
    s = step(clock, server, Closed(2), duration_s=3.0, timeout_s=0.5, windows=WindowRule(interval_ms=1000))
    kinds = [s.error_kinds[c] for c in s.error[s.error > 0]]
    assert kinds and set(kinds) == {"timeout"}
    clock = FakeClock()
    s = step(clock, SimulatedServer(clock, service_s=0.3, slots=1), Closed(1), duration_s=1.0)
    assert s.incomplete_mask().sum() == 1  # the one in flight at the end: counted, not dropped
