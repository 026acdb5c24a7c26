"""Load steps (issue 23 items 2-4): refused requests end a step, the request pre-check, drain between steps,
the plan and progress lines, and the workers-vs-streams rule. Fake clock and simulated server."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from inferperf.clock import FakeClock
from inferperf.errors import UsageError
from inferperf.loadgen.driver import MAX_CONSECUTIVE_4XX, Closed, Open, StepSamples, run_step
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.result import step_result
from inferperf.loadgen.target import TargetInfo, build_payloads
from inferperf.loadgen.transport import Endpoint, SimulatedServer
from inferperf.policy import arrivals
from tests.fake_loop import run_fake


def step(clock: FakeClock, server: Any, mode: Any, **kw: Any) -> StepSamples:
    kw.setdefault("warmup_s", 0.0)
    kw.setdefault("cpu", lambda: 0.0)
    return run_fake(clock, lambda: run_step(server, mode, clock=clock, **kw), timeout_s=600.0)


def target(shape: list[int] | None = None, max_batch: int | None = None) -> TargetInfo:
    return TargetInfo(kind="kserve", url="http://127.0.0.1:1", model="m",
                      metadata={"name": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": shape or [-1, 4]}],
                                "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 2]}]},
                      config={} if max_batch is None else {"max_batch_size": max_batch},
                      shapes=[{"x": [1, 4]}], dtypes={"x": "FP32"}, payloads=[b""])  # fmt: skip


# ---------------------------------------------------------------- item 2: refused requests are not a stall


def test_ten_4xx_in_a_row_end_the_step_with_the_servers_first_words() -> None:
    """A server that refuses every request: the step stops after exactly 10 answers (closed loop, one stream),
    long before its 30 s, and the Result is INVALID naming the refusal, not 'the target stalled or died'."""
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.001, status=400)
    s = step(clock, server, Closed(1), duration_s=30.0)
    assert s.rejection == {"status": 400, "body": "simulated 400", "in_a_row": MAX_CONSECUTIVE_4XX}
    assert s.scheduled_ns.size == MAX_CONSECUTIVE_4XX  # one stream, 1 ms each: the step ended at the 10th answer
    assert s.measure_end_ns == s.done_ns[-1] == MAX_CONSECUTIVE_4XX * 1_000_000 and s.duration_s == pytest.approx(0.010)
    r = step_result(s, target(), LoadConfig(concurrency=[1]), [])
    assert r.metrics.client["rejected"]["status"] == 400
    assert not r.validity.valid and any("refused the requests" in x for x in r.validity.reasons)
    assert not any("stalled or died" in n for n in r.notes)


def test_an_open_loop_step_stops_sending_on_refusals_too() -> None:
    clock = FakeClock()
    s = step(clock, SimulatedServer(clock, service_s=0.001, status=404), Open(arrivals.constant(100)), duration_s=30.0)
    assert s.rejection is not None and s.rejection["status"] == 404
    assert MAX_CONSECUTIVE_4XX <= s.scheduled_ns.size < 20


@pytest.mark.parametrize("status", [
    lambda i: 400 if i % 2 else 200,  # refusals between successes: a flaky input, measured, not stopped
    lambda i: 429,  # too many requests: the server is overloaded, which is what load measures
])  # (every request answered 503 is a lost target, not a refusal: tests/unit/test_loadgen_verdicts.py)  # fmt: skip
def test_refusals_that_are_not_ten_in_a_row_or_are_load_signals_do_not_stop_the_step(status) -> None:  # noqa: ANN001
    clock = FakeClock()
    s = step(clock, SimulatedServer(clock, service_s=0.010, status=status), Closed(1), duration_s=2.0)
    assert s.rejection is None and s.duration_s == pytest.approx(2.0)
    assert s.scheduled_ns.size > 150


def test_shapes_and_dtypes_are_checked_against_the_metadata_before_any_request(tmp_path) -> None:  # noqa: ANN001
    ep = Endpoint.parse("http://h")
    cases = [
        (target([1, 3, 224, 224]), LoadConfig(model="m", shapes=["x:1x3x100x100"]), "contradicts fixed dim 2 \\(= 224\\)"),
        (target([-1, 4]), LoadConfig(model="m", shapes=["x:1x4x1"]), "has rank 3 but input 'x' is \\[-1, 4\\]"),
        (target([-1, 4], max_batch=4), LoadConfig(model="m", shapes=["x:8x4"]), "8 rows exceed the model's max_batch"),
    ]  # fmt: skip
    np.savez(tmp_path / "f64.npz", x=np.zeros((2, 4), np.float64))
    np.savez(tmp_path / "wide.npz", x=np.zeros((2, 5), np.float32))
    cases += [(target(), LoadConfig(model="m", input_data=str(tmp_path / "f64.npz")), "is float64 but .* FP32"),
              (target(), LoadConfig(model="m", input_data=str(tmp_path / "wide.npz")), "contradicts fixed dim 1")]
    for info, cfg, text in cases:
        with pytest.raises(UsageError, match=text) as e:
            build_payloads(info, cfg, ep)
        assert "\n" not in str(e.value) and not info.payloads[1:]
    ok = target([-1, 4], max_batch=4)
    ok.payloads = []
    build_payloads(ok, LoadConfig(model="m", shapes=["x:4x4"]), ep)  # what the model takes still builds
    assert len(ok.payloads) == 16


# ---------------------------------------------------------------- item 4: --workers N with fewer streams


def test_a_closed_loop_step_starts_at_most_one_worker_per_stream() -> None:
    from inferperf.loadgen.run import workers_for

    assert [workers_for(LoadConfig(concurrency=[c], workers=2), c) for c in (1, 2, 3)] == [1, 2, 2]
    assert workers_for(LoadConfig(request_rate=[5.0], workers=3), 5.0) == 3  # open loop: one schedule, strided


def test_the_cpu_figure_is_cpu_over_each_workers_own_span_and_absent_without_a_span() -> None:
    """Two workers whose spans differ (2 s and 1 s) and used 0.5 s of CPU each: 1 s / 3 s = 33.3 % of one core per
    process. A step that measured no time has no CPU figure (it used to divide by 1 ns: '4000000000 %') and is
    not called generator-bound."""
    from inferperf.loadgen.run import pool_samples
    from inferperf.loadgen.driver import WindowRule

    parts = []
    for k, dur in enumerate([2.0, 1.0]):
        clock = FakeClock()
        reads = iter([0.0, 0.5])
        parts.append(step(clock, SimulatedServer(clock, service_s=0.01), Closed(1), duration_s=dur, worker_id=k,
                          cpu=lambda: next(reads)))  # fmt: skip
    pooled = pool_samples(parts, WindowRule())
    r = step_result(pooled, target(), LoadConfig(concurrency=[2], workers=2), [])
    assert r.metrics.client["client_cpu_percent"] == pytest.approx(100 / 3)
    empty = parts[0]
    empty.measure_end_ns = empty.measure_start_ns
    r = step_result(empty, target(), LoadConfig(concurrency=[1]), [])
    assert r.metrics.client["client_cpu_percent"] is None
    assert not any("generator-bound" in x for x in r.validity.reasons)


# ---------------------------------------------------------------- item 3: drain between steps


def _two_steps(busy: bool) -> tuple[Any, Any, SimulatedServer]:
    """An overloaded step (300 req/s at a 100 req/s server whose abandoned requests stay queued: the client times
    out at 0.2 s, the server serves them anyway), then 20 req/s, on one fake-time loop as --find-max-rate runs."""
    from inferperf.loadgen.drain import drain
    from inferperf.loadgen.run import KeptConnections, run_one
    from tests.fake_loop import FakeTimeLoop

    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.010, slots=1, keeps_abandoned=True)

    async def gauge() -> int:
        return server.in_system

    kept = KeptConnections(transport=server, loop=FakeTimeLoop(clock), clock=clock, busy=gauge if busy else None)
    base = {"warmup_s": 0.2, "duration_s": 2.0, "timeout_ms": 200, "measurement_interval_ms": 1000}
    with kept:
        r1 = run_one(LoadConfig(request_rate=[300.0], **base), target(), 300.0, [], kept)
        r2 = run_one(LoadConfig(request_rate=[20.0], **base), target(), 20.0, [], kept)
        kept.loop.run_until_complete(drain(gauge, max_wait_s=600, quiet_s=0, clock=clock))  # no task left behind
    return r1, r2, server


def test_a_step_after_an_overloaded_one_waits_for_the_servers_queue_to_empty() -> None:
    """With the server's gauge the drain waits until it holds nothing, then 0.5 s quiet: the 20 req/s step meets
    an idle server, so every request takes exactly its 10 ms of service."""
    r1, r2, server = _two_steps(busy=True)
    assert r1.metrics.client["drain"] is None  # nothing before the first step
    d = r2.metrics.client["drain"]
    assert d["source"] == "metrics" and d["server_busy_before"] > 100 and d["server_busy_after"] == 0
    assert d["drained"] is True and d["waited_s"] > 1.0 and d["quiet_s"] == 0.5
    assert r2.metrics.errors.count == 0 and r2.metrics.latency_ms.p50 == pytest.approx(10.0, abs=1e-6)
    assert r2.metrics.latency_ms.p99 == pytest.approx(10.0, abs=1e-6)


def test_without_a_gauge_only_the_quiet_period_runs_and_the_backlog_shows() -> None:
    """The must-say-no case: a server that does not tell how busy it is gets only the quiet period (recorded as
    unconfirmed), and the second step then measures the first one's backlog (what --find-max-rate did before)."""
    _, r2, _ = _two_steps(busy=False)
    d = r2.metrics.client["drain"]
    assert d["source"] is None and d["drained"] is None and d["waited_s"] == pytest.approx(0.5)
    # behind the first step's backlog no request of the second one is answered in time (with the drain every one
    # took its 10 ms): each that ended timed out (200 ms)
    assert r2.metrics.latency_ms.count == 0 and r2.metrics.errors.count > 0
    assert set(r2.metrics.errors.by_kind) == {"timeout"}


