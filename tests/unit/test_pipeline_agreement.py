"""The real pipeline engine on a fake clock agrees with the simulator exactly (issue 25 item 3).

The engine runs its own worker threads and coordinator, but on a :class:`FakeClock` with workers that script
their service times (``Call.end_ns`` = start + the same ``service(stage, item, worker)`` the simulator uses):
every item's record (queued, taken, served, handed on, which worker, refused), every queue event and every
send lag must equal the simulator's, with no tolerance. The queue and source rules themselves are pure
functions (:mod:`inferperf.policy.pipeline`), checked here on plain numbers.
"""

from __future__ import annotations

import random

import pytest

from inferperf.clock import FakeClock
from inferperf.policy import arrivals
from inferperf.pipeline.engine import StageRuntime, run
from inferperf.pipeline.simulate import simulate
from inferperf.pipeline.workers import Call
from inferperf.policy import pipeline as rules
from inferperf.policy.pipeline import StopRule

MS = 1_000_000
FIELDS = ("index", "intended_ns", "enq", "deq", "start", "end", "out", "cpu", "handover", "worker", "done_ns",
          "error", "rejected", "measured")


class Scripted:
    """A worker whose call takes ``service(stage, item, worker)`` ns of the clock's time (the item is its index)."""

    def __init__(self, clock: FakeClock, service, s: int, w: int) -> None:
        self.clock, self.service, self.s, self.w = clock, service, s, w

    def call(self, item: int) -> Call:
        t = self.clock.now_ns()
        d = int(self.service(self.s, item, self.w))
        return Call(item, t, t + d, d)


def _service(seed: int, stages: int):
    """Seeded service times per (stage, item, worker): 1-9 ms in whole ms (ties happen, on purpose)."""
    table: dict[tuple[int, int, int], int] = {}
    rng = random.Random(seed)

    def service(s: int, i: int, w: int) -> int:
        if (s, i, w) not in table:
            table[(s, i, w)] = rng.randint(1, 9) * MS
        return table[(s, i, w)]

    for s in range(stages):  # drawn up front, so both runs read the same table whatever their order
        for i in range(400):
            for w in range(3):
                service(s, i, w)
    return service


def _engine(names, workers, service, n_items, **kw):
    clock = FakeClock(0)
    stages = [StageRuntime(n, "function", "threads", [Scripted(clock, service, s, w) for w in range(k)])
              for s, (n, k) in enumerate(zip(names, workers, strict=True))]
    stop = StopRule(min_items=n_items, min_duration_s=0.0, max_duration_s=1e6, drain_timeout_s=1e6)
    tr, _ = run(stages, iter(range(10**6)), stop=stop, clock=clock, **kw)
    return tr


def _same(engine, sim) -> None:
    assert len(engine.items) == len(sim.items)
    for a, b in zip(engine.items, sim.items, strict=True):
        assert {f: getattr(a, f) for f in FIELDS} == {f: getattr(b, f) for f in FIELDS}, a.index
    assert engine.queue_events == sim.queue_events
    assert engine.send_lag_ns == sim.send_lag_ns
    assert (engine.mode, engine.concurrency, engine.schedule) == (sim.mode, sim.concurrency, sim.schedule)


def test_closed_loop_with_blocking_queues_and_several_workers_agrees_item_for_item() -> None:
    names, workers, sizes = ["pre", "model", "post"], [2, 3, 1], [2, 1, 2]  # post is the bottleneck
    service = _service(1, 3)
    engine = _engine(names, workers, service, 200, sizes=sizes, policies=["block"] * 3, concurrency=9)
    sim = simulate(names, workers, service, sizes=sizes, items=200, concurrency=9)
    _same(engine, sim)
    assert len(engine.completed()) == 200 and any(sum(b) for b in engine.blocked_ns)  # back-pressure happened
    assert {r.worker[1] for r in engine.items} == {0, 1, 2} and {r.worker[0] for r in engine.items} == {0, 1}


def test_open_loop_with_a_rejecting_queue_agrees_item_for_item() -> None:
    names, workers, sizes, policies = ["a", "b"], [1, 2], [3, 2], ["block", "reject"]
    service = _service(2, 2)
    engine = _engine(names, workers, service, 300, sizes=sizes, policies=policies,
                     schedule=arrivals.poisson(400.0, seed=7))
    sim = simulate(names, workers, service, sizes=sizes, policies=policies, items=300,
                   schedule=arrivals.poisson(400.0, seed=7))
    _same(engine, sim)
    rejected = sum(1 for r in engine.items if r.rejected == "b")
    assert rejected > 0 and len(engine.completed()) + rejected == 300


