"""The Concurrent scenario: N closed-loop streams in threads, one shared stop rule.

Each stream issues its next query as soon as its previous one returns
(perf_analyzer's ``--concurrency-range``, MLPerf-style closed loop). Streams
warm up on their own, meet at a barrier, and then run until the main thread
sees the *total* count and the elapsed time meet the stop rule (or the cap).
When the main thread is interrupted (Ctrl-C, or SIGTERM raised as
KeyboardInterrupt by the CLI) at any point, warm-up stops, the barrier is
broken and every stream thread ends after its call in flight.
ONNX Runtime releases the GIL inside ``run``, so the streams overlap for real.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock
from .loop import LiveState, StopRule, count_error, warm_up


@dataclass
class StreamSamples:
    """Raw samples of N concurrent streams (integer ns; offsets from the common start).

    Attributes:
        warmup_latency_ns: each stream's warm-up latencies (stream 0's first is the cold first inference).
        latency_ns, start_offsets_ns, stream_ids: one entry per completed query, in completion order per stream.
        duration_ns: common start to the last completion.
        per_stream_counts: completed queries per stream.
        errors: exception kind -> count.
        stopped_by: ``rule`` or ``cap``.
        first_error: the first exception a measured query raised in any stream (None if none did).
    """

    warmup_latency_ns: list[list[int]] = field(default_factory=list)
    latency_ns: list[int] = field(default_factory=list)
    start_offsets_ns: list[int] = field(default_factory=list)
    stream_ids: list[int] = field(default_factory=list)
    duration_ns: int = 0
    per_stream_counts: list[int] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    stopped_by: str = "rule"
    first_error: BaseException | None = None


class _Stream(threading.Thread):
    def __init__(self, k, run, feeds, clock, rule, barrier, shared):
        super().__init__(name=f"inferperf-stream-{k}", daemon=True)
        self.k, self.run_fn, self.feeds, self.clock = k, run, feeds, clock
        self.rule, self.barrier, self.shared = rule, barrier, shared
        self.warm: list[int] = []
        self.lat: list[int] = []
        self.starts: list[int] = []
        self.last_end = 0
        self.errors: dict[str, int] = {}
        self.failure: BaseException | None = None
        self.first_error: BaseException | None = None

    def run(self) -> None:  # noqa: D102 - thread body
        now = self.clock.now_ns
        run = self.run_fn
        feeds = self.feeds
        n = len(feeds)
        try:
            self.warm = warm_up(run, feeds, self.clock, self.rule.warmup_iterations, self.rule.warmup_duration_s,
                                stop=self.shared["stop"])
            i = len(self.warm)
        except BaseException as e:  # noqa: BLE001 - reported to the caller
            self.failure = e
            self.barrier.abort()
            return
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            return
        t_begin = self.shared["t_begin"]
        stop = self.shared["stop"]
        lat, starts = self.lat, self.starts
        t1 = t_begin
        while not stop.is_set():
            feed = feeds[i % n]
            t0 = now()
            try:
                run(feed)
            except Exception as e:  # counted, not timed
                t1 = now()
                count_error(self, e)
            else:
                t1 = now()
                lat.append(t1 - t0)
                starts.append(t0 - t_begin)
            i += 1
        self.last_end = t1


def measure_concurrent(
    runs: Sequence[Callable[[Any], Any]],
    feeds: Sequence[Sequence[Any]],
    clock: Clock,
    rule: StopRule,
    live: LiveState | None = None,
    poll_s: float = 0.005,
    on_start: Callable[[], None] | None = None,
) -> StreamSamples:
    """Run ``len(runs)`` closed-loop streams until the total count and duration meet the stop rule.

    Args:
        runs: one runtime callable per stream (the same callable for a shared session).
        feeds: one input pool per stream (distinct inputs per stream).
        clock: the clock (real; the coordinator sleeps ``poll_s`` between checks).
        rule: per-stream warm-up (never counted) and the stop rule over all streams.
        live: optional progress state.
        on_start: called once when measurement starts (after every stream's warm-up),
            e.g. to read CPU times for the measured window only.

    Returns:
        :class:`StreamSamples`.

    Raises:
        RunCallFailed: the runtime call raised during a stream's warm-up (the model cannot run).
        Exception: anything else a stream raised during warm-up (an inferperf bug), unchanged.
    """
    shared: dict[str, Any] = {"stop": threading.Event(), "t_begin": 0}
    streams, barrier = _start_streams(runs, feeds, clock, rule, shared, on_start)
    try:
        if live is not None:
            live.phase = "warmup"
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass
        failed = next((s.failure for s in streams if s.failure is not None), None)
        if failed is not None:
            raise failed
        t_begin = shared["t_begin"]
        if live is not None:
            live.phase, live.samples, live.t0_ns = "measure", streams[0].lat, t_begin
        stopped_by = _wait_for_stop(streams, clock, t_begin, rule, poll_s)
    finally:
        # on Ctrl-C/SIGTERM (or a failure) streams may still be warming up or parked at the barrier:
        # stop their warm-up and break the barrier, or join() would wait for them forever
        shared["stop"].set()
        barrier.abort()
        for s in streams:
            s.join()
    return _pool(streams, t_begin, stopped_by, rule)


def _start_streams(runs: Sequence[Callable[[Any], Any]], feeds: Sequence[Sequence[Any]], clock: Clock,
                   rule: StopRule, shared: dict[str, Any],
                   on_start: Callable[[], None] | None) -> tuple[list[_Stream], threading.Barrier]:
    """One started thread per stream and the barrier they meet at after warm-up (one party more: the caller).

    The barrier's action runs once all streams have warmed up, before any is released: it calls ``on_start``
    and sets ``shared["t_begin"]``, the common start.
    """

    def start() -> None:
        if on_start is not None:
            on_start()
        shared["t_begin"] = clock.now_ns()

    barrier = threading.Barrier(len(runs) + 1, action=start)
    streams = [_Stream(k, runs[k], feeds[k], clock, rule, barrier, shared)
               for k in range(len(runs))]  # fmt: skip
    for s in streams:
        s.start()
    return streams, barrier


def _wait_for_stop(streams: list[_Stream], clock: Clock, t_begin: int, rule: StopRule, poll_s: float) -> str:
    """Poll every ``poll_s`` until the total count and the elapsed time meet the stop rule (``"rule"``), the cap is
    reached (``"cap"``), or 100 queries failed with none done (``"rule"``: the caller reports the failures)."""
    min_end = t_begin + int(rule.min_duration_s * 1e9)
    max_end = t_begin + int(rule.max_duration_s * 1e9)
    while True:
        clock.sleep(poll_s)
        t = clock.now_ns()
        total = sum(len(s.lat) for s in streams)
        if total >= rule.min_iterations and t >= min_end:
            return "rule"
        if t >= max_end:
            return "cap"
        if not total and sum(sum(s.errors.values()) for s in streams) >= 100:
            return "rule"


def _pool(streams: list[_Stream], t_begin: int, stopped_by: str, rule: StopRule) -> StreamSamples:
    """The streams' samples in one :class:`StreamSamples`; a run the cap stopped that met the rule anyway (its
    last calls finished past the minimums) counts as stopped by the rule."""
    out = StreamSamples(stopped_by=stopped_by)
    out.warmup_latency_ns = [s.warm for s in streams]
    for s in streams:
        out.latency_ns.extend(s.lat)
        out.start_offsets_ns.extend(s.starts)
        out.stream_ids.extend([s.k] * len(s.lat))
        out.per_stream_counts.append(len(s.lat))
        for kind, c in s.errors.items():
            out.errors[kind] = out.errors.get(kind, 0) + c
        out.first_error = out.first_error or s.first_error
    out.duration_ns = max((s.last_end for s in streams), default=t_begin) - t_begin
    if out.stopped_by == "cap" and not rule.capped(sum(out.per_stream_counts), out.duration_ns):
        out.stopped_by = "rule"
    return out
