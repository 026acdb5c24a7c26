"""The load driver: one step of closed-loop or open-loop load, raw samples out.

- **Closed loop** (:class:`Closed`, scenario Concurrent): ``concurrency``
  streams, each with its own connection, send the next request as soon as the
  previous one is answered (perf_analyzer's concurrency mode).
- **Open loop** (:class:`Open`, scenario Server): one schedule
  (:mod:`inferperf.policy.arrivals`) hands out send times; each request is
  sent at its time on an idle connection, a new one while fewer than
  ``max_connections`` are open, or waits for one (counted in
  ``connections_ran_out``). Latency is taken from the *scheduled* time
  (corrected for coordinated omission); the actual send time is kept beside.

Time zero is taken after the first connections are open (so the first second
is not a burst of connects). The first ``warmup_s`` is never counted. Then:
``duration_s`` measures that long (windows only report stability);
``requests`` stops after that many measured sends and waits for their answers;
otherwise windows of ``interval_ms`` run until throughput and p99 of the last
3 windows are each within ``stability_percentage`` of their mean
(perf_analyzer's rule: max <= mean x (1 + p) and min >= mean x (1 - p)), at
most ``max_trials`` windows; the measured span is then those last 3 windows
and an unstable step is kept and marked. A window belongs to the requests that
*completed* in it (throughput = completions / window wall time).

Requests still unanswered at the end are cancelled and stay in the samples
with ``done_ns == -1``: counted as incomplete, never dropped. Errors are
samples with an error code (see :mod:`.transport`); after a failed connect a
closed-loop stream waits ``RECONNECT_BACKOFF_S`` before trying again, so a
dead target costs no CPU.

**Target lost**: when the target stops answering, the step ends at once (the
measured span ends there) and ``StepSamples.lost`` says why: no answer for
``LOST_AFTER_NS`` (1 s) while at least ``LOST_MIN_FAILURES`` requests failed
and none succeeded (connection refused, reset, timed out or answered 5xx; a
4xx answer is the server answering, so it counts as alive).

One interval convention: a request is *due* in the span when its scheduled
time is in ``[start, end)``, and *completed* in it when its answer time is in
``(start, end]`` (:meth:`StepSamples.due_mask`, :meth:`StepSamples.in_system`):
due - completed is the backlog's growth, and from an empty backlog
completed + incomplete = due.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..clock import SYSTEM_CLOCK, Clock
from ..policy.arrivals import Schedule
from .deadlines import Deadlines
from .samples import Closed, Open, StepSamples, cpu_seconds, window_figures
from .span import measure_span, start_sending, wind_down
from .event_loop import loop_name
from .windows import WindowRule, _window, is_stable
from .transport import CLIENT_ERROR, CONNECT, TIMEOUT, Connection, ConnectError, ConnectionPool, Response, Transport

RECONNECT_BACKOFF_S = 0.010
#: this many 4xx answers in a row end the step: the server refuses the requests themselves (malformed), more
#: of them measure nothing. 408 and 429 are load signals, not malformed requests: they neither count nor reset.
MAX_CONSECUTIVE_4XX = 10
_LOAD_4XX = (408, 429)
#: no answer for this long (ns), with only failures meanwhile: the target is lost and the step ends.
LOST_AFTER_NS = 1_000_000_000
#: ... and at least this many failed requests in that time (one stray reset is not a dead target).
LOST_MIN_FAILURES = 3
#: a send this much after its scheduled time is "late" (ns).
LATE_SEND_NS = 1_000_000
#: the open loop's dispatcher, behind its schedule, yields to the loop after this many sends in a row without a
#: wait: the requests it created run meanwhile, and the span's end and a stop request are heard (a rate past what
#: one process creates, or a burst in a trace, would otherwise keep it creating tasks that never run).
CATCH_UP_SENDS = 64


class _StepRun:
    """Mutable state of one step: the per-request lists, the stop flag, the pool."""

    def __init__(self, pool: ConnectionPool, payloads: Sequence[Any], clock: Clock, timeout_s: float,
                 worker_id: int, requests: int | None) -> None:  # fmt: skip
        self.pool, self.payloads, self.clock = pool, payloads, clock
        self.timeout_s = timeout_s
        self.deadlines = Deadlines(timeout_s, clock)
        self.worker_id = worker_id
        self.requests = requests
        self.sched: list[int] = []
        self.sent: list[int] = []
        self.done: list[int] = []
        self.first: list[int] = []  # the answer's first bytes read (0: not known)
        self.status: list[int] = []
        self.err: list[int] = []
        self.kinds: dict[str, int] = {"": 0}
        self.stopping = False
        self.measure_start_ns: int | None = None
        self.measured_sends = 0
        self.rejected_in_a_row = 0
        self.rejection: dict[str, Any] | None = None  # the first 4xx answer, once MAX_CONSECUTIVE_4XX came in a row
        self._first_4xx: dict[str, Any] | None = None
        self.examples: dict[str, str] = {}  # error kind -> the first answer body of that kind
        self.outstanding = 0
        self.finished = asyncio.Event()  # no more sends and nothing outstanding (or the target is lost)
        self.last_answer_ns = clock.now_ns()  # last success or 4xx (the target answering); reset at time zero
        self.failing: dict[str, int] = {}  # failures by kind since then
        self.lost: str | None = None
        self.interrupted = False
        self.streams: dict[int, Any] = {}  # request index -> its token stream record (generation transports)

    def interrupt(self) -> None:
        """The stop request (Ctrl-C, SIGTERM): no more sends; the step ends now with what it measured."""
        self.interrupted = self.stopping = True
        self.finished.set()

    def figures(self, a_ns: int, b_ns: int) -> dict[str, float]:
        """:func:`window_figures` of ``(a_ns, b_ns]`` while the step runs (a live per-interval line), over the
        requests scheduled from ``timeout_s`` before ``a_ns`` on (``sched`` is in time order; earlier ones
        have answered or timed out by then), so a long soak does not re-read its whole history each time."""
        i = bisect.bisect_left(self.sched, a_ns - round(self.timeout_s * 1e9))
        return _window(np.asarray(self.sched[i:], np.int64), np.asarray(self.done[i:], np.int64),
                       np.asarray(self.err[i:], np.int8), a_ns, b_ns)  # fmt: skip

    def new(self, sched_ns: int) -> int:
        self.sched.append(sched_ns)
        self.sent.append(-1)
        self.done.append(-1)
        self.first.append(0)
        self.status.append(0)
        self.err.append(0)
        return len(self.sched) - 1

    def may_send(self, at_ns: int | None = None) -> bool:
        """Counts a measured send against ``requests`` (a request belongs to the span by its scheduled time
        ``at_ns``, default now: the rule :meth:`StepSamples.measured` counts by); False once the step stops sending."""
        if self.stopping:
            return False
        when = self.clock.now_ns() if at_ns is None else at_ns
        if self.requests is not None and when >= (self.measure_start_ns or 0):
            if self.measured_sends >= self.requests:
                return False
            self.measured_sends += 1
        return True

    def finish(self, i: int, r: Response) -> None:
        now = self.done[i] = self.clock.now_ns()
        self.first[i] = r.first_ns
        self.status[i] = r.status
        stream = getattr(r, "stream", None)
        if stream is not None:
            self.streams[i] = stream
        if r.error_kind is not None:
            self.err[i] = self.kinds.setdefault(r.error_kind, len(self.kinds))
            if r.error_body and r.error_kind not in self.examples:  # the first body of each kind, shown
                self.examples[r.error_kind] = r.error_body.decode("utf-8", "replace").strip()[:2000]
        if 400 <= r.status < 500 and r.status not in _LOAD_4XX:
            if self.rejected_in_a_row == 0:
                body = (r.error_body or b"").decode("utf-8", "replace").strip()
                self._first_4xx = {"status": r.status, "body": body[:2000]}
            self.rejected_in_a_row += 1
            if self.rejected_in_a_row >= MAX_CONSECUTIVE_4XX and self.rejection is None:
                self.rejection = {**(self._first_4xx or {}), "in_a_row": self.rejected_in_a_row}
                self.stopping = True  # no more sends; the step ends when the outstanding ones answer
        elif r.status not in _LOAD_4XX:
            self.rejected_in_a_row = 0
        if r.error_kind is None or 400 <= r.status < 500:
            self.last_answer_ns = now
            if self.failing:
                self.failing.clear()
            return
        self.failing[r.error_kind] = self.failing.get(r.error_kind, 0) + 1
        silent_ns = now - self.last_answer_ns
        if self.lost is None and silent_ns >= LOST_AFTER_NS and sum(self.failing.values()) >= LOST_MIN_FAILURES:
            self._lose(silent_ns / 1e9)

    def _lose(self, silent_s: float) -> None:
        """The target stopped answering: stop sending and end the step now."""
        kinds = self.failing
        if set(kinds) == {CONNECT}:
            self.lost = f"could not connect for {silent_s:.1f} s ({kinds[CONNECT]} attempts refused or unreachable)"
        else:
            parts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(kinds.items(), key=lambda x: -x[1]))
            self.lost = f"every request failed for {silent_s:.1f} s ({parts})"
        self.stopping = True
        self.finished.set()

    async def exchange(self, conn: Connection, i: int, task: asyncio.Task, payload: Any = None) -> None:
        """Send request ``i`` on ``conn`` now from ``task`` (the running one) and record the answer; past the
        deadline (:class:`.deadlines.Deadlines`) the connection is closed and the request is a ``timeout``.
        ``payload``: what to send (default: the pool's payload ``i``)."""
        self.outstanding += 1
        self.sent[i] = sent = self.clock.now_ns()
        deadlines = self.deadlines
        deadlines.begin(task, sent)
        try:
            try:
                if payload is None and self.payloads:
                    payload = self.payloads[i % len(self.payloads)]
                r = await conn.send(payload)
            except asyncio.CancelledError:
                if not deadlines.expired(task):
                    raise
                conn.close()
                r = Response(0, 0, TIMEOUT)
            except Exception as e:  # noqa: BLE001 - a failure of this request, counted; never the end of a stream
                conn.close()
                r = Response(0, 0, CLIENT_ERROR, f"{type(e).__name__}: {e}".encode("utf-8", "replace")[:2000])
            finally:
                deadlines.end(task)
            self.finish(i, r)
        finally:
            self.outstanding -= 1

    async def closed_stream(self, k: int = 0) -> None:
        """Closed-loop stream ``k``: one request in flight, the next sent when it is answered (a sequence
        model's payloads are per stream: :class:`~.sequence_load.SequencePayloads`)."""
        per_stream = getattr(self.payloads, "per_stream", False)
        conn: Connection | None = None
        task = asyncio.current_task()
        assert task is not None
        try:
            while self.may_send():
                if conn is None or not conn.open:
                    if conn is not None:
                        self.pool.release(conn)
                    try:
                        conn = await self.pool.acquire()
                    except ConnectError:
                        conn = None
                        now = self.clock.now_ns()
                        i = self.new(now)
                        self.sent[i] = now
                        self.finish(i, Response(0, 0, CONNECT))
                        await asyncio.sleep(RECONNECT_BACKOFF_S)
                        continue
                await self.exchange(conn, self.new(self.clock.now_ns()), task,
                                    self.payloads.next(k) if per_stream else None)
        finally:
            if conn is not None:
                self.pool.release(conn)

    async def open_request(self, sched_ns: int) -> None:
        i = self.new(sched_ns)
        self.outstanding += 1
        try:
            conn = await self.pool.acquire()
        except ConnectError:
            self.sent[i] = self.clock.now_ns()
            self.finish(i, Response(0, 0, CONNECT))
            return
        finally:
            self.outstanding -= 1
        try:
            await self.exchange(conn, i, asyncio.current_task())  # type: ignore[arg-type]
        finally:
            self.pool.release(conn)
            self._maybe_finished()

    def _maybe_finished(self) -> None:
        if self.stopping and self.outstanding == 0:
            self.finished.set()

    async def dispatch(self, schedule: Schedule, t0: int, tasks: set[asyncio.Task[None]]) -> None:
        """Open loop: start each request at its scheduled time until the step stops or the schedule ends
        (behind the schedule, it yields every ``CATCH_UP_SENDS`` sends)."""
        behind = 0
        while True:
            off = schedule.next_offset_ns()
            if off is None or not self.may_send(t0 + off):  # counted by its scheduled time, before the wait
                break
            t = t0 + off
            wait_ns = t - self.clock.now_ns()
            if wait_ns > 0:
                behind = 0
                await asyncio.sleep(wait_ns / 1e9)
            elif (behind := behind + 1) >= CATCH_UP_SENDS:
                behind = 0
                await asyncio.sleep(0)
            if self.stopping:
                break
            task = asyncio.ensure_future(self.open_request(t))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        self.stopping = True
        if tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)
        self.finished.set()

    async def until(self, t_ns: int) -> bool:
        """Wait until clock time ``t_ns`` or until the step finished on its own; True when it finished."""
        wait_ns = t_ns - self.clock.now_ns()
        if self.finished.is_set():
            return True
        if wait_ns <= 0:
            return False
        try:
            await asyncio.wait_for(self.finished.wait(), wait_ns / 1e9)
            return True
        except TimeoutError:
            return False


