"""The timed loop: warm-up, then measurement under a stop rule.

Only the runtime call sits between the two clock reads; inputs come from a
pool built beforehand and are cycled (never one tensor replayed); outputs are
not touched inside the window. ``clock.now_ns`` is ``time.perf_counter_ns``
itself for the real clock.

Stop rule (MLPerf LoadGen style): stop once *both* ``min_iterations`` and
``min_duration_s`` are met, or at ``max_duration_s`` whichever comes first.
Warm-up likewise runs until both its count and its duration are met; the
first warm-up call is the cold first inference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..clock import Clock


@dataclass
class LoopSamples:
    """Raw samples of one closed-loop stream, integer nanoseconds.

    Attributes:
        warmup_latency_ns: warm-up latencies; ``[0]`` is the cold first inference.
        latency_ns: measured latencies, one per completed query.
        start_offsets_ns: start of each measured query, from ``t0_ns``.
        t0_ns: clock reading at the start of measurement.
        duration_ns: from ``t0_ns`` to the end of the last measured query.
        errors: exception kind -> count, for measured queries that raised.
        stopped_by: ``rule`` (both minimums met) or ``cap`` (max duration reached first).
        first_error: the first exception a measured query raised (None if none did).
    """

    warmup_latency_ns: list[int] = field(default_factory=list)
    latency_ns: list[int] = field(default_factory=list)
    start_offsets_ns: list[int] = field(default_factory=list)
    t0_ns: int = 0
    duration_ns: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    stopped_by: str = "rule"
    first_error: BaseException | None = None


@dataclass(frozen=True)
class StopRule:
    """The warm-up and stop rule every measure loop runs by (one argument list for :func:`measure_stream`,
    :func:`~.concurrent.measure_concurrent` and :func:`~.async_exec.measure_async`).

    Attributes:
        warmup_iterations, warmup_duration_s: warm-up until both are reached (never counted; per stream).
        min_iterations, min_duration_s: measurement until both are met (the count over all streams), capped by
        max_duration_s (s).
    """

    warmup_iterations: int
    warmup_duration_s: float
    min_iterations: int
    min_duration_s: float
    max_duration_s: float

    @classmethod
    def of(cls, warmup: Any, stop: Any) -> StopRule:
        """From a config's ``warmup`` (``iterations``, ``duration_s``) and ``stop`` (``min_iterations``,
        ``min_duration_s``, ``max_duration_s``)."""
        return cls(warmup.iterations, warmup.duration_s, stop.min_iterations, stop.min_duration_s, stop.max_duration_s)

    def capped(self, count: int, duration_ns: int) -> bool:
        """Whether a run that reached the cap with ``count`` queries in ``duration_ns`` missed a minimum."""
        return count < self.min_iterations or duration_ns < self.min_duration_s * 1e9


def count_error(holder: Any, e: BaseException) -> int:
    """Count the failed query ``e`` in ``holder.errors`` (by exception kind) and keep it as ``holder.first_error``
    when it is the first; returns how many of its kind there are. The one error count of the measure loops."""
    kind = type(e).__name__
    holder.errors[kind] = n = holder.errors.get(kind, 0) + 1
    if holder.first_error is None:
        holder.first_error = e
    return n


class RunCallFailed(Exception):
    """The runtime call itself raised (warm-up, the cold first inference, a reference run).

    Only errors from inside the backend's run call are wrapped in this, so the caller can tell
    "the runtime failed on this model" (mapped to a one-line RuntimeFailure) from a bug in
    inferperf (reported as an internal error). ``error`` is the runtime's exception.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def call_runtime(run: Callable[[Any], Any], feed: Any) -> Any:
    """``run(feed)``, with any exception it raises wrapped in :class:`RunCallFailed`."""
    try:
        return run(feed)
    except Exception as e:
        raise RunCallFailed(e) from e


