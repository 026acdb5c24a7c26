"""The pipeline's semantics in virtual time: a discrete-event simulation that writes the same :class:`Trace`.

Same rules as :mod:`.engine`: FIFO queues of bounded size in front of every stage; a worker takes the oldest
item when idle; a finished item goes into the next queue if it has room, else (``block``) the worker holds
it until there is room (blocked time) or (``reject``) the item fails; closed loop keeps ``concurrency`` items
in flight (a new one is sent when one finishes or fails), open loop sends at a schedule's offsets. Service
times come from a function ``service(stage, item, worker) -> ns`` (fixed, seeded random, or replayed from a
measured run), so the analysis can be checked exactly (tests) and a change can be tried before it is made
(a stage twice as fast, other queue sizes, more workers). Nothing here sleeps or reads a clock.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from .trace import ItemRecord, Trace

ServiceFn = Callable[[int, int, int], int]


def fixed(service_ns: list[int]) -> ServiceFn:
    """Each stage ``s`` takes exactly ``service_ns[s]`` on every item."""
    return lambda s, i, w: int(service_ns[s])


def simulate(names: list[str], workers: list[int], service: ServiceFn, *, sizes: list[int | None],
             policies: list[str] | None = None, items: int = 1000, concurrency: int | None = None,
             schedule: Any = None, kinds: list[str] | None = None) -> Trace:
    """Run ``items`` items through the chain in virtual time (ns from 0) and return the trace.

    Args:
        names, workers: the stages and their worker counts.
        service: ``(stage, item, worker) -> service ns`` (> 0).
        sizes / policies: each stage's input queue (None: unbounded; ``block`` | ``reject``).
        items: items to send.
        concurrency: closed loop with this many in flight; or ``schedule`` (open loop,
            :mod:`~inferperf.measure.arrivals`).
        kinds: per stage ``function`` | ``model`` (recorded only).

    CPU time is recorded equal to the service time (a CPU-bound stage).
    """
    n = len(names)
    pol = policies or ["block"] * n
    tr = Trace(list(names), list(workers), ["threads"] * n, kinds or ["function"] * n, list(sizes), pol)
    tr.mode = "open" if schedule is not None else "closed"
    tr.concurrency = None if schedule is not None else int(concurrency or 1)
    tr.schedule = schedule.describe() if schedule is not None else None
    seq = itertools.count()
    heap: list[tuple[int, int, str, Any]] = []
    queues: list[deque[ItemRecord]] = [deque() for _ in range(n)]
    idle: list[list[int]] = [list(range(w)) for w in workers]  # idle worker ids per stage
    idle_since = [[0] * w for w in workers]
    waiting: list[deque[tuple[str, Any, ItemRecord, int]]] = [deque() for _ in range(n)]  # blocked producers
    state = {"sent": 0, "in_flight": 0, "now": 0}

    def push(t: int, kind: str, data: Any) -> None:
        """Schedule an event at virtual time ``t``."""
        heapq.heappush(heap, (t, next(seq), kind, data))

    def room(s: int) -> bool:
        """Whether queue ``s`` can take one more item."""
        return sizes[s] is None or len(queues[s]) < sizes[s]

    def enqueue(s: int, rec: ItemRecord, t: int) -> None:
        """Put ``rec`` into queue ``s`` at ``t`` and start idle workers."""
        queues[s].append(rec)
        rec.enq[s] = t
        tr.queue_events[s].append((t, 1))
        dispatch(s, t)

    def finish(rec: ItemRecord, t: int) -> None:
        """An item left the pipeline (done, failed or rejected): closed loop sends the next."""
        state["in_flight"] -= 1
        if tr.mode == "closed":
            try_send(t)

    def offer(s: int, rec: ItemRecord, t: int, producer: tuple[str, Any]) -> bool:
        """Hand ``rec`` to queue ``s``; False when the producer must wait (block) - the caller then holds it."""
        if room(s):
            enqueue(s, rec, t)
            return True
        if pol[s] == "reject" and not (s == 0 and tr.mode == "closed"):  # a closed-loop source waits (as the engine)
            rec.rejected = names[s]
            finish(rec, t)
            return True
        waiting[s].append((producer[0], producer[1], rec, t))
        return False

    def dispatch(s: int, t: int) -> None:
        """Idle workers of stage ``s`` take items from its queue and start serving them."""
        while idle[s] and queues[s]:
            w = idle[s].pop(0)
            rec = queues[s].popleft()
            tr.queue_events[s].append((t, -1))
            tr.starved_ns[s][w] += t - idle_since[s][w]
            rec.deq[s] = rec.start[s] = t
            rec.worker[s] = w
            d = int(service(s, rec.index, w))
            rec.end[s] = t + d
            rec.cpu[s], rec.handover[s] = d, 0
            push(t + d, "done", (s, w, rec))
            release(s, t)

    def release(s: int, t: int) -> None:
        """Queue ``s`` has room again: the first blocked producer puts its item."""
        while waiting[s] and room(s):
            kind, who, rec, since = waiting[s].popleft()
            enqueue(s, rec, t)
            if kind == "worker":
                ps, w = who
                rec.out[ps] = t
                tr.blocked_ns[ps][w] += t - since
                free(ps, w, t)
            else:
                if tr.mode == "open":
                    tr.send_lag_ns.append(t - since)
                try_send(t)

    def free(s: int, w: int, t: int) -> None:
        """Worker ``w`` of stage ``s`` is idle again at ``t``: it takes the next item if there is one."""
        idle[s].append(w)
        idle[s].sort()
        idle_since[s][w] = t
        dispatch(s, t)

    def try_send(t: int) -> None:
        """Closed loop: send while fewer than ``concurrency`` items are in flight (unless the source is blocked)."""
        if waiting[0] and any(k == "source" for k, *_ in waiting[0]):
            return
        while state["sent"] < items and state["in_flight"] < (tr.concurrency or 0):
            send(t, t)
            if waiting[0]:
                return

    def send(t: int, intended: int) -> None:
        """Create item ``sent`` (intended at ``intended``) and offer it to the first queue."""
        rec = ItemRecord(state["sent"], intended, n)
        tr.items.append(rec)
        state["sent"] += 1
        state["in_flight"] += 1
        offer(0, rec, t, ("source", None))

    if tr.mode == "closed":
        try_send(0)
    else:
        for _ in range(items):
            off = schedule.next_offset_ns()
            if off is None:
                break
            push(int(off), "arrive", None)
    while heap:
        t, _, kind, data = heapq.heappop(heap)
        state["now"] = t
        if kind == "arrive":
            send(t, t)
            continue
        s, w, rec = data
        if s == n - 1:
            rec.out[s] = rec.done_ns = t
            finish(rec, t)
            free(s, w, t)
        elif offer(s + 1, rec, t, ("worker", (s, w))):
            if rec.rejected is None:
                rec.out[s] = t
            free(s, w, t)
    tr.t0_ns = 0
    tr.t_end_ns = max((r.done_ns for r in tr.items if r.done_ns >= 0), default=state["now"])
    for s in range(n):
        for w in idle[s]:
            tr.starved_ns[s][w] += max(0, tr.t_end_ns - idle_since[s][w])
    return tr


def replay(trace: Trace) -> ServiceFn:
    """Service times drawn in turn from a measured trace's own (per stage, cycled): for what-if runs."""
    per = [[r.end[s] - r.start[s] for r in trace.items if r.start[s] >= 0] or [1] for s in range(len(trace.stages))]
    counters = [itertools.count() for _ in per]
    return lambda s, i, w: per[s][next(counters[s]) % len(per[s])]


__all__ = ["ServiceFn", "fixed", "replay", "simulate"]
