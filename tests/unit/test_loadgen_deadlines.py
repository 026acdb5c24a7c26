"""Per-request deadlines by one watchdog (loadgen/deadlines.py): a late exchange times out, never an early one,
within a tick of its deadline, and a cancellation from outside is never taken for a timeout."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from inferperf.clock import FakeClock
from inferperf.loadgen.deadlines import Deadlines, tick_for
from inferperf.loadgen.driver import Closed, Open, run_step
from inferperf.loadgen.transport import SimulatedServer
from inferperf.policy import arrivals
from tests.fake_loop import run_fake

MS = 1_000_000


def test_tick_is_an_eighth_of_the_timeout_within_1_to_100_ms() -> None:
    assert tick_for(30.0) == 0.1
    assert tick_for(0.4) == 0.05
    assert tick_for(0.004) == 0.001


async def _exchange(dl: Deadlines, clock: FakeClock, wait_s: float) -> str:
    """A stand-in for the driver's exchange: 'answer', 'timeout', or the CancelledError re-raised."""
    task = asyncio.current_task()
    assert task is not None
    dl.begin(task, clock.now_ns())
    try:
        await asyncio.sleep(wait_s)
        return "answer"
    except asyncio.CancelledError:
        if not dl.expired(task):
            raise
        return "timeout"
    finally:
        dl.end(task)


def _run(clock: FakeClock, main):  # noqa: ANN001, ANN202
    return run_fake(clock, main, timeout_s=60.0)


@pytest.mark.parametrize("wait_s, expect", [(0.95, "answer"), (1.2, "timeout")])
def test_an_exchange_times_out_only_past_its_deadline_and_within_a_tick(wait_s: float, expect: str) -> None:
    clock = FakeClock()

    async def main() -> tuple[str, int]:
        dl = Deadlines(1.0, clock)
        watchdog = asyncio.ensure_future(dl.run())
        t0 = clock.now_ns()
        try:
            return await asyncio.ensure_future(_exchange(dl, clock, wait_s)), clock.now_ns() - t0
        finally:
            watchdog.cancel()

    got, took_ns = _run(clock, main)
    assert got == expect
    if expect == "timeout":
        assert 1_000 * MS <= took_ns <= 1_000 * MS + round(tick_for(1.0) * 1e9) + MS


def test_a_cancellation_from_outside_is_not_taken_for_a_timeout() -> None:
    clock = FakeClock()

    async def main() -> tuple[bool, bool]:
        dl = Deadlines(1.0, clock)
        # cancelled from outside before the deadline: re-raised
        t = asyncio.ensure_future(_exchange(dl, clock, 5.0))
        await asyncio.sleep(0.5)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)
        early = t.cancelled()
        # the deadline and an outside cancel together: the outside one still ends the task
        t2 = asyncio.ensure_future(_exchange(dl, clock, 5.0))
        await asyncio.sleep(1.5)
        assert dl.check() == 1
        t2.cancel()
        await asyncio.gather(t2, return_exceptions=True)
        return early, t2.cancelled()

    assert _run(clock, main) == (True, True)


def test_driver_times_out_open_loop_requests_and_keeps_the_rest() -> None:
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.3, slots=4)
    mode = Open(arrivals.constant(10.0), max_connections=8)
    s = run_fake(clock, lambda: run_step(server, mode, clock=clock, warmup_s=0.0, duration_s=2.0, timeout_s=0.2,
                                         cpu=lambda: 0.0), timeout_s=600.0)  # fmt: skip
    done = s.done_ns >= 0
    kinds = {s.error_kinds[c] for c in np.unique(s.error[done & (s.error > 0)])}
    assert kinds == {"timeout"}
    late = (s.done_ns[done & (s.error > 0)] - s.sent_ns[done & (s.error > 0)]) / 1e6
    assert late.min() >= 200 and late.max() <= 200 + tick_for(0.2) * 1000 + 1
    # and none with a shorter service than the deadline
    clock = FakeClock()
    s = run_fake(clock, lambda: run_step(SimulatedServer(clock, service_s=0.15, slots=4), Closed(2), clock=clock,
                                         warmup_s=0.0, duration_s=2.0, timeout_s=0.2, cpu=lambda: 0.0),
                 timeout_s=600.0)  # fmt: skip
    assert (s.error == 0).all() and (s.done_ns >= 0).sum() >= 20
