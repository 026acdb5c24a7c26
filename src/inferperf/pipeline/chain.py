"""The pipeline's state machine: queues, idle and blocked workers, the source, all written into a :class:`Trace`.

One copy of the pipeline's semantics, driven by both executors: the real one (:mod:`.engine`: each
finished call reported at the clock's time) and the simulator (:mod:`.simulate`: a heap of
virtual-time events). Every decision of policy is a pure function of :mod:`inferperf.policy.pipeline`;
this class only keeps the state they read and records what happens. It never reads a clock: each event
comes with its time (ns). Not thread-safe: the driver makes one call at a time (the engine: under one lock).

Events: :meth:`refill` (closed loop: send up to ``concurrency``), :meth:`send` (open loop: an arrival),
:meth:`completed` (a worker's call returned), :meth:`poll_source` (the stop rule's timer). The driver
supplies ``serve(stage, worker, record, payload, t_ns)`` (start the call; its completion comes back
through :meth:`completed`) and, for the closed loop, ``next_payload()`` (None: the source is exhausted).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from typing import Any

from ..policy import pipeline as rules
from ..policy.pipeline import StopRule
from .trace import ItemRecord, Trace

Serve = Callable[[int, int, ItemRecord, Any, int], None]


class Chain:
    """The state of one run over ``trace``'s stages (see the module docstring).

    Args:
        trace: the :class:`Trace` to fill (stages, workers, queue sizes and policies set).
        serve: ``(stage, worker, record, payload, t_ns)``: start that worker's call.
        stop: when the source stops sending (counts measured items, durations from the window's opening).
        start_ns: the run's start (the warm-up cap counts from it).
        concurrency: closed loop with this many items in flight; None: open loop (:meth:`send`).
        warmup: the first ``warmup`` items are not measured; the window opens at the first measured send.
        next_payload: closed loop: the next source item, None when there is none.
        fail_fast: the first stage error stops the source (``failure`` says which).
        keep_outputs: keep the last stage's items of the first N measured items in ``trace.outputs``.
        on_open / on_stop: called with the time when the window opens / the source stops.
    """

    def __init__(self, trace: Trace, serve: Serve, stop: StopRule, *, start_ns: int = 0,
                 concurrency: int | None = None, warmup: int = 0, next_payload: Callable[[], Any] | None = None,
                 fail_fast: bool = False, keep_outputs: int = 0, on_open: Callable[[int], None] | None = None,
                 on_stop: Callable[[int], None] | None = None) -> None:
        self.tr, self._serve, self.stop = trace, serve, stop
        self.start_ns, self.concurrency, self.warmup = start_ns, concurrency, warmup
        self._next_payload = next_payload or (lambda: None)
        self.fail_fast, self.keep_outputs = fail_fast, keep_outputs
        self._on_open, self._on_stop = on_open, on_stop
        n = len(trace.stages)
        self.queues: list[deque[tuple[ItemRecord, Any]]] = [deque() for _ in range(n)]
        self.idle: list[list[int]] = [list(range(w)) for w in trace.workers]  # sorted idle worker ids per stage
        self.idle_since: list[list[int]] = [[start_ns] * w for w in trace.workers]
        self.waiting: list[deque[tuple[tuple[int, int] | None, ItemRecord, Any, int]]] = [deque() for _ in range(n)]
        self.starved: list[list[list[tuple[int, int]]]] = [[[] for _ in range(w)] for w in trace.workers]
        self.blocked: list[list[list[tuple[int, int]]]] = [[[] for _ in range(w)] for w in trace.workers]
        self.in_flight = self.index = self.sent = 0
        self.t0_ns: int | None = None
        self.t_stop_ns: int | None = None
        self.failure: str | None = None

    @property
    def closed(self) -> bool:
        """Closed loop (``concurrency`` set)."""
        return self.concurrency is not None

    @property
    def stopped(self) -> bool:
        """The source has stopped sending."""
        return self.t_stop_ns is not None

    # -- the source -------------------------------------------------------------------------------------
    def stop_source(self, t: int) -> None:
        """The source sends no more (stop rule met, schedule or items ended, or a fail-fast error)."""
        if self.t_stop_ns is None:
            self.t_stop_ns = t
            if self._on_stop is not None:
                self._on_stop(t)

    def _open(self, t: int) -> None:
        if self.t0_ns is None:
            self.t0_ns = t
            if self._on_open is not None:
                self._on_open(t)

    def poll_source(self, t: int) -> bool:
        """Apply the stop rule at ``t`` (and open the window if the warm-up took ``max_duration_s``);
        True while the source may send."""
        if self.stopped:
            return False
        if self.t0_ns is None and rules.warmup_expired(t - self.start_ns, self.stop):
            self._open(t)
        if self.t0_ns is not None and rules.source_stops(self.sent, t - self.t0_ns, self.stop):
            self.stop_source(t)
        return not self.stopped

    def timer_ns(self) -> float:
        """When time alone can next change the source (``inf`` once it has stopped)."""
        if self.stopped:
            return float("inf")
        return rules.source_timer_ns(self.start_ns, self.t0_ns, self.sent, self.stop)

    def send(self, t: int, intended_ns: int, payload: Any) -> bool:
        """Send one item intended at ``intended_ns`` (open loop: its due time) into the first queue at ``t``;
        False (nothing sent) once the stop rule holds."""
        if not self.poll_source(t):
            return False
        measured = self.index >= self.warmup
        if measured:
            self._open(intended_ns)
        rec = ItemRecord(self.index, intended_ns, len(self.tr.stages), measured=measured)
        self.tr.items.append(rec)
        self.index += 1
        self.sent += measured
        self.in_flight += 1
        self._offer(0, rec, payload, t, None)
        self.poll_source(t)  # the source stops the moment the rule holds (e.g. the last item needed was sent)
        return True

    def refill(self, t: int) -> None:
        """Closed loop: send while :func:`~inferperf.policy.pipeline.closed_loop_may_send` allows."""
        while self.closed and rules.closed_loop_may_send(self.in_flight, self.concurrency or 0, bool(self.waiting[0])):
            if not self.poll_source(t):
                return
            payload = self._next_payload()
            if payload is None:
                self.stop_source(t)
                return
            self.send(t, t, payload)

    # -- queues and workers -----------------------------------------------------------------------------
    def _finish(self, rec: ItemRecord, t: int) -> None:
        """An item left the pipeline (done, failed or refused): one fewer in flight; a closed loop sends the next."""
        self.in_flight -= 1
        self.refill(t)

    def _offer(self, s: int, rec: ItemRecord, payload: Any, t: int, producer: tuple[int, int] | None) -> bool:
        """Hand ``rec`` to queue ``s``; False when its producer (a worker ``(stage, id)``, or None: the source)
        must wait for room, holding the item."""
        if rules.has_room(self.tr.queue_sizes[s], len(self.queues[s])):
            self._enqueue(s, rec, payload, t)
            return True
        if rules.when_full(self.tr.policies[s], s, self.closed) == "reject":
            rec.rejected = self.tr.stages[s]
            self._sent_at(rec, s, t)
            self._finish(rec, t)
            return True
        self.waiting[s].append((producer, rec, payload, t))
        return False

    def _sent_at(self, rec: ItemRecord, s: int, t: int) -> None:
        """Open loop: a measured item left the source at ``t`` (queued or refused at the first queue): its lag."""
        if s == 0 and not self.closed and rec.measured:
            self.tr.send_lag_ns.append(max(0, t - rec.intended_ns))

    def _enqueue(self, s: int, rec: ItemRecord, payload: Any, t: int) -> None:
        self.queues[s].append((rec, payload))
        rec.enq[s] = t
        self.tr.queue_events[s].append((t, 1))
        self._sent_at(rec, s, t)
        self._dispatch(s, t)

    def _dispatch(self, s: int, t: int) -> None:
        """Idle workers of stage ``s`` take the oldest items (lowest worker id first) and start serving them."""
        while self.idle[s] and self.queues[s]:
            w = rules.pick_worker(self.idle[s])
            self.idle[s].remove(w)
            rec, payload = self.queues[s].popleft()
            self.tr.queue_events[s].append((t, -1))
            self.starved[s][w].append((self.idle_since[s][w], t))
            rec.deq[s] = rec.start[s] = t  # in service from now (a stage that never returns stays busy)
            rec.worker[s] = w
            self._serve(s, w, rec, payload, t)
            self._release(s, t)

    def _release(self, s: int, t: int) -> None:
        """Queue ``s`` has room again: blocked producers put their items, first blocked first."""
        while self.waiting[s] and rules.has_room(self.tr.queue_sizes[s], len(self.queues[s])):
            producer, rec, payload, since = self.waiting[s].popleft()
            self._enqueue(s, rec, payload, t)
            if producer is not None:
                ps, w = producer
                rec.out[ps] = t
                self.blocked[ps][w].append((since, t))
                self._free(ps, w, t)
            else:
                self.refill(t)

    def _free(self, s: int, w: int, t: int) -> None:
        """Worker ``w`` of stage ``s`` is idle again at ``t``: it takes the next item if there is one."""
        bisect.insort(self.idle[s], w)
        self.idle_since[s][w] = t
        self._dispatch(s, t)

    def completed(self, s: int, w: int, rec: ItemRecord, call: Any, t: int, taken_ns: int | None = None) -> None:
        """Worker ``w`` of stage ``s`` returned ``call`` (a :class:`~.workers.Call`) on ``rec`` at ``t``: record
        it, then finish the item (last stage, or an error) or offer it to the next queue. ``taken_ns``: when
        the worker's thread got the item (the engine; the hand-over to it counts as queue wait), else the
        dispatch time stands."""
        if taken_ns is not None:
            rec.deq[s] = taken_ns
        rec.start[s], rec.end[s], rec.worker[s] = call.start_ns, call.end_ns, w
        rec.cpu[s], rec.handover[s] = call.cpu_ns, call.handover_ns
        name = self.tr.stages[s]
        if call.error is not None:
            rec.error, rec.out[s] = (name, call.error.kind), t
            self.tr.first_errors.setdefault(name, str(call.error))
            if self.fail_fast and self.failure is None:
                self.failure = f"stage {name!r} failed on item {rec.index}: {call.error} (--fail-fast)"
                self.stop_source(t)
        elif s == len(self.tr.stages) - 1:
            rec.out[s] = rec.done_ns = t
            if rec.measured and len(self.tr.outputs) < self.keep_outputs:
                self.tr.outputs.append(call.item)
        else:
            if self._offer(s + 1, rec, call.item, t, (s, w)):
                if rec.rejected is None:
                    rec.out[s] = t
                self._free(s, w, t)
            return
        self._finish(rec, t)
        self._free(s, w, t)

    # -- the end ----------------------------------------------------------------------------------------
    def close_window(self, t0: int, t_end: int) -> None:
        """Each worker's starved and blocked time, clipped to the window ``[t0, t_end]`` (open spans end there)."""
        for s, ids in enumerate(self.idle):
            for w in ids:
                self.starved[s][w].append((self.idle_since[s][w], t_end))
        for queue in self.waiting:
            for producer, _, _, since in queue:
                if producer is not None:
                    self.blocked[producer[0]][producer[1]].append((since, t_end))
        for into, spans_of in ((self.tr.starved_ns, self.starved), (self.tr.blocked_ns, self.blocked)):
            for s, per in enumerate(spans_of):
                for w, spans in enumerate(per):
                    into[s][w] = sum(max(0, min(b, t_end) - max(a, t0)) for a, b in spans)

    def incomplete(self) -> int:
        """Measured items neither finished, failed nor refused."""
        return sum(1 for x in self.tr.items if x.measured and x.done_ns < 0 and x.error is None and x.rejected is None)


__all__ = ["Chain", "Serve"]
