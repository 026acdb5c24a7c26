"""Stress ramp and capacity search (issue 13 item 5): pure ask/tell with scripted outcomes."""

import pytest

from inferperf.errors import UsageError
from inferperf.loadgen.stress import Outcome, Ramp, RateSearch


def _run_ramp(ramp, qps, p99=lambda v: 1.0, err=lambda v: 0.0, limit=30):
    for _ in range(limit):
        v = ramp.ask()
        if v is None:
            break
        ramp.tell(Outcome(v, qps(v), p99(v), err(v)))
    return ramp


def test_ramp_stops_when_gain_flat_two_steps_and_reports_knee():
    r = _run_ramp(Ramp([1, 2, 4, 8]), qps=lambda v: min(v, 8) * 100.0)
    assert [o.value for o in r.outcomes] == [1, 2, 4, 8, 16, 32]
    assert "gain" in r.stop_reason
    assert r.findings()["knee"] == 8
    assert r.findings()["errors_began_at"] is None


def test_no_knee_from_fewer_than_three_steps() -> None:
    """A ramp stopped (SLO, Ctrl-C) after one or two steps has no knee: it printed 'knee 1' after one step."""
    one = _run_ramp(Ramp([1], slo_p99_ms=5), qps=lambda v: v * 100.0, p99=lambda v: 10.0 * v)
    assert [o.value for o in one.outcomes] == [1] and one.findings()["knee"] is None
    two = _run_ramp(Ramp([1], slo_p99_ms=15), qps=lambda v: v * 100.0, p99=lambda v: 10.0 * v)
    assert [o.value for o in two.outcomes] == [1, 2] and two.findings()["knee"] is None
    three = _run_ramp(Ramp([1], slo_p99_ms=35), qps=lambda v: v * 100.0, p99=lambda v: 10.0 * v)
    assert [o.value for o in three.outcomes] == [1, 2, 4] and three.findings()["knee"] == 4  # best throughput


def test_ramp_stops_on_slo_and_error_rate():
    r = _run_ramp(Ramp([1], slo_p99_ms=50), qps=lambda v: v * 100.0, p99=lambda v: 10.0 * v)
    assert [o.value for o in r.outcomes] == [1, 2, 4, 8]
    f = r.findings()
    assert f["max_load_meeting_slo"] == 4 and "SLO" in f["stop_reason"]
    r = _run_ramp(Ramp([1], max_error_rate=0.01), qps=lambda v: v * 100.0, err=lambda v: 0.005 if v >= 4 else 0.0
                  if v < 8 else 0.5)
    assert r.findings()["errors_began_at"] == 4


def test_ramp_max_steps_and_float_rates():
    r = _run_ramp(Ramp([10.0], integer=False, max_steps=3), qps=lambda v: v)
    assert [o.value for o in r.outcomes] == [10.0, 20.0, 40.0] and "max steps" in r.stop_reason


@pytest.mark.parametrize("capacity", [200.0, 137.0, 1000.0])
def test_rate_search_finds_capacity_within_resolution(capacity):
    s = RateSearch(slo_p99_ms=50, start=10.0, resolution_percent=5.0)
    for _ in range(40):
        v = s.ask()
        if v is None:
            break
        s.tell(Outcome(v, min(v, capacity), 5.0 if v <= capacity else 500.0, 0.0))
    assert s.goodput is not None and s.goodput <= capacity
    assert capacity - s.goodput <= 0.05 * s.goodput + 1e-9
    assert s.findings()["bracket"][1] > capacity


@pytest.mark.parametrize("overloaded", [True, False])
def test_rate_search_an_overloaded_step_is_a_miss_even_within_the_slo(overloaded):
    """An OVERLOADED step (the offered rate not achieved) bounds the bracket from above though its p99 meets the
    SLO; the same step not OVERLOADED passes and raises the bracket's floor."""
    s = RateSearch(slo_p99_ms=100, start=100.0)
    s.tell(Outcome(s.ask(), 100.0, 5.0, 0.0))
    v = s.ask()
    s.tell(Outcome(v, 0.9 * v if overloaded else v, 5.0, 0.0, overloaded=overloaded))
    lo, hi = s.findings()["bracket"]
    assert (lo, hi) == ((100.0, 200.0) if overloaded else (200.0, None))
    assert s.goodput == (100.0 if overloaded else 200.0)


def test_rate_search_start_already_fails():
    s = RateSearch(slo_p99_ms=1, start=10.0)
    s.tell(Outcome(s.ask(), 5.0, 100.0, 0.0))
    assert s.ask() is None and s.goodput is None and "missed" in s.stop_reason


@pytest.mark.parametrize("flags, text", [
    ({"find_max_rate": True}, "--slo-p99-ms"),
    ({"find_max_rate": True, "slo_p99_ms": 5, "concurrency": [2]}, "open-loop"),
    ({"stress": True, "concurrency": [1], "request_rate": [5.0]}, "not both"),
    ({"stress": True, "soak_s": 5}, "not both"),
    ({"stress": True, "slo_p99_ms": -1}, "> 0"),
])
def test_bad_input_one_line(flags, text):
    from inferperf.cli.load import load_config

    with pytest.raises(UsageError) as e:
        load_config({"url": "http://127.0.0.1:1", "model": "m", **flags})
    assert text in str(e.value) and "\n" not in str(e.value)


def test_rate_search_on_fake_clock_finds_a_200_per_s_server_within_resolution():
    """SimulatedServer: 1 slot x 5 ms = 200 req/s; each step measures >= 1,000 requests (5 s at 200/s)."""
    import numpy as np

    from inferperf.clock import FakeClock
    from inferperf.loadgen.driver import Open, WindowRule, run_step
    from inferperf.loadgen.transport import SimulatedServer
    from inferperf.policy import arrivals
    from tests.fake_loop import run_fake

    search = RateSearch(slo_p99_ms=50, start=25.0, resolution_percent=5.0)
    for _ in range(20):
        rate = search.ask()
        if rate is None:
            break
        clock = FakeClock()
        server = SimulatedServer(clock, service_s=0.005, slots=1)
        mode = Open(arrivals.constant(rate), max_connections=64)
        s = run_fake(clock, lambda: run_step(server, mode, clock=clock, warmup_s=0.5, duration_s=max(5.0, 1000 / rate),
                                             windows=WindowRule(interval_ms=1000), cpu=lambda: 0.0), timeout_s=600.0)
        sel = s.measured() & (s.error == 0)
        lat = (s.done_ns[sel] - s.scheduled_ns[sel]) / 1e6
        search.tell(Outcome(rate, lat.size / s.duration_s, float(np.percentile(lat, 99)), 0.0))
    assert search.goodput is not None
    assert abs(search.goodput - 200.0) <= 0.05 * search.goodput + 5.0


@pytest.mark.parametrize("argv", [["--find-max-rate"], ["--stress", "--concurrency", "1", "--request-rate", "5"],
                                  ["--find-max-rate", "--slo-p99-ms", "5", "--concurrency", "2"]])
def test_cli_bad_stress_input_exits_2_with_one_line(argv, capsys):
    from inferperf.cli import main

    assert main(["load", "http://127.0.0.1:9", "--model", "m", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err and len(err.splitlines()) == 1
