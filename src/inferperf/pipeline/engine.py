"""The real executor: stages on worker threads (or process workers behind proxy threads), fed by a closed-loop
or open-loop source, the queues and the source's rules applied by one state machine on a clock.

The run drives the same state machine as the simulator (:class:`~.chain.Chain`, rules from
:mod:`inferperf.policy.pipeline`): an item goes to an idle worker's inbox, the worker thread runs its call
and reports it; on the real clock the worker applies its report to the chain itself, under one lock (its
next item then follows at once), and the calling thread handles the source's timers and the drain. Every
hand-off is timestamped on the clock into a :class:`Trace`.

- Closed loop (``concurrency`` N): N items in flight; a new one is sent when one finishes or fails.
- Open loop (a :mod:`~inferperf.policy.arrivals` schedule): items sent at their intended times; latency
  is measured from the intended time (no coordinated omission), the lateness of each send is recorded.
- A full queue follows its policy: ``block`` holds the producer (back-pressure: a worker's blocked time),
  ``reject`` fails the item at once (counted). In a closed loop the first queue always blocks. The run has a
  hard cap and the drain a deadline: nothing waits forever; items still in flight then are counted incomplete.
- A stage that raises fails that item (counted per stage by kind) and the pipeline goes on, or, with
  ``fail_fast``, the run stops and :class:`~inferperf.errors.RuntimeFailure` names the stage and item.

On a fake clock (``clock.is_fake``) time moves only when every busy worker has answered: to the earliest of
their calls' end times and the next timer, so workers that script their service times (``Call.end_ns``)
make the run exact and equal to :func:`~.simulate.simulate` item for item.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import RuntimeFailure, UsageError
from ..policy.pipeline import StopRule
from .chain import Chain
from .trace import ItemRecord, Trace

_POLL_S = 0.05
_PROGRESS_NS = 200_000_000
_FAKE_ANSWER_S = 60.0  # on a fake clock: how long (real s) a busy worker may take to answer


@dataclass
class StageRuntime:
    """A stage as the engine drives it: name, kind (function/model), executor, its workers' ``call``s."""

    name: str
    kind: str
    executor: str
    workers: list[Any]


class _Workers:
    """The worker threads of one run: an inbox per worker, one report queue back to the coordinator."""

    def __init__(self, stages: list[StageRuntime], capture: int, clock: Clock) -> None:
        self.stages, self.capture, self.now = stages, capture, clock.now_ns
        self.inbox = [[queue.SimpleQueue() for _ in st.workers] for st in stages]
        self.reports: queue.SimpleQueue = queue.SimpleQueue()
        self.halt = threading.Event()
        self.captured: list[list[Any]] = [[] for _ in stages]
        self.capture_errors: dict[str, str] = {}
        self.busy = 0
        self._seq = itertools.count()
        self.on_done: Callable[[tuple], None] = self.reports.put  # a report: (seq, stage, worker, rec, taken, call)
        self.threads = [threading.Thread(target=self._loop, args=(s, w), daemon=True, name=f"stage-{st.name}-{w}")
                        for s, st in enumerate(stages) for w in range(len(st.workers))]
        for t in self.threads:
            t.start()

    def serve(self, s: int, w: int, rec: ItemRecord, payload: Any, t: int) -> None:
        """Hand ``payload`` to worker ``w`` of stage ``s`` (idle: its inbox is empty)."""
        self.busy += 1
        self.inbox[s][w].put((next(self._seq), rec, payload))

    def _loop(self, s: int, w: int) -> None:
        """Worker ``w`` of stage ``s``: take from its inbox, run, report; every wait polls the halt flag."""
        st, inbox = self.stages[s], self.inbox[s][w]
        call = st.workers[w].call
        while not self.halt.is_set():
            try:
                seq, rec, payload = inbox.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            if self.capture and not rec.measured and len(self.captured[s]) < self.capture:
                try:
                    self.captured[s].append(copy.deepcopy(payload))
                except Exception as e:  # noqa: BLE001 - an item that cannot be copied: no standalone run
                    self.capture_errors.setdefault(st.name, f"{type(e).__name__}: {e}")
            taken = self.now()  # the thread has the item: from here on the call's own time
            self.on_done((seq, s, w, rec, taken, call(payload)))

    def stop(self) -> None:
        """Halt the threads (a worker stuck in a call is a daemon: it is left behind)."""
        self.halt.set()
        for t in self.threads:
            t.join(timeout=2.0)


