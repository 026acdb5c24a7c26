"""The one stop request (issue 23 item 7): SIGINT and SIGTERM alike; a cooperative section stops its step at
once and keeps it, marked; elsewhere the signal is Ctrl-C as before. Steps on the fake loop."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest

from inferperf.clock import FakeClock
from inferperf.errors import Interrupted
from inferperf.interrupt import STOP, cooperative, handle_signals
from inferperf.loadgen.driver import Closed, run_step
from inferperf.loadgen.soak import soak_block, soak_samples
from inferperf.loadgen.stress import RateSearch, drive
from inferperf.loadgen.transport import SimulatedServer
from tests.fake_loop import run_fake


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    STOP.reset()
    yield
    STOP.reset()


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_in_a_cooperative_section_requests_a_stop(sig: int, code: int) -> None:
    heard = []
    with handle_signals(), cooperative():
        STOP.subscribe(lambda: heard.append(STOP.signal_name))
        os.kill(os.getpid(), sig)  # handled in this (main) thread before kill returns to Python code
        assert STOP.requested and heard == [signal.Signals(sig).name] and STOP.exit_code == code
        with pytest.raises(KeyboardInterrupt):  # a second signal is a hard stop
            os.kill(os.getpid(), sig)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_elsewhere_is_ctrl_c(sig: int) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), handle_signals():
        os.kill(os.getpid(), sig)
    assert STOP.requested and signal.getsignal(signal.SIGTERM) is before  # handlers restored


def _stop_at(clock: FakeClock, t_s: float):
    async def later() -> None:
        await asyncio.sleep(t_s - clock.now_ns() / 1e9)
        STOP.request(signal.SIGTERM)

    return later


def test_a_stop_request_ends_the_step_there_with_its_partial_figures() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.010, slots=1)

    async def main():
        stopper = asyncio.ensure_future(_stop_at(clock, 3.0)())
        s = await run_step(server, Closed(1), warmup_s=1.0, duration_s=60.0, clock=clock)
        await stopper
        return s

    s = run_fake(clock, main, timeout_s=120.0)
    assert s.interrupted and s.measure_end_ns - s.measure_start_ns == pytest.approx(2e9, abs=2e7)
    assert s.measured().sum() == pytest.approx(200, abs=2)  # 10 ms each, 2 s measured


def test_an_interrupted_soak_keeps_its_finished_intervals_and_the_partial_one() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.010, slots=1)
    lines: list[dict] = []

    async def main():
        stopper = asyncio.ensure_future(_stop_at(clock, 1.0 + 3.5)())  # warm-up 1 s, then 3.5 intervals
        out = await soak_samples(server, Closed(1), soak_s=60.0, interval_s=1.0, warmup_s=1.0,
                                 rss=lambda: 1e8, clock=clock, on_interval=lines.append)  # fmt: skip
        await stopper
        return out

    s, taken = run_fake(clock, main, timeout_s=120.0, inline_threads=True)  # RSS reads at fixed fake times
    assert s.interrupted and [iv["interval"] for iv in lines] == [1, 2, 3]
    assert lines[2]["t_s"] == pytest.approx(3.0) and lines[2]["queries_per_s"] == pytest.approx(100, abs=2)
    assert lines[2]["rss_bytes"] == 1e8
    b = soak_block(s, taken, 1.0, rss_source="given", bytes_per_hour=1048576, bytes_per_1000_requests=1024)
    assert [iv["partial"] for iv in b["intervals"]] == [False, False, False, True]


def test_search_stops_and_the_interrupted_step_moves_no_bracket() -> None:
    from types import SimpleNamespace

    def step(value: float) -> SimpleNamespace:
        if value > 10:
            STOP.request(signal.SIGINT)  # Ctrl-C during the second step
        client = {"interrupted": True} if STOP.requested else {}
        return SimpleNamespace(metrics=SimpleNamespace(client=client, latency_ms=SimpleNamespace(count=100, p99=1.0),
                                                       errors=SimpleNamespace(count=0),
                                                       throughput=SimpleNamespace(queries_per_s=value), generation=None),
                               validity=SimpleNamespace(verdict="VALID"))  # fmt: skip

    search = RateSearch(50.0, start=10.0)
    out = drive(search, step, "find_max_rate")  # type: ignore[arg-type]
    assert len(out) == 2 and [(o.value, o.p99_ms) for o in search.outcomes] == [(10.0, 1.0)]
    assert search.stop_reason == "interrupted (SIGINT)" and out[-1].metrics.client["stress"]["goodput_rate"] == 10.0


def test_interrupted_error_carries_the_signal_exit_code() -> None:
    assert Interrupted("x", 143).exit_code == 143 and Interrupted("x").exit_code == 130


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_load_reads_its_target_says_nothing_was_kept(monkeypatch, capsys, sig: int, code: int) -> None:
    """Before the steps (metadata fetch, payloads: ~1 s after start) a signal is a KeyboardInterrupt; it printed
    'error: interrupted' with nothing about what was kept."""
    from inferperf.cli import main

    def interrupted(cfg):  # noqa: ANN001, ANN202 - what inferperf.interrupt's handler does outside a cooperative section
        STOP.request(sig)
        raise KeyboardInterrupt

    monkeypatch.setattr("inferperf.loadgen.target.read_target", interrupted)
    assert main(["load", "http://127.0.0.1:9", "--model", "m", "--concurrency", "1,2"]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"interrupted by {signal.Signals(sig).name} before any step finished: nothing measured to keep"]


def test_a_second_signal_is_a_hard_stop_that_says_which_steps_are_on_disk(monkeypatch, capsys, tmp_path) -> None:
    """The first signal asks the step in progress to end; a second one stops at once (KeyboardInterrupt). It
    printed 'error: interrupted' while step 1's Result was on disk; now the line says so."""
    from inferperf.cli import main
    from inferperf.loadgen.options import LoadConfig
    from inferperf.loadgen.result import step_result
    from inferperf.loadgen.target import TargetInfo

    target = TargetInfo(kind="kserve", url="http://127.0.0.1:9", model="m",
                        metadata={"name": "m", "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]},
                        shapes=[{"x": [1, 4]}], dtypes={"x": "FP32"}, payloads=[b""])  # fmt: skip
    clock = FakeClock()
    samples = run_fake(clock, lambda: run_step(SimulatedServer(clock, service_s=0.01), Closed(1), warmup_s=0.0,
                                               duration_s=1.0, clock=clock, cpu=lambda: 0.0))  # fmt: skip
    first = step_result(samples, target, LoadConfig(concurrency=[1]), [])

    def runner(cfg, command, on_step, target, **kw):  # noqa: ANN001, ANN202, ANN003 - step 1 done, then two signals
        on_step(first)
        STOP.request(signal.SIGINT)
        raise KeyboardInterrupt

    monkeypatch.setattr("inferperf.loadgen.target.read_target", lambda cfg: target)
    monkeypatch.setattr("inferperf.loadgen.spec.runner_for", lambda cfg: runner)
    out = tmp_path / "out"
    assert main(["load", "http://127.0.0.1:9", "--model", "m", "--concurrency", "1,2,4", "-o", str(out)]) == 130
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and "result written" not in ln]
    assert err == [f"interrupted by SIGINT: kept 1 finished step in {out}; a second SIGINT stopped at once: the step"
                   " in progress was dropped"]  # fmt: skip
    assert len(list(out.glob("*.json"))) == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_deferred_block_holds_the_signal_until_it_ends(sig: int) -> None:
    """CI of 2026-12-03: SIGTERM landed in tune's SQLite commit and came out as StorageInternalError (exit 1)
    instead of the interrupt (exit 143); a deferred block finishes the write, then raises."""
    from inferperf.interrupt import deferred

    done = []
    with pytest.raises(KeyboardInterrupt), handle_signals(), deferred():
        os.kill(os.getpid(), sig)
        done.append("the write after the signal ran")  # not cut in half
    assert done and STOP.requested and STOP.signal_name == signal.Signals(sig).name


def test_a_deferred_block_with_no_signal_raises_nothing() -> None:
    from inferperf.interrupt import deferred

    with handle_signals(), deferred():
        pass
    assert not STOP.requested


def test_interruptible_reopens_a_deferred_block_and_raises_a_held_signal_on_entry() -> None:
    from inferperf.interrupt import deferred, interruptible

    after = []
    with pytest.raises(KeyboardInterrupt), handle_signals(), deferred():
        with interruptible():
            os.kill(os.getpid(), signal.SIGTERM)  # raises here: a measurement stops at once
            after.append("not reached")
    assert after == [] and STOP.exit_code == 143
    STOP.reset()
    with pytest.raises(KeyboardInterrupt), handle_signals(), deferred():
        os.kill(os.getpid(), signal.SIGINT)  # held
        with interruptible():
            after.append("not reached either")  # the held signal raises on entry
    assert after == [] and STOP.cooperating is False
