"""The real executor: stages on worker threads (or process workers behind proxy threads), joined by bounded
``queue.Queue`` s, fed by a closed-loop or open-loop source; every hand-off timestamped into a :class:`Trace`.

- Closed loop (``concurrency`` N): N items in flight; a new one is sent when one finishes or fails.
- Open loop (a :mod:`~inferperf.measure.arrivals` schedule): items sent at their intended times; latency
  is measured from the intended time (no coordinated omission), the lateness of each send is recorded.
- A full queue follows its policy: ``block`` waits (back-pressure: the producer's blocked time), ``reject``
  fails the item at once (counted). Every wait polls a stop flag (50 ms), the run has a hard cap and the
  drain a deadline: nothing waits forever; items still in flight at the deadline are counted incomplete.
- A stage that raises fails that item (counted per stage by kind) and the pipeline goes on, or, with
  ``fail_fast``, the run stops and :class:`~inferperf.errors.RuntimeFailure` names the stage and item.
"""

from __future__ import annotations

import copy
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import RuntimeFailure
from .trace import ItemRecord, Trace

_POLL_S = 0.05
_now = time.perf_counter_ns


@dataclass
class StopRule:
    """Send until both ``min_items`` and ``min_duration_s`` are met, or ``max_duration_s`` passes (or the
    schedule ends); then wait up to ``drain_timeout_s`` for the items in flight."""

    min_items: int = 100
    min_duration_s: float = 5.0
    max_duration_s: float = 60.0
    drain_timeout_s: float = 60.0


@dataclass
class StageRuntime:
    """A stage as the engine drives it: name, kind (function/model), executor, its workers' ``call``s."""

    name: str
    kind: str
    executor: str
    workers: list[Any]


class _Run:
    """State of one run (fresh queues and threads; the workers and their sessions outlive it)."""

    def __init__(self, stages: list[StageRuntime], sizes: list[int | None], policies: list[str], *,
                 fail_fast: bool, capture: int, keep_outputs: int) -> None:
        self.stages, self.sizes, self.policies = stages, sizes, policies
        self.queues: list[queue.Queue] = [queue.Queue(maxsize=s or 0) for s in sizes]
        self.trace = Trace([s.name for s in stages], [len(s.workers) for s in stages], [s.executor for s in stages],
                           [s.kind for s in stages], list(sizes), list(policies))
        self.stop = threading.Event()  # stop sending, and (once drained or late) stop the workers
        self.halt = threading.Event()  # workers exit
        self.lock = threading.Lock()
        self.in_flight = 0
        self.drained = threading.Condition(self.lock)
        self.fail_fast, self.failure = fail_fast, None
        self.capture = capture
        self.captured: list[list[Any]] = [[] for _ in stages]
        self.keep_outputs = keep_outputs
        self.slots: threading.Semaphore | None = None
        self.waits: list[list[list[tuple[int, int]]]] = [[[] for _ in st.workers] for st in stages]  # get waits

    def starved(self) -> None:
        """Each worker's waiting for an item, clipped to the measurement window, into the trace."""
        t0, t1 = self.trace.t0_ns, self.trace.t_end_ns
        for s, per in enumerate(self.waits):
            for w, spans in enumerate(per):
                self.trace.starved_ns[s][w] = sum(max(0, min(b, t1) - max(a, t0)) for a, b in spans)

    # -- item lifecycle ---------------------------------------------------------------------------------
    def finish(self, rec: ItemRecord) -> None:
        with self.lock:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.drained.notify_all()
        if self.slots is not None:
            self.slots.release()

    def put(self, i: int, payload: Any, rec: ItemRecord) -> tuple[bool, int]:
        """Put into queue ``i`` under its policy; returns (accepted, time the put finished)."""
        q, ev = self.queues[i], self.trace.queue_events[i]
        if self.policies[i] == "reject":
            try:
                q.put_nowait((payload, rec))
            except queue.Full:
                rec.rejected = self.stages[i].name
                return False, _now()
            t = _now()
            ev.append((t, 1))
            return True, t
        while True:
            try:
                q.put((payload, rec), timeout=_POLL_S)
                t = _now()
                ev.append((t, 1))
                return True, t
            except queue.Full:
                if self.halt.is_set():
                    return False, _now()

    # -- threads ----------------------------------------------------------------------------------------
    def worker_loop(self, s: int, w: int) -> None:
        st, q = self.stages[s], self.queues[s]
        last = s == len(self.stages) - 1
        call = st.workers[w].call
        waits, blocked = self.waits[s][w], self.trace.blocked_ns[s]
        while not self.halt.is_set():
            t_wait = _now()
            try:
                payload, rec = q.get(timeout=_POLL_S)
            except queue.Empty:
                waits.append((t_wait, _now()))
                continue
            t_deq = _now()
            self.trace.queue_events[s].append((t_deq, -1))
            waits.append((t_wait, t_deq))
            if self.capture and len(self.captured[s]) < self.capture:
                self.captured[s].append(copy.deepcopy(payload))
            c = call(payload)
            t_ret = _now()
            rec.deq[s], rec.start[s], rec.end[s] = t_deq, c.start_ns, c.end_ns
            rec.cpu[s], rec.handover[s], rec.worker[s] = c.cpu_ns, c.handover_ns, w
            if c.error is not None:
                rec.error = (st.name, c.error.kind)
                rec.out[s] = t_ret
                if self.fail_fast and self.failure is None:
                    self.failure = f"stage {st.name!r} failed on item {rec.index}: {c.error} (--fail-fast)"
                    self.stop.set()
                self.finish(rec)
                continue
            if last:
                rec.out[s] = rec.done_ns = t_ret
                if len(self.trace.outputs) < self.keep_outputs:
                    self.trace.outputs.append(c.item)
                self.finish(rec)
                continue
            ok, t_put = self.put(s + 1, c.item, rec)
            rec.out[s] = t_put
            blocked[w] += t_put - t_ret
            if ok:
                rec.enq[s + 1] = t_put
            else:
                self.finish(rec)

    def send(self, index: int, payload: Any, intended_ns: int) -> None:
        rec = ItemRecord(index, intended_ns, len(self.stages))
        self.trace.items.append(rec)
        with self.lock:
            self.in_flight += 1
        ok, t = self.put(0, payload, rec)
        if ok:
            rec.enq[0] = t
        else:
            self.finish(rec)