class LiveState:
    """What a progress display may read from another thread while the loop runs.

    ``phase`` is ``warmup`` or ``measure``; ``samples`` is the list being
    appended to (read its ``len``); ``t0_ns`` the start of the current phase.
    The loop never waits on a reader.
    """

    def __init__(self) -> None:
        self.phase = "load"
        self.samples: list[int] = []
        self.t0_ns = 0


def warm_up(
    run: Callable[[Any], Any],
    feeds: Sequence[Any],
    clock: Clock,
    iterations: int,
    duration_s: float,
    live: LiveState | None = None,
    stop: Any = None,
) -> list[int]:
    """Run until both ``iterations`` and ``duration_s`` are reached; return each call's latency (ns).

    ``stop`` (a :class:`threading.Event`, optional) ends warm-up early once set: another thread
    (a concurrent run's coordinator on Ctrl-C or SIGTERM) asks this stream to give up.

    Raises:
        RunCallFailed: ``run`` raised; the runtime's own exception is its ``error`` (and ``__cause__``).
            A model that fails to run fails here, before measurement.
    """
    now = clock.now_ns
    out: list[int] = []
    if live is not None:
        live.phase, live.samples = "warmup", out
    n = len(feeds)
    start = now()
    min_end = start + int(duration_s * 1e9)
    if live is not None:
        live.t0_ns = start
    i = 0
    while True:
        t0 = now()
        try:
            run(feeds[i % n])
        except Exception as e:  # only the runtime call: inferperf's own errors are not the runtime's
            raise RunCallFailed(e) from e
        t1 = now()
        out.append(t1 - t0)
        i += 1
        if i >= iterations and t1 >= min_end:
            return out
        if stop is not None and stop.is_set():
            return out


def measure_stream(
    run: Callable[[Any], Any],
    feeds: Sequence[Any],
    clock: Clock,
    rule: StopRule,
    live: LiveState | None = None,
    first_feed: int = 0,
) -> LoopSamples:
    """Closed loop: issue the next query as soon as the previous one returns, until the stop rule says so.

    A query that raises is counted by exception kind and leaves no latency
    sample; the loop goes on. If every query fails, the caller sees
    ``latency_ns == []`` and ``errors`` filled.

    Args:
        run: the runtime call, ``run(feed)``.
        feeds: the input pool, cycled from ``first_feed``.
        clock: a :class:`~inferperf.clock.Clock`.
        rule: the stop rule (its warm-up part is :func:`warm_up`'s).
        live: optional progress state (read-only for other threads).
    """
    now = clock.now_ns
    s = LoopSamples()
    # raw clock readings are kept and subtracted after the loop: two appends, no arithmetic per query
    t0s: list[int] = []
    t1s: list[int] = []
    push0, push1 = t0s.append, t1s.append
    if live is not None:
        live.phase, live.samples = "measure", t1s
    n = len(feeds)
    i = first_feed
    count = 0
    t_begin = now()
    s.t0_ns = t_begin
    if live is not None:
        live.t0_ns = t_begin
    min_iterations = rule.min_iterations
    min_end = t_begin + int(rule.min_duration_s * 1e9)
    max_end = t_begin + int(rule.max_duration_s * 1e9)
    t1 = t_begin
    while True:
        feed = feeds[i % n]
        t0 = now()
        try:
            run(feed)
        except Exception as e:  # counted, not timed; the loop goes on
            t1 = now()
            count_error(s, e)
        else:
            t1 = now()
            push0(t0)
            push1(t1)
            count += 1
        i += 1
        if t1 >= max_end:
            s.stopped_by = "cap" if (count < min_iterations or t1 < min_end) else "rule"
            break
        if count >= min_iterations and t1 >= min_end:
            break
        if not count and sum(s.errors.values()) >= 100:
            break
    s.duration_ns = t1 - t_begin
    a0 = np.asarray(t0s, dtype=np.int64)
    s.latency_ns = (np.asarray(t1s, dtype=np.int64) - a0).tolist()
    s.start_offsets_ns = (a0 - t_begin).tolist()
    return s