def test_the_busy_gauges_of_inferperf_serve_are_summed_per_model() -> None:
    from inferperf.loadgen.drain import drain_note, parse_busy

    text = ("# TYPE inferperf_queue_depth gauge\ninferperf_queue_depth{model=\"m\"} 3.0\n"
            "inferperf_queue_depth{model=\"other\"} 7.0\n# TYPE inferperf_inflight_requests gauge\n"
            "inferperf_inflight_requests{model=\"m\"} 2.0\n")  # fmt: skip
    assert parse_busy(text, "m") == 5 and parse_busy(text, "other") == 7
    assert parse_busy("# TYPE x counter\nx_total 1.0\n", "m") is None  # another server: it cannot tell
    assert drain_note({"drained": False, "server_busy_after": 4, "waited_s": 60.0}).startswith("the server still held 4")
    assert drain_note({"drained": True}) is None and drain_note(None) is None


def test_the_find_max_rate_table_names_its_column_rate() -> None:
    """--find-max-rate without --request-rate searches rates: its column is `rate/s`, never `concurrency`."""
    from inferperf.cli.load import load_config
    from inferperf.cli.load_lines import table_header as _table_header

    cfg = load_config({"url": "http://127.0.0.1:1", "model": "m", "find_max_rate": True, "slo_p99_ms": 5})
    assert cfg.mode == "open" and _table_header(cfg.mode).splitlines()[-1].split()[0] == "rate/s"  # under the latency legend