def test_an_open_loop_source_blocked_at_a_full_first_queue_sends_late_and_both_say_how_late() -> None:
    names, workers, sizes = ["slow"], [1], [1]
    service = lambda s, i, w: 10 * MS  # noqa: E731 - 100 items/s against 200 arrivals/s
    engine = _engine(names, workers, service, 50, sizes=sizes, policies=["block"],
                     schedule=arrivals.constant(200.0))
    sim = simulate(names, workers, service, sizes=sizes, items=50, schedule=arrivals.constant(200.0))
    _same(engine, sim)
    assert engine.send_lag_ns[:2] == [0, 0] and engine.send_lag_ns[-1] > 200 * MS


def test_the_engine_window_closes_when_the_source_stops_on_the_fake_clock() -> None:
    """Closed loop, one 5 ms stage, 20 items, concurrency 1: the 20th item is sent at 95 ms, the window
    closes then; it finishes in the drain at 100 ms."""
    tr = _engine(["a"], [1], lambda s, i, w: 5 * MS, 20, sizes=[1], policies=["block"], concurrency=1)
    assert (tr.t0_ns, tr.t_end_ns) == (0, 95 * MS)
    assert [r.done_ns for r in tr.items][-1] == 100 * MS and tr.incomplete == 0
    assert tr.starved_ns == [[0]] and tr.completions_in_window() == 19


# ------------------------------------------------------------------ the pure rules


def test_room_and_what_a_full_queue_does() -> None:
    assert rules.has_room(None, 10**6) and rules.has_room(2, 1) and not rules.has_room(2, 2)
    assert rules.when_full("reject", 1, closed_loop=True) == "reject"
    assert rules.when_full("reject", 0, closed_loop=False) == "reject"
    assert rules.when_full("reject", 0, closed_loop=True) == "block"  # a closed-loop source waits
    assert rules.when_full("block", 1, closed_loop=False) == "block"


def test_the_lowest_idle_worker_takes_the_item_and_the_closed_loop_keeps_n_in_flight() -> None:
    assert rules.pick_worker([3, 1, 2]) == 1
    assert rules.closed_loop_may_send(3, 4, source_waiting=False)
    assert not rules.closed_loop_may_send(4, 4, source_waiting=False)
    assert not rules.closed_loop_may_send(0, 4, source_waiting=True)


def test_the_stop_rule_and_its_timer_on_fake_time() -> None:
    clock = FakeClock(1_000 * MS)
    rule = StopRule(min_items=10, min_duration_s=0.5, max_duration_s=2.0)
    start = clock.now_ns()
    assert rules.source_timer_ns(start, None, 0, rule) == start + 2_000 * MS  # the warm-up cap
    clock.advance_ns(2_000 * MS)
    assert rules.warmup_expired(clock.now_ns() - start, rule)
    t0 = clock.now_ns()
    assert rules.source_timer_ns(start, t0, 9, rule) == t0 + 2_000 * MS
    assert rules.source_timer_ns(start, t0, 10, rule) == t0 + 500 * MS
    clock.advance_ns(499 * MS)
    assert not rules.source_stops(10, clock.now_ns() - t0, rule)  # enough items, not yet long enough
    clock.advance_ns(1 * MS)
    assert rules.source_stops(10, clock.now_ns() - t0, rule)
    assert not rules.source_stops(9, clock.now_ns() - t0, rule)  # long enough, too few items
    clock.advance_ns(1_500 * MS)
    assert rules.source_stops(0, clock.now_ns() - t0, rule)  # the cap
    with pytest.raises(ValueError):
        rules.pick_worker([])


def test_a_stuck_stage_ends_the_run_at_its_cap_plus_the_drain_on_the_fake_clock() -> None:
    """A stage taking 20 s (fake) against a 1 s cap and a 1 s drain: the source stops at exactly 1 s, the run
    ends at 2 s with the stage's items still in service (counted incomplete), never waiting for them."""
    clock = FakeClock(0)
    slow = lambda s, i, w: (2 if s == 0 else 20_000) * MS  # noqa: E731
    stages = [StageRuntime("a", "function", "threads", [Scripted(clock, slow, 0, 0)]),
              StageRuntime("stuck", "function", "threads", [Scripted(clock, slow, 1, 0)])]
    stop = StopRule(min_items=3, min_duration_s=0, max_duration_s=1, drain_timeout_s=1)
    tr, _ = run(stages, iter(range(100)), sizes=[4, 4], policies=["block"] * 2, stop=stop, concurrency=2,
                clock=clock)
    assert (tr.t0_ns, tr.t_end_ns, clock.now_ns()) == (0, 1_000 * MS, 2_000 * MS)
    assert tr.completed() == [] and tr.incomplete == 2
    assert [(r.start[1], r.end[1]) for r in tr.items] == [(2 * MS, -1), (-1, -1)]  # in service at the end


def test_a_thread_worker_times_its_call_on_its_clock() -> None:
    from inferperf.pipeline.workers import ThreadWorker

    clock = FakeClock(5 * MS)
    c = ThreadWorker(lambda x: clock.advance_ns(3 * MS) or x + 1, clock=clock).call(1)
    assert (c.item, c.start_ns, c.end_ns, c.error) == (2, 5 * MS, 8 * MS, None)