class _Coordinator:
    """The event loop of one run: source timers, workers' reports, the drain; on the real or a fake clock.

    On the real clock a worker applies its own report to the chain under one lock as soon as its call returns
    (so a free worker takes its next item at once, with no thread hop), and this thread handles the timers.
    On a fake clock the reports queue up and this thread applies them in virtual-time order.
    """

    def __init__(self, chain: Chain, workers: _Workers, clock: Clock, schedule: Any, items: Iterator[Any],
                 stop: StopRule, on_progress: Callable[[int], None] | None) -> None:
        self.chain, self.workers, self.clock = chain, workers, clock
        self.schedule, self.items, self.stop, self.on_progress = schedule, items, stop, on_progress
        self.pending: list[tuple[int, int, int, int, ItemRecord, int, Any]] = []  # (end, seq, stage, worker, rec, taken, call)
        self.due: int | None = None  # open loop: the next item's intended time
        self.upcoming: Any = None  # open loop: its payload, made before the wait (the copy is not the send's)
        self.last_report = chain.start_ns
        self.fake = bool(getattr(clock, "is_fake", False))
        self.cond = threading.Condition()  # real clock: guards the chain (workers and this thread)
        self.armed = float("inf")  # real clock: the timer this thread waits for
        self.closed = False  # real clock: the run is over, late reports are left out
        if not self.fake:
            workers.on_done = self._apply

    def _apply(self, report: tuple) -> None:
        """Real clock, on the worker's thread: apply its report now; wake this thread if the source or the
        drain changed (the stop rule's timer moved earlier, or the source stopped)."""
        _, s, w, rec, taken, call = report
        with self.cond:
            if self.closed:
                return
            self.chain.completed(s, w, rec, call, self.clock.now_ns(), taken_ns=taken)
            if self.chain.stopped or self.chain.timer_ns() < self.armed:
                self.cond.notify()

    def next_arrival(self) -> None:
        """Open loop: the next due time and payload (None: the schedule or the items ended)."""
        off = self.schedule.next_offset_ns()
        self.upcoming = next(self.items, None) if off is not None else None
        self.due = self.chain.start_ns + off if self.upcoming is not None else None
        if self.due is None:
            self.chain.stop_source(self.clock.now_ns())

    def drain_deadline(self) -> float:
        """When the drain ends (``inf`` while the source sends)."""
        t_stop = self.chain.t_stop_ns
        return float("inf") if t_stop is None else t_stop + self.stop.drain_timeout_s * 1e9

    def finished(self, t: int) -> bool:
        """Every item is out, the drain deadline passed, or a fail-fast error ended the run."""
        c = self.chain
        return c.stopped and (c.in_flight == 0 or t >= self.drain_deadline() or (c.fail_fast and c.failure is not None))

    def timer(self) -> float:
        """The next time something happens without a report: an arrival, the stop rule, the drain deadline."""
        t = min(self.chain.timer_ns(), self.drain_deadline())
        return min(t, self.due) if self.due is not None and not self.chain.stopped else t

    def _take(self, report: tuple) -> None:
        seq, s, w, rec, taken, call = report
        self.workers.busy -= 1
        heapq.heappush(self.pending, (call.end_ns, seq, s, w, rec, taken, call))

    def _timers(self, t: int) -> None:
        """What is due at ``t`` without a report: the next arrival, the stop rule, progress."""
        c = self.chain
        if self.due is not None and not c.stopped and self.due <= t:
            if c.send(t, self.due, self.upcoming):
                self.next_arrival()
        if c.timer_ns() <= t:
            c.poll_source(t)
        if self.on_progress is not None and t - self.last_report > _PROGRESS_NS:
            self.on_progress(c.sent)
            self.last_report = t

    def _start(self) -> None:
        if self.schedule is None:
            self.chain.refill(self.clock.now_ns())
        else:
            self.next_arrival()

    def run(self) -> None:
        """Start the source, then handle events until :meth:`finished`."""
        if self.fake:
            self._start()
            while not self.finished(self.clock.now_ns()):
                self._advance()
                self._step_fake()
            return
        with self.cond:
            try:
                self._start()
                while not self.finished(now := self.clock.now_ns()):
                    self.armed = self.timer()
                    limit = min(self.armed, now + _PROGRESS_NS) if self.on_progress else self.armed
                    self.cond.wait(timeout=max(0.0, min(limit - now, 3600e9)) / 1e9)
                    self._timers(self.clock.now_ns())
            finally:
                self.closed = True

    # -- fake clock ---------------------------------------------------------------------------------------
    def _advance(self) -> None:
        """Every busy worker answers first (the clock does not move meanwhile), then the clock moves to the
        earliest of their calls' ends and the next timer."""
        while self.workers.busy:
            try:
                self._take(self.workers.reports.get(timeout=_FAKE_ANSWER_S))
            except queue.Empty:
                raise RuntimeFailure(f"a worker did not answer within {_FAKE_ANSWER_S:g} s on a fake clock") from None
        now = self.clock.now_ns()
        t_next = min(self.pending[0][0] if self.pending else float("inf"), self.timer())
        if t_next == float("inf"):
            raise RuntimeFailure("the pipeline waits for nothing that can happen (fake clock)")
        if t_next > now:
            self.clock.advance_ns(int(t_next) - now)  # type: ignore[attr-defined]

    def _step_fake(self) -> None:
        """Timers first (arrivals before completions at one time, as the simulator orders its events), then
        the calls that have ended, in the order they were started."""
        t = self.clock.now_ns()
        self._timers(t)
        while self.pending and self.pending[0][0] <= t:
            _, _, s, w, rec, taken, call = heapq.heappop(self.pending)
            self.chain.completed(s, w, rec, call, t, taken_ns=taken)