def run(stages: list[StageRuntime], items: Iterator[Any], *, sizes: list[int | None], policies: list[str],
        stop: StopRule, concurrency: int | None = None, schedule: Any = None, fail_fast: bool = False,
        capture: int = 0, keep_outputs: int = 0, on_progress: Callable[[int], None] | None = None,
        ) -> tuple[Trace, list[list[Any]]]:
    """Run the pipeline once and return its :class:`Trace` and, when ``capture`` > 0, deep copies of the
    first ``capture`` inputs each stage received (to measure each stage alone afterwards).

    Args:
        stages: the chain, with live workers.
        items: source payloads (cycled by the caller; a finite iterator ends the run when it ends).
        sizes, policies: each stage's input queue (None: unbounded; ``block`` | ``reject``).
        stop: when to stop sending and how long to drain.
        concurrency: closed loop with this many items in flight; or ``schedule`` (open loop).
        fail_fast: stop at the first stage error and raise.
        keep_outputs: keep the last stage's first N returned items in ``Trace.outputs``.
        on_progress: called with the number sent so far, at most every ~0.2 s.

    Raises:
        RuntimeFailure: ``fail_fast`` and a stage raised.
    """
    r = _Run(stages, sizes, policies, fail_fast=fail_fast, capture=capture, keep_outputs=keep_outputs)
    tr = r.trace
    threads = [threading.Thread(target=r.worker_loop, args=(s, w), daemon=True, name=f"stage-{st.name}-{w}")
               for s, st in enumerate(stages) for w in range(len(st.workers))]
    for t in threads:
        t.start()
    if schedule is None:
        tr.mode, tr.concurrency = "closed", int(concurrency or 1)
        r.slots = threading.Semaphore(tr.concurrency)
    else:
        tr.mode, tr.schedule = "open", schedule.describe()
    t0 = tr.t0_ns = _now()
    sent, last_report = 0, t0
    for index in itertools.count():
        elapsed = _now() - t0
        if (sent >= stop.min_items and elapsed >= stop.min_duration_s * 1e9) or elapsed >= stop.max_duration_s * 1e9 \
                or r.stop.is_set():
            break
        if r.slots is not None:
            while not r.slots.acquire(timeout=_POLL_S):
                if r.stop.is_set() or _now() - t0 >= stop.max_duration_s * 1e9:
                    break
            else:
                payload = next(items, None)
                if payload is None:
                    break
                r.send(index, payload, _now())
                sent += 1
            if r.stop.is_set() or _now() - t0 >= stop.max_duration_s * 1e9:
                break
        else:
            off = schedule.next_offset_ns()
            if off is None:
                break
            due = t0 + off
            payload = next(items, None)  # made before the wait: the copy is not part of the send
            if payload is None:
                break
            while (lag := due - _now()) > 0 and not r.stop.is_set():
                time.sleep(min(lag / 1e9, _POLL_S))
            tr.send_lag_ns.append(max(0, _now() - due))
            r.send(index, payload, due)
            sent += 1
        if on_progress is not None and _now() - last_report > 200_000_000:
            on_progress(sent)
            last_report = _now()
    deadline = time.monotonic() + stop.drain_timeout_s
    with r.lock:
        while r.in_flight > 0 and time.monotonic() < deadline and not (r.fail_fast and r.failure):
            r.drained.wait(timeout=min(_POLL_S, max(0.0, deadline - time.monotonic())))
        tr.incomplete = r.in_flight
    r.halt.set()
    for t in threads:
        t.join(timeout=2.0)
    done = [x.done_ns for x in tr.items if x.done_ns >= 0]
    tr.t_end_ns = max(done) if done and not tr.incomplete else _now()
    r.starved()
    if r.failure:
        raise RuntimeFailure(r.failure)
    return tr, r.captured


def cycle(items: list[Any]) -> Iterator[Any]:
    """An endless iterator over ``items``, each yielded as a deep copy (stages may change items in place)."""
    for x in itertools.cycle(items):
        yield copy.deepcopy(x)


__all__ = ["StageRuntime", "StopRule", "cycle", "run"]
