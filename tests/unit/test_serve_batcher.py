"""Dynamic batcher: Triton's batch formation checked exactly on the fake clock.

Two layers: :func:`decide` (pure: queue, time, policy -> what to dispatch) is
called directly; :class:`DynamicBatcher` (the asyncio queue and dispatcher) runs
on an event loop whose time IS a :class:`FakeClock`: when nothing is ready the
loop jumps the clock to its next timer instead of sleeping, so a "10 ms
compute" is ``asyncio.sleep(0.010)`` and every dispatch time is exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from inferperf.clock import FakeClock
from inferperf.policy.batching import BatchPolicy, Decision, decide
from inferperf.serve import batcher
from inferperf.serve.batcher import DynamicBatcher, Request
from inferperf.serve.errors import Cancelled, NotReady, QueueFull

MS = 1_000_000


# ---------------------------------------------------------------- pure policy


def test_the_server_uses_the_policy_modules_one_copy_of_the_rule() -> None:
    assert batcher.decide is decide and batcher.BatchPolicy is BatchPolicy


@dataclass
class Q:
    rows: int
    arrival_ns: int
    key: Any = "a"


def test_after_idle_requests_wait_for_the_oldest_ones_delay() -> None:
    policy = BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS)
    queue = [Q(1, 0), Q(1, 5 * MS), Q(1, 10 * MS), Q(1, 15 * MS)]
    assert decide(queue, 15 * MS, policy) == Decision(0, 50 * MS)
    assert decide(queue, 50 * MS - 1, policy) == Decision(0, 50 * MS)
    assert decide(queue, 50 * MS, policy) == Decision(4, None)


def test_max_batch_size_counts_rows_and_a_full_batch_goes_at_once() -> None:
    policy = BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS)
    queue = [Q(4, 0), Q(4, 1), Q(4, 2)]
    assert decide(queue, 2, policy) == Decision(2, None)  # 8 rows: max reached, no waiting
    assert decide(queue[2:], 2, policy) == Decision(0, 2 + 50 * MS)
    assert decide([Q(5, 0), Q(4, 1)], 1, policy) == Decision(1, None)  # 9 rows would pass the max


def test_a_ragged_request_ends_the_batch() -> None:
    policy = BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS)
    queue = [Q(1, 0, "a"), Q(1, 1, "a"), Q(1, 2, "b"), Q(1, 3, "a")]
    assert decide(queue, 3, policy) == Decision(2, None)  # cannot grow past the ragged one: sent now
    assert decide(queue[2:], 3, policy) == Decision(1, None)


def test_preferred_sizes_dispatch_at_once_the_largest_reached() -> None:
    policy = BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS, preferred_batch_sizes=(2, 4))
    assert decide([Q(1, 0)], 0, policy) == Decision(0, 50 * MS)
    assert decide([Q(1, 0), Q(1, 1)], 1, policy) == Decision(2, None)
    assert decide([Q(1, 0), Q(1, 1), Q(1, 2)], 2, policy) == Decision(2, None)
    assert decide([Q(1, i) for i in range(5)], 4, policy) == Decision(4, None)
    # the next request would pass the largest preferred size: what is gathered before it goes now
    assert decide([Q(3, 0), Q(3, 1)], 1, policy) == Decision(1, None)
    # once the oldest request's delay expired, everything gathered goes (up to max_batch_size)
    assert decide([Q(1, i) for i in range(5)], 50 * MS, policy) == Decision(5, None)


def test_no_delay_and_batching_off_and_flush() -> None:
    no_delay = BatchPolicy(max_batch_size=8, dynamic=True)
    assert decide([Q(1, 0), Q(2, 0)], 0, no_delay) == Decision(2, None)
    off = BatchPolicy(max_batch_size=8, dynamic=False)
    assert decide([Q(1, 0), Q(1, 0)], 0, off) == Decision(1, None)
    waiting = BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS)
    assert decide([Q(1, 0), Q(1, 0)], 0, waiting, flush=True) == Decision(2, None)
    assert decide([], 0, waiting) == Decision(0, None)


# ---------------------------------------------------------------- asyncio on fake time


from tests.fake_loop import FakeTimeLoop, run_fake  # noqa: E402,F401  (moved to tests/fake_loop.py)


class Recorder:
    """Fake model: ``compute_s`` of fake time per batch; records every call (time, rows, keys)."""

    def __init__(self, clock: FakeClock, compute_s: float = 0.010) -> None:
        self.clock = clock
        self.compute_s = compute_s
        self.calls: list[tuple[int, list[int], list[Any], list[Any]]] = []

    async def execute(self, batch: list[Request]) -> None:
        self.calls.append((self.clock.now_ns(), [r.rows for r in batch], [r.key for r in batch],
                           [r.inputs["id"] for r in batch]))
        await asyncio.sleep(self.compute_s)
        for r in batch:
            if not r.future.done():
                r.future.set_result({"id": r.inputs["id"], "done_ns": self.clock.now_ns()})


class CountingObserver:
    def __init__(self) -> None:
        self.depth = 0
        self.cancelled_n = 0
        self.rejected_reasons: list[str] = []

    def request_queued(self, model: str) -> None:
        self.depth += 1

    def request_dequeued(self, model: str) -> None:
        self.depth -= 1

    def rejected(self, model: str, reason: str) -> None:
        self.rejected_reasons.append(reason)

    def cancelled(self, model: str) -> None:
        self.cancelled_n += 1

    def batch_executed(self, *args: Any) -> None:
        pass


def make(clock: FakeClock, rec: Recorder, slots: int = 1, max_queue_size: int = 0,
         observer: Any = None, **policy: Any) -> DynamicBatcher:
    b = DynamicBatcher("m", BatchPolicy(**policy), rec.execute, slots, max_queue_size, clock, observer)
    b.start()
    return b


def req(clock: FakeClock, ident: int, rows: int = 1, key: Any = "a",
        is_disconnected: Callable[[], Awaitable[bool]] | None = None) -> Request:
    return Request(inputs={"id": ident}, rows=rows, key=key, arrival_ns=clock.now_ns(),
                   is_disconnected=is_disconnected)


async def submit_at(b: DynamicBatcher, clock: FakeClock, at_ns: int, ident: int, **kw: Any) -> Any:
    await asyncio.sleep(max(0, at_ns - clock.now_ns()) / 1e9)
    return await b.submit(req(clock, ident, **kw))


def test_four_requests_5ms_apart_form_one_batch_at_50ms_after_the_first() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock, compute_s=0.010)

    async def main() -> list[Any]:
        b = make(clock, rec, max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS)
        out = await asyncio.gather(*[submit_at(b, clock, 5 * MS * i, i) for i in range(4)])
        await b.close()
        return out

    out = run_fake(clock, main)
    assert [(t, rows) for t, rows, _, _ in rec.calls] == [(50 * MS, [1, 1, 1, 1])]
    assert [o["id"] for o in out] == [0, 1, 2, 3]
    assert {o["done_ns"] for o in out} == {60 * MS}  # 10 ms compute after the dispatch


def test_three_requests_of_4_rows_never_exceed_8_rows_per_call() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock)

    async def main() -> None:
        b = make(clock, rec, max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS)
        await asyncio.gather(*[submit_at(b, clock, 0, i, rows=4) for i in range(3)])
        await b.close()

    run_fake(clock, main)
    assert [rows for _, rows, _, _ in rec.calls] == [[4, 4], [4]]
    assert max(sum(rows) for _, rows, _, _ in rec.calls) <= 8
    assert rec.calls[0][0] == 0  # 8 rows reached: no waiting
    assert rec.calls[1][0] == 50 * MS  # the last request waited its own delay (the instance was free at 10 ms)


def test_ragged_shapes_never_share_a_batch() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock)
    keys = ["a", "b", "a", "a", "b", "b", "a", "b"]

    async def main() -> None:
        b = make(clock, rec, slots=2, max_batch_size=8, dynamic=True, max_queue_delay_ns=5 * MS)
        await asyncio.gather(*[submit_at(b, clock, i * MS, i, key=k) for i, k in enumerate(keys)])
        await b.close()

    run_fake(clock, main)
    assert all(len(set(ks)) == 1 for _, _, ks, _ in rec.calls)
    assert sorted(i for _, _, _, ids in rec.calls for i in ids) == list(range(len(keys)))


def test_a_preferred_size_dispatches_at_once() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock)

    async def main() -> None:
        b = make(clock, rec, max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS, preferred_batch_sizes=(2,))
        await asyncio.gather(submit_at(b, clock, 0, 0), submit_at(b, clock, 1 * MS, 1))
        await b.close()

    run_fake(clock, main)
    assert [(t, rows) for t, rows, _, _ in rec.calls] == [(1 * MS, [1, 1])]


def test_queue_full_at_exactly_max_queue_size() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock, compute_s=0.100)
    obs = CountingObserver()

    async def main() -> tuple[list[Any], int]:
        b = make(clock, rec, max_queue_size=3, observer=obs, max_batch_size=1, dynamic=False)
        first = asyncio.ensure_future(b.submit(req(clock, 0)))
        await asyncio.sleep(0.001)  # the first is running: the queue is empty, the instance busy
        waiting = [asyncio.ensure_future(b.submit(req(clock, i))) for i in (1, 2, 3)]
        await asyncio.sleep(0)
        assert b.depth == 3
        with pytest.raises(QueueFull):
            await b.submit(req(clock, 4))
        out = await asyncio.gather(first, *waiting)
        depth_after = b.depth
        await b.close()
        return out, depth_after

    out, depth_after = run_fake(clock, main)
    assert [o["id"] for o in out] == [0, 1, 2, 3]
    assert obs.rejected_reasons == ["queue_full"] and depth_after == 0 and obs.depth == 0
    assert [ids for _, _, _, ids in rec.calls] == [[0], [1], [2], [3]]  # batching off: one request per call


def test_a_request_whose_client_left_is_never_executed() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock)
    obs = CountingObserver()
    gone = False

    async def away() -> bool:
        return gone

    async def main() -> list[Any]:
        nonlocal gone
        b = make(clock, rec, observer=obs, max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS)
        stays = asyncio.ensure_future(b.submit(req(clock, 0)))
        leaves = asyncio.ensure_future(b.submit(req(clock, 1, is_disconnected=away)))
        killed = asyncio.ensure_future(b.submit(req(clock, 2)))
        await asyncio.sleep(0.010)
        gone = True  # client 1 disconnects while queued
        killed.cancel()  # client 2's handler is cancelled while queued
        out = await asyncio.gather(stays, leaves, killed, return_exceptions=True)
        await b.close()
        return out

    import gc
    import logging

    class Caught(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    caught = Caught()
    logging.getLogger("asyncio").addHandler(caught)
    try:
        out = run_fake(clock, main)
        gc.collect()  # an unretrieved future exception is logged when the future is collected
    finally:
        logging.getLogger("asyncio").removeHandler(caught)
    assert out[0]["id"] == 0
    assert isinstance(out[1], Cancelled) and isinstance(out[2], asyncio.CancelledError)
    assert [ids for _, _, _, ids in rec.calls] == [[0]]  # the model never saw rows of 1 or 2
    assert obs.cancelled_n == 2 and obs.depth == 0
    # the dropped requests' futures (client 2's caller is gone) log no "Future exception was never retrieved"
    assert not [m for m in caught.messages if "never retrieved" in m], caught.messages


def test_close_drains_everything_accepted_then_refuses() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock)
    obs = CountingObserver()

    async def main() -> tuple[list[Any], Exception | None]:
        b = make(clock, rec, observer=obs, max_batch_size=2, dynamic=True, max_queue_delay_ns=1000 * MS)
        tasks = [asyncio.ensure_future(b.submit(req(clock, i))) for i in range(5)]
        await asyncio.sleep(0)
        await b.close(drain=True)
        out = await asyncio.gather(*tasks)
        try:
            await b.submit(req(clock, 9))
        except NotReady as e:
            return out, e
        return out, None

    out, refused = run_fake(clock, main)
    assert [o["id"] for o in out] == [0, 1, 2, 3, 4]
    assert clock.now_ns() < 1000 * MS  # drained without waiting for the delay
    assert isinstance(refused, NotReady) and refused.reason == "shutting_down"
    assert obs.rejected_reasons == ["shutting_down"] and obs.depth == 0


def test_two_instances_run_two_batches_in_parallel() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock, compute_s=0.010)

    async def main() -> None:
        b = make(clock, rec, slots=2, max_batch_size=1, dynamic=False)
        await asyncio.gather(*[b.submit(req(clock, i)) for i in range(4)])
        await b.close()

    run_fake(clock, main)
    assert [t for t, _, _, _ in rec.calls] == [0, 0, 10 * MS, 10 * MS]


def test_close_without_drain_fails_what_waits_and_finishes_what_runs() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock, compute_s=0.010)
    obs = CountingObserver()

    async def main() -> list[Any]:
        b = make(clock, rec, observer=obs, max_batch_size=1, dynamic=False)
        tasks = [asyncio.ensure_future(b.submit(req(clock, i))) for i in range(3)]
        await asyncio.sleep(0.001)  # request 0 runs, 1 and 2 wait
        await b.close(drain=False)
        return await asyncio.gather(*tasks, return_exceptions=True)

    out = run_fake(clock, main)
    assert out[0]["id"] == 0
    assert all(isinstance(o, NotReady) and o.reason == "shutting_down" for o in out[1:])
    assert [ids for _, _, _, ids in rec.calls] == [[0]] and obs.depth == 0


def test_an_execute_that_raises_answers_its_requests_and_the_batcher_keeps_going() -> None:
    clock = FakeClock(0)
    rec = Recorder(clock)
    failed = [False]

    async def execute(batch: list[Request]) -> None:
        if not failed[0]:
            failed[0] = True
            raise ValueError("bug")
        await rec.execute(batch)

    async def main() -> tuple[Any, Any]:
        b = DynamicBatcher("m", BatchPolicy(max_batch_size=1), execute, 1, 0, clock, None)
        first = await asyncio.gather(b.submit(req(clock, 0)), return_exceptions=True)
        second = await b.submit(req(clock, 1))
        await b.close()
        return first[0], second

    first, second = run_fake(clock, main)
    assert isinstance(first, ValueError) and second["id"] == 1


def test_a_request_queued_past_its_deadline_gets_504_at_the_deadline_and_never_runs() -> None:
    """One instance busy with A (held until released); B and C queue at 10 ms with a 60 ms deadline. B and C
    fail with QueueTimeout at exactly 70 ms, while A still runs (not when the instance frees up); the model
    never sees them; the rejected counter (reason timeout) counts both."""
    from inferperf.serve.errors import QueueTimeout

    clock = FakeClock(0)
    obs = CountingObserver()

    async def main() -> tuple[list[list[int]], list[int], int]:
        release = asyncio.Event()
        ran: list[list[int]] = []

        async def execute(batch: list[Request]) -> None:
            ran.append([r.inputs["id"] for r in batch])
            await release.wait()
            for r in batch:
                r.future.set_result(r.inputs["id"])

        b = DynamicBatcher("m", BatchPolicy(), execute, slots=1, clock=clock, observer=obs, timeout_ms=60)
        a = asyncio.ensure_future(b.submit(req(clock, 0)))
        await asyncio.sleep(0.010)  # A is running
        failed_at: list[int] = []

        async def queued(i: int) -> None:
            with pytest.raises(QueueTimeout) as e:
                await b.submit(req(clock, i))
            assert e.value.status == 504
            failed_at.append(clock.now_ns())

        await asyncio.gather(*(queued(i) for i in (1, 2)))
        released_at = clock.now_ns()
        release.set()
        assert await a == 0
        await b.close()
        return ran, failed_at, released_at

    ran, failed_at, released_at = run_fake(clock, main)
    assert ran == [[0]]  # B and C never reached the model
    assert failed_at == [70 * MS, 70 * MS]  # at their deadline: arrival (10 ms) + 60 ms
    assert released_at == 70 * MS  # A was still running then: the instance had not freed up
    assert obs.rejected_reasons == ["timeout", "timeout"] and obs.depth == 0


def _slow_check(clock: FakeClock, took_ns: int, away: bool) -> Callable[[], Awaitable[bool]]:
    """A disconnect check that answers ``away``, taking ``took_ns`` of fake time the first time, none after."""
    calls = [0]

    async def ask() -> bool:
        calls[0] += 1
        if calls[0] == 1:
            await asyncio.sleep(took_ns / 1e9)
        return away

    return ask


def _run_deadline_race(second_away: bool, cancel_first_at_ns: int | None = None) -> tuple[Recorder, list[Any],
                                                                                           list[int], Any]:
    """50 ms queue delay, 60 ms deadline: request 0 at t=0 (no client check), request 1 at 10 ms whose client
    check takes 15 ms the first time and answers ``second_away``. The batch forms at 50 ms; the check runs 50-65 ms, and request
    0's deadline (60 ms) passes in it. Optionally request 0's caller is cancelled mid-check."""
    clock = FakeClock(0)
    rec = Recorder(clock)
    obs = CountingObserver()
    ended_at: list[int] = [0, 0]

    async def main() -> list[Any]:
        b = DynamicBatcher("m", BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=50 * MS),
                           rec.execute, 1, 0, clock, obs, timeout_ms=60)
        b.start()

        async def one(i: int, at_ns: int, **kw: Any) -> Any:
            await asyncio.sleep(at_ns / 1e9)
            try:
                return await b.submit(req(clock, i, **kw))
            finally:
                ended_at[i] = clock.now_ns()

        tasks = [asyncio.ensure_future(one(0, 0)),
                 asyncio.ensure_future(one(1, 10 * MS, is_disconnected=_slow_check(clock, 15 * MS, second_away)))]
        if cancel_first_at_ns is not None:
            await asyncio.sleep(cancel_first_at_ns / 1e9)
            tasks[0].cancel()
        out = await asyncio.gather(*tasks, return_exceptions=True)
        await b.close()
        return out

    out = run_fake(clock, main)
    return rec, out, ended_at, obs


def test_a_deadline_passing_while_the_batch_is_checked_fails_the_request_then_not_later() -> None:
    """Request 0's deadline (60 ms) passes while request 1's client is asked (50-65 ms) and that client is gone:
    request 0 gets 504 at 60 ms and never runs (before: re-queued, it ran at 65 ms without its deadline)."""
    from inferperf.serve.errors import QueueTimeout

    rec, out, ended_at, obs = _run_deadline_race(second_away=True)
    assert isinstance(out[0], QueueTimeout) and isinstance(out[1], Cancelled)
    assert ended_at[0] == 60 * MS
    assert rec.calls == []  # the model never saw either
    assert obs.rejected_reasons == ["timeout"] and obs.cancelled_n == 1 and obs.depth == 0


def test_a_deadline_passing_while_the_batch_is_checked_re_forms_the_batch_without_it() -> None:
    """Request 1's client stays; request 0's deadline passes during the check: 504 at 60 ms, and request 1
    runs alone once the check ends (65 ms), not with request 0 in its batch."""
    from inferperf.serve.errors import QueueTimeout

    rec, out, ended_at, obs = _run_deadline_race(second_away=False)
    assert isinstance(out[0], QueueTimeout) and ended_at[0] == 60 * MS
    assert out[1]["id"] == 1
    assert [(t, ids) for t, _, _, ids in rec.calls] == [(65 * MS, [1])]
    assert obs.rejected_reasons == ["timeout"] and obs.depth == 0


def test_a_caller_cancelled_while_its_batch_is_checked_is_dropped_not_run() -> None:
    """Request 0's handler is cancelled at 55 ms, mid-check: it is dropped (cancelled counter), and the model
    runs request 1 alone at 65 ms."""
    rec, out, _, obs = _run_deadline_race(second_away=False, cancel_first_at_ns=55 * MS)
    assert isinstance(out[0], asyncio.CancelledError) and out[1]["id"] == 1
    assert [(t, ids) for t, _, _, ids in rec.calls] == [(65 * MS, [1])]
    assert obs.cancelled_n == 1 and obs.depth == 0 and obs.rejected_reasons == []