def run(stages: list[StageRuntime], items: Iterator[Any], *, sizes: list[int | None], policies: list[str],
        stop: StopRule, concurrency: int | None = None, schedule: Any = None, fail_fast: bool = False,
        capture: int = 0, keep_outputs: int = 0, on_progress: Callable[[int], None] | None = None,
        warmup: int = 0, cpu_probe: Callable[[], float] | None = None,
        clock: Clock = SYSTEM_CLOCK) -> tuple[Trace, list[list[Any]]]:
    """Run the pipeline once and return its :class:`Trace` and, when ``capture`` > 0, deep copies of the
    first ``capture`` inputs each stage received from warm-up items (to measure each stage alone afterwards).

    ``cpu_probe`` (CPU seconds so far) is read when the window opens and closes: ``Trace.cpu_s``.
    The first ``warmup`` items fill the pipeline; the window opens at the next send, so it starts in a
    steady state (no empty-pipeline transient), and closes when the source stops; the items in flight
    then drain (their latency counts; completions after the window do not count for throughput).

    Args:
        stages: the chain, with live workers (``call(item) -> Call``; times on ``clock``).
        items: source payloads (cycled by the caller; a finite iterator ends the run when it ends).
        sizes, policies: each stage's input queue (None: unbounded; ``block`` | ``reject``).
        stop: when to stop sending and how long to drain.
        concurrency: closed loop with this many items in flight; or ``schedule`` (open loop).
        fail_fast: stop at the first stage error and raise.
        keep_outputs: keep the last stage's first N returned items in ``Trace.outputs``.
        on_progress: called with the number sent so far, at most every ~0.2 s.
        clock: every time stamp (ns); a fake clock runs the pipeline in virtual time (module docstring).

    Raises:
        RuntimeFailure: ``fail_fast`` and a stage raised.
    """
    tr = Trace([s.name for s in stages], [len(s.workers) for s in stages], [s.executor for s in stages],
               [s.kind for s in stages], list(sizes), list(policies))
    if schedule is None:
        tr.mode, tr.concurrency = "closed", int(concurrency or 1)
    else:
        tr.mode, tr.schedule = "open", schedule.describe()
    cpu: list[float] = []
    probe = (lambda t: cpu.append(cpu_probe())) if cpu_probe is not None else None
    workers = _Workers(stages, capture, clock)
    start = clock.now_ns()
    chain = Chain(tr, workers.serve, stop, start_ns=start, concurrency=tr.concurrency, warmup=max(0, warmup),
                  next_payload=lambda: next(items, None), fail_fast=fail_fast, keep_outputs=keep_outputs,
                  on_open=probe, on_stop=lambda t: probe(t) if probe is not None and chain.t0_ns is not None else None)
    try:
        _Coordinator(chain, workers, clock, schedule, items, stop, on_progress).run()
    finally:
        workers.stop()
    _close(tr, chain, cpu)
    tr.capture_errors = dict(workers.capture_errors)
    if chain.failure:
        raise RuntimeFailure(chain.failure)
    return tr, workers.captured


def _close(tr: Trace, chain: Chain, cpu: list[float]) -> None:
    """The window (first measured send to the source stopping), the CPU used in it, waits, incomplete items."""
    t_stop = chain.t_stop_ns if chain.t_stop_ns is not None else chain.start_ns
    tr.t0_ns = chain.t0_ns if chain.t0_ns is not None else t_stop
    tr.t_end_ns = max(t_stop, tr.t0_ns + 1)
    if len(cpu) == 2:
        tr.cpu_s = cpu[1] - cpu[0]
    tr.incomplete = chain.incomplete()
    chain.close_window(tr.t0_ns, tr.t_end_ns)


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


__all__ = ["StageRuntime", "StopRule", "cycle", "run"]  # StopRule: from the policy module