async def run_step(
    transport: Transport,
    mode: Closed | Open,
    *,
    payloads: Sequence[Any] = (),
    warmup_s: float = 2.0,
    duration_s: float | None = None,
    requests: int | None = None,
    windows: WindowRule = WindowRule(),
    timeout_s: float = 30.0,
    clock: Clock = SYSTEM_CLOCK,
    pool: ConnectionPool | None = None,
    worker_id: int = 0,
    cpu: Callable[[], float] = cpu_seconds,
    start_at_ns: int | None = None,
    on_window: Callable[[int, int, dict[str, float]], Any] | None = None,
) -> StepSamples:
    """Run one step of load and return its raw samples (see the module docstring for the rules).

    Args:
        transport: where requests go (``HttpTransport`` or ``SimulatedServer``).
        mode: ``Closed(concurrency)`` or ``Open(schedule, max_connections)``.
        payloads: request payloads cycled through (request i gets ``payloads[i % len]``).
        warmup_s: seconds from time zero never counted.
        duration_s: measured seconds (None: ``requests`` or windows until stable).
        requests: stop after this many measured sends and wait for their answers.
        windows: the window rule.
        timeout_s: per-request deadline (an expired request is a ``timeout`` error, noticed within
            :func:`.deadlines.tick_for` of it: one watchdog, not a timer per request).
        clock: time source; the running event loop must run on the same clock.
        pool: connections kept open across steps (default: a new pool, closed at the end); with one given, the
            step's in-flight requests are answered (at most ``timeout_s``) rather than cancelled at its end,
            so their connections stay open.
        worker_id: recorded in ``StepSamples.worker`` (``--workers``).
        cpu: CPU-seconds reader for the honest-client check.
        start_at_ns: time zero given by a coordinator (``--workers``); default: now, connections open.
        on_window: with ``duration_s``, called ``(start_ns, end_ns, figures)`` after each whole window
            (``--soak-s``'s live line; figures as :func:`window_figures`).

    A stop request (:data:`inferperf.interrupt.STOP`: Ctrl-C, SIGTERM) ends the step at once: no more sends,
    the measured span ends there, and the samples say ``interrupted``.

    Returns:
        StepSamples with every request sent (warm-up included; select with ``measured()``).
    """
    closed = isinstance(mode, Closed)
    cap = mode.concurrency if closed else mode.max_connections
    own_pool = pool is None
    pool = pool or ConnectionPool(transport, cap)
    pool.max_connections = max(pool.max_connections, cap)
    await pool.fill(mode.concurrency if closed else mode.first_connections())
    run = _StepRun(pool, payloads, clock, timeout_s, worker_id, requests)
    run.measure_start_ns = 1 << 62  # until time zero is known
    if start_at_ns is not None and start_at_ns > clock.now_ns():
        await asyncio.sleep((start_at_ns - clock.now_ns()) / 1e9)
    t0 = clock.now_ns()
    run.last_answer_ns = t0
    tasks: set[asyncio.Task[None]] = set()
    watchdog = asyncio.ensure_future(run.deadlines.run())
    try:
        main, senders = start_sending(run, mode, t0, tasks)
        start = t0 + round(warmup_s * 1e9)
        run.measure_start_ns = start
        span, cpu_s = await measure_span(run, windows, start, duration_s, on_window, cpu)
        await wind_down(run, main, senders, tasks, keep_connections=not own_pool, timeout_s=timeout_s)
    finally:
        watchdog.cancel()
    if own_pool:
        pool.close()
    n = len(run.sched)
    kinds = sorted(run.kinds, key=run.kinds.__getitem__)
    return StepSamples(
        mode="closed" if closed else "open", concurrency=mode.concurrency if closed else None,
        schedule=None if closed else mode.schedule.describe(),
        scheduled_ns=np.asarray(run.sched, np.int64), sent_ns=np.asarray(run.sent, np.int64),
        done_ns=np.asarray(run.done, np.int64), first_ns=np.asarray(run.first, np.int64),
        status=np.asarray(run.status, np.int16),
        error=np.asarray(run.err, np.int8), worker=np.full(n, worker_id, np.int16), error_kinds=kinds,
        t0_ns=t0, measure_start_ns=span[0], measure_end_ns=span[1], windows_ns=span[2], stable=span[3],
        client_cpu_s=cpu_s, connections_peak=pool.peak, connections_ran_out=pool.ran_out,
        max_connections=cap, transport={**transport.describe(), "event_loop": loop_name(asyncio.get_running_loop())},
        by_send=requests is not None,
        rejection=run.rejection, lost=run.lost, interrupted=run.interrupted, error_examples=run.examples,
        streams=[run.streams.get(i) for i in range(n)] if run.streams else None,
    )  # fmt: skip


__all__ = ["CATCH_UP_SENDS", "Closed", "LATE_SEND_NS", "LOST_AFTER_NS", "MAX_CONSECUTIVE_4XX", "Open", "StepSamples", "WindowRule", "is_stable", "run_step",
           "window_figures", "cpu_seconds"]
