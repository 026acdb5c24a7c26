"""The real executor: stages on worker threads (or process workers behind proxy threads), joined by bounded
``queue.Queue`` s, fed by a closed-loop or open-loop source; every hand-off timestamped into a :class:`Trace`.

- Closed loop (``concurrency`` N): N items in flight; a new one is sent when one finishes or fails.
- Open loop (a :mod:`~inferperf.measure.arrivals` schedule): items sent at their intended times; latency
  is measured from the intended time (no coordinated omission), the lateness of each send is recorded.
- A full queue follows its policy: ``block`` waits (back-pressure: the producer's blocked time), ``reject``
  fails the item at once (counted). In a closed loop the first queue always blocks: a closed-loop client
  waits for room rather than retrying in a hot loop. Every wait polls a stop flag (50 ms), the run has a hard cap and the
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

from ..errors import RuntimeFailure, UsageError
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
        self.capture_errors: dict[str, str] = {}
        self.waits: list[list[list[tuple[int, int]]]] = [[[] for _ in st.workers] for st in stages]  # get waits
        self.blocks: list[list[list[tuple[int, int]]]] = [[[] for _ in st.workers] for st in stages]  # put waits

    def starved(self) -> None:
        """Each worker's waiting for an item (starved) and to hand one on (blocked), clipped to the window."""
        t0, t1 = self.trace.t0_ns, self.trace.t_end_ns
        for into, spans_of in ((self.trace.starved_ns, self.waits), (self.trace.blocked_ns, self.blocks)):
            for s, per in enumerate(spans_of):
                for w, spans in enumerate(per):
                    into[s][w] = sum(max(0, min(b, t1) - max(a, t0)) for a, b in spans)

    # -- item lifecycle ---------------------------------------------------------------------------------
    def finish(self, rec: ItemRecord) -> None:
        """An item left the pipeline (done, failed or refused): one fewer in flight, a closed-loop slot freed."""
        with self.lock:
            self.in_flight -= 1
            if self.in_flight == 0:
                self.drained.notify_all()
        if self.slots is not None:
            self.slots.release()

    def put(self, i: int, payload: Any, rec: ItemRecord) -> tuple[bool, int]:
        """Put into queue ``i`` under its policy; returns (accepted, time the put finished)."""
        q, ev = self.queues[i], self.trace.queue_events[i]
        if self.policies[i] == "reject" and not (i == 0 and self.slots is not None):  # a closed-loop source waits
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
        """Worker ``w`` of stage ``s``: take, run, hand on; every wait polls the halt flag."""
        st, q = self.stages[s], self.queues[s]
        last = s == len(self.stages) - 1
        call = st.workers[w].call
        waits, blocks = self.waits[s][w], self.blocks[s][w]
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
            if self.capture and not rec.measured and len(self.captured[s]) < self.capture:
                try:
                    self.captured[s].append(copy.deepcopy(payload))
                except Exception as e:  # noqa: BLE001 - an item that cannot be copied: no standalone run
                    self.capture_errors.setdefault(st.name, f"{type(e).__name__}: {e}")
            rec.deq[s] = rec.start[s] = t_deq  # in service from now (a stage that never returns stays busy)
            rec.worker[s] = w
            c = call(payload)
            t_ret = _now()
            rec.deq[s], rec.start[s], rec.end[s] = t_deq, c.start_ns, c.end_ns
            rec.cpu[s], rec.handover[s], rec.worker[s] = c.cpu_ns, c.handover_ns, w
            if c.error is not None:
                rec.error = (st.name, c.error.kind)
                self.trace.first_errors.setdefault(st.name, str(c.error))
                rec.out[s] = t_ret
                if self.fail_fast and self.failure is None:
                    self.failure = f"stage {st.name!r} failed on item {rec.index}: {c.error} (--fail-fast)"
                    self.stop.set()
                self.finish(rec)
                continue
            if last:
                rec.out[s] = rec.done_ns = t_ret
                if rec.measured and len(self.trace.outputs) < self.keep_outputs:
                    self.trace.outputs.append(c.item)
                self.finish(rec)
                continue
            ok, t_put = self.put(s + 1, c.item, rec)
            rec.out[s] = t_put
            blocks.append((t_ret, t_put))
            if ok:
                rec.enq[s + 1] = t_put
            else:
                self.finish(rec)

    def send(self, index: int, payload: Any, intended_ns: int, measured: bool) -> None:
        """Record a new item and put it into the first queue (under its policy)."""
        rec = ItemRecord(index, intended_ns, len(self.stages), measured=measured)
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
        warmup: int = 0, cpu_probe: Callable[[], float] | None = None) -> tuple[Trace, list[list[Any]]]:
    """Run the pipeline once and return its :class:`Trace` and, when ``capture`` > 0, deep copies of the
    first ``capture`` inputs each stage received from warm-up items (to measure each stage alone afterwards).

    ``cpu_probe`` (CPU seconds so far) is read when the window opens and closes: ``Trace.cpu_s``.
    The first ``warmup`` items fill the pipeline; the window opens at the next send, so it starts in a
    steady state (no empty-pipeline transient), and closes when the source stops; the items in flight
    then drain (their latency counts; completions after the window do not count for throughput).

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
    cpu0 = cpu_probe() if cpu_probe and warmup <= 0 else None
    start = _now()
    t0 = start if warmup <= 0 else None
    tr.t0_ns = start
    sent = 0
    last_report = start
    cap_ns = stop.max_duration_s * 1e9
    for index in itertools.count():
        now = _now()
        if t0 is None and now - start >= cap_ns:  # the warm-up never finished: open the window anyway
            t0 = tr.t0_ns = now
            cpu0 = cpu_probe() if cpu_probe else None
        if t0 is not None:
            elapsed = now - t0
            if (sent >= stop.min_items and elapsed >= stop.min_duration_s * 1e9) or elapsed >= cap_ns:
                break
        if r.stop.is_set():
            break
        measured = index >= warmup
        if r.slots is not None:
            got = False
            while not (got := r.slots.acquire(timeout=_POLL_S)):
                if r.stop.is_set() or (t0 is not None and _now() - t0 >= cap_ns) or _now() - start >= 2 * cap_ns:
                    break
            if not got:
                break
            payload = next(items, None)
            if payload is None:
                break
            if measured and t0 is None:
                t0 = tr.t0_ns = _now()
                cpu0 = cpu_probe() if cpu_probe else None
            r.send(index, payload, _now(), measured)
        else:
            off = schedule.next_offset_ns()
            if off is None:
                break
            due = start + off
            payload = next(items, None)  # made before the wait: the copy is not part of the send
            if payload is None:
                break
            while (lag := due - _now()) > 0 and not r.stop.is_set():
                time.sleep(min(lag / 1e9, _POLL_S))
            if measured and t0 is None:
                t0 = tr.t0_ns = due
                cpu0 = cpu_probe() if cpu_probe else None
            if measured:
                tr.send_lag_ns.append(max(0, _now() - due))
            r.send(index, payload, due, measured)
        sent += 1 if measured else 0
        if on_progress is not None and _now() - last_report > 200_000_000:
            on_progress(sent)
            last_report = _now()
    t_stop = _now()
    if cpu0 is not None and cpu_probe is not None:
        tr.cpu_s = cpu_probe() - cpu0
    if t0 is None:
        tr.t0_ns = t_stop
    deadline = time.monotonic() + stop.drain_timeout_s
    with r.lock:
        while r.in_flight > 0 and time.monotonic() < deadline and not (r.fail_fast and r.failure):
            r.drained.wait(timeout=min(_POLL_S, max(0.0, deadline - time.monotonic())))
        tr.incomplete = sum(1 for x in tr.items if x.measured and x.done_ns < 0 and x.error is None
                            and x.rejected is None)
    r.halt.set()
    for t in threads:
        t.join(timeout=2.0)
    tr.t_end_ns = max(t_stop, tr.t0_ns + 1)
    r.starved()
    tr.capture_errors = dict(r.capture_errors)
    if r.failure:
        raise RuntimeFailure(r.failure)
    return tr, r.captured


def cycle(items: list[Any]) -> Iterator[Any]:
    """An endless iterator over ``items``, each yielded as a deep copy (stages may change items in place).

    Raises:
        UsageError: an item that cannot be deep-copied (the source must yield plain data).
    """
    for x in itertools.cycle(items):
        try:
            yield copy.deepcopy(x)
        except Exception as e:  # noqa: BLE001 - the user's item
            raise UsageError(f"a source item ({type(x).__name__}) cannot be copied ({type(e).__name__}: {e}):"
                             f" the source must yield plain data (bytes, arrays, dicts, lists)") from None


__all__ = ["StageRuntime", "StopRule", "cycle", "run"]