def _fake_result(qps: float, p99: float) -> Any:
    from types import SimpleNamespace as NS

    return NS(metrics=NS(latency_ms=NS(count=1000, p99=p99), errors=NS(count=0), throughput=NS(queries_per_s=qps),
                         client={}, generation=None), validity=NS(verdict="VALID"))  # fmt: skip


def test_find_max_rate_prints_its_plan_and_a_bounded_progress_line_before_each_step() -> None:
    """A 137 req/s capacity searched from 10 req/s on the fake clock, each step lasting exactly its announced
    'about' time: the plan comes first, every step gets a line, and once bracketed each line's 'at most N
    step(s) left ... about T' bounds the steps and the time that really follow (bisection never exceeds it)."""
    import re

    from inferperf.loadgen.progress import duration_text, step_time_s
    from inferperf.loadgen.stress import RateSearch, drive

    clock = FakeClock()
    cfg = LoadConfig(find_max_rate=True, slo_p99_ms=50, warmup_s=2.0, timeout_ms=30_000)
    lines: list[str] = []
    started: list[tuple[int, float]] = []  # (clock ns, rate) at each step's start

    def run(rate: float) -> Any:
        started.append((clock.now_ns(), rate))
        clock.advance_ns(round(step_time_s(cfg, rate, search=True, requests=1000)[0] * 1e9))
        return _fake_result(min(rate, 137.0), 5.0 if rate <= 137 else 500.0)

    search = RateSearch(50, start=10.0)
    out = drive(search, run, "find_max_rate", on_progress=lines.append, cfg=cfg, requests=1000, clock=clock)
    assert lines[0].startswith("plan: 10, 20, 40, ... req/s (doubling) until a step misses p99 <= 50 ms or any error,"
                               " then bisection until the bracket is within 5 %; at most 20 steps of >= 1000 requests")
    assert f"at 10 req/s {duration_text(102.5)}" in lines[0]
    steps = lines[1:-1]
    assert len(steps) == len(out) == len(started) and lines[-1].startswith(f"done: {len(out)} steps in ")
    assert steps[0] == "step 1 bracketing: 10 req/s, about 1m42s; 0 s so far"
    assert steps[5].startswith("step 6 bisecting [80, 160]: 120 req/s, about ")
    end = clock.now_ns()
    for i, line in enumerate(steps):
        m = re.search(r"at most (\d+) step\(s\) left with this one, about ([^;]+)", line)
        if m is None:
            assert "bracketing" in line
            continue
        left, each = int(m.group(1)), step_time_s(cfg, _lo_before(search, i), search=True, requests=1000)[0]
        assert len(steps) - i <= left  # the steps that really came, this one included
        assert m.group(2) == duration_text(left * each)
        assert (end - started[i][0]) / 1e9 <= left * each + 1e-6  # and the time they really took


def _lo_before(search: Any, i: int) -> float:
    """The highest passing rate among the first ``i`` outcomes (the bracket's lower end before step i + 1)."""
    return max(o.value for o in search.outcomes[:i] if o.p99_ms <= search.slo_p99_ms)


def test_stress_prints_its_plan_with_the_stop_rules_and_the_total_bound() -> None:
    from inferperf.loadgen.progress import plan_line, progress_line
    from inferperf.loadgen.stress import Ramp

    cfg = LoadConfig(stress=True, slo_p99_ms=50, warmup_s=2.0, duration_s=8.0, timeout_ms=30_000)
    ramp = Ramp([1, 2, 4, 8], slo_p99_ms=50)
    assert plan_line(cfg, ramp) == ("plan: concurrency 1, 2, 4, 8, then doubling, until throughput gains < 5 % over two"
                                    " steps or p99 > 50 ms; at most 12 steps of about 10 s (at most 1m40s with late"
                                    " answers and the drain); all 12 steps about 2m06s, at most 20m06s")  # fmt: skip
    assert progress_line(cfg, ramp, 1, 0.0) == "step 1 of at most 12: concurrency 1, about 10 s; 0 s so far"
