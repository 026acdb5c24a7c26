"""The pipeline's semantics in virtual time: a discrete-event simulation that writes the same :class:`Trace`.

It drives the engine's own state machine (:class:`~.chain.Chain`, rules from :mod:`inferperf.policy.pipeline`):
FIFO queues of bounded size in front of every stage; the lowest-numbered idle worker takes the oldest item; a
finished item goes into the next queue if it has room, else (``block``) the worker holds it until there is
room (blocked time) or (``reject``) the item fails; closed loop keeps ``concurrency`` items in flight (a new
one is sent when one finishes or fails), open loop sends at a schedule's offsets. Service times come from a
function ``service(stage, item, worker) -> ns`` (fixed, seeded random, or replayed from a measured run), so
the analysis can be checked exactly (tests) and a change can be tried before it is made (a stage twice as
fast, other queue sizes, more workers). Nothing here sleeps or reads a clock. Events at one time run
arrivals first, then the calls ending then in the order they started (the engine on a fake clock orders
them the same way). Unlike the engine, whose window closes when the source stops, the simulated window
runs from 0 to the last completion (no drain deadline: every item finishes).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

from ..policy.pipeline import StopRule
from .chain import Chain
from .trace import ItemRecord, Trace
from .workers import Call

ServiceFn = Callable[[int, int, int], int]

_ARRIVAL, _DONE = 0, 1  # event kinds, in the order they run at one time


def fixed(service_ns: list[int]) -> ServiceFn:
    """Each stage ``s`` takes exactly ``service_ns[s]`` on every item."""
    return lambda s, i, w: int(service_ns[s])


class _Events:
    """The virtual-time event heap: ``(t, kind, seq, data)``; ``serve`` schedules a call's end."""

    def __init__(self, service: ServiceFn) -> None:
        self.heap: list[tuple[int, int, int, Any]] = []
        self.seq = itertools.count()
        self.service = service
        self.now = 0

    def push(self, t: int, kind: int, data: Any) -> None:
        heapq.heappush(self.heap, (t, kind, next(self.seq), data))

    def serve(self, s: int, w: int, rec: ItemRecord, payload: Any, t: int) -> None:
        """Start worker ``w`` of stage ``s`` on ``rec``: it ends ``service(s, index, w)`` ns later."""
        d = int(self.service(s, rec.index, w))
        self.push(t + d, _DONE, (s, w, rec, Call(payload, t, t + d, d)))


def _trace(names: list[str], workers: list[int], sizes: list[int | None], policies: list[str] | None,
           concurrency: int | None, schedule: Any, kinds: list[str] | None) -> Trace:
    """An empty trace of the chain, its source described."""
    n = len(names)
    tr = Trace(list(names), list(workers), ["threads"] * n, kinds or ["function"] * n, list(sizes),
               list(policies or ["block"] * n))
    tr.mode = "open" if schedule is not None else "closed"
    tr.concurrency = None if schedule is not None else int(concurrency or 1)
    tr.schedule = schedule.describe() if schedule is not None else None
    return tr


def _run_events(chain: Chain, ev: _Events, schedule: Any, payloads: Any) -> None:
    """Start the source, then run events in time order until none is left."""
    if schedule is None:
        chain.refill(0)
    elif (off := schedule.next_offset_ns()) is not None:
        ev.push(int(off), _ARRIVAL, None)
    while ev.heap:
        t, kind, _, data = heapq.heappop(ev.heap)
        ev.now = t
        if kind == _ARRIVAL:
            if chain.send(t, t, next(payloads)) and (off := schedule.next_offset_ns()) is not None:
                ev.push(int(off), _ARRIVAL, None)
            continue
        s, w, rec, call = data
        chain.completed(s, w, rec, call, t)


def simulate(names: list[str], workers: list[int], service: ServiceFn, *, sizes: list[int | None],
             policies: list[str] | None = None, items: int = 1000, concurrency: int | None = None,
             schedule: Any = None, kinds: list[str] | None = None) -> Trace:
    """Run ``items`` items through the chain in virtual time (ns from 0) and return the trace.

    Args:
        names, workers: the stages and their worker counts.
        service: ``(stage, item, worker) -> service ns`` (> 0).
        sizes / policies: each stage's input queue (None: unbounded; ``block`` | ``reject``).
        items: items to send (the source's stop rule: ``min_items``, no duration).
        concurrency: closed loop with this many in flight; or ``schedule`` (open loop,
            :mod:`~inferperf.policy.arrivals`).
        kinds: per stage ``function`` | ``model`` (recorded only).

    CPU time is recorded equal to the service time (a CPU-bound stage); each item's payload is its index.
    """
    tr = _trace(names, workers, sizes, policies, concurrency, schedule, kinds)
    ev = _Events(service)
    payloads = itertools.count()
    inf = float("inf")
    chain = Chain(tr, ev.serve, StopRule(min_items=items, min_duration_s=0.0, max_duration_s=inf, drain_timeout_s=inf),
                  concurrency=tr.concurrency, next_payload=lambda: next(payloads))
    _run_events(chain, ev, schedule, payloads)
    tr.t0_ns = 0
    tr.t_end_ns = max((r.done_ns for r in tr.items if r.done_ns >= 0), default=ev.now)
    chain.close_window(0, tr.t_end_ns)
    return tr


def replay(trace: Trace) -> ServiceFn:
    """Service times drawn in turn from a measured trace's own (per stage, cycled): for what-if runs."""
    per = [[r.end[s] - r.start[s] for r in trace.items if r.start[s] >= 0] or [1] for s in range(len(trace.stages))]
    counters = [itertools.count() for _ in per]
    return lambda s, i, w: per[s][next(counters[s]) % len(per[s])]


__all__ = ["ServiceFn", "fixed", "replay", "simulate"]
