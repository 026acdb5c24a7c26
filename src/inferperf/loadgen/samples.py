"""The load step's modes and samples: :class:`Closed` and :class:`Open` (what a step does) and
:class:`StepSamples` (what it measured, raw: one entry per request), with the window figures over them.
The rules that fill them are :mod:`.driver`'s.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..policy.arrivals import Schedule
from .windows import _window


@dataclass(frozen=True)
class Closed:
    """Closed loop: ``concurrency`` streams, one outstanding request each."""

    concurrency: int


@dataclass(frozen=True)
class Open:
    """Open loop: send at ``schedule``'s times over at most ``max_connections`` connections.

    ``initial_connections`` are opened before time zero (default: enough for 50 ms of latency at the
    schedule's rate, at least 1, at most ``max_connections``).
    """

    schedule: Schedule
    max_connections: int = 256
    initial_connections: int | None = None

    def first_connections(self) -> int:
        """How many connections to open before time zero."""
        if self.initial_connections is not None:
            return max(1, min(self.max_connections, self.initial_connections))
        rate = self.schedule.describe().get("rate_per_s") or 20.0
        return max(1, min(self.max_connections, math.ceil(rate * 0.05)))


@dataclass
class StepSamples:
    """Raw per-request samples of one step and how the step ran.

    Arrays (one entry per request, numpy): ``scheduled_ns``, ``sent_ns`` (-1 = never sent),
    ``done_ns`` (-1 = not answered: incomplete), ``first_ns`` (the answer's first bytes read; 0 = not known;
    None: not recorded), all absolute clock ns (int64); ``status`` (HTTP,
    0 = none, int16); ``error`` (int8 index into ``error_kinds``, 0 = success); ``worker`` (int16).
    In closed loop ``scheduled_ns == sent_ns``. Corrected latency = done - scheduled; uncorrected =
    done - sent.

    ``t0_ns``: time zero (connections open); ``measure_start_ns``/``measure_end_ns``: the measured
    span; ``windows_ns``: ``[(start, end), ...]`` of the windows run; ``stable``: the window rule's
    verdict (None when fewer windows than it needs); ``client_cpu_s``: this process's CPU seconds
    over the measured span; ``connections_peak``, ``connections_ran_out`` (requests that waited for a
    connection at the cap), ``max_connections``; ``lost``: why the step ended early because the target
    stopped answering (None: it did not).
    """

    mode: str
    concurrency: int | None
    schedule: dict[str, Any] | None
    scheduled_ns: np.ndarray
    sent_ns: np.ndarray
    done_ns: np.ndarray
    status: np.ndarray
    error: np.ndarray
    worker: np.ndarray
    error_kinds: list[str]
    t0_ns: int
    measure_start_ns: int
    measure_end_ns: int
    windows_ns: list[tuple[int, int]] = field(default_factory=list)
    stable: bool | None = None
    client_cpu_s: float = 0.0
    connections_peak: int = 0
    connections_ran_out: int = 0
    max_connections: int = 0
    workers: int = 1
    transport: dict[str, Any] = field(default_factory=dict)
    by_send: bool = False
    first_ns: np.ndarray | None = None
    counted: np.ndarray | None = None  # pooled workers with ``requests``: each worker's own measured mask
    rejection: dict[str, Any] | None = None  # {status, body, in_a_row}: the step stopped on MAX_CONSECUTIVE_4XX
    client_span_s: float | None = None  # pooled: the sum of each worker's own measured span (its CPU's divisor)
    drain: dict[str, Any] | None = None  # the drain before this step (loadgen.drain), None when none ran
    interrupted: bool = False  # Ctrl-C / SIGTERM ended the step early (inferperf.interrupt): partial figures
    streams: list[Any] | None = None  # token streams: per request its loadgen.generation.GenRecord (None: none)
    error_examples: dict[str, str] = field(default_factory=dict)  # error kind -> its first answer body

    def cpu_percent(self) -> float | None:
        """Generator CPU as % of one core per process: CPU seconds over the span(s) they were read over
        (pooled workers: summed CPU over summed own spans, so their mean); None when no time was measured."""
        span = self.duration_s if self.client_span_s is None else self.client_span_s
        return 100.0 * self.client_cpu_s / span if span > 0 else None
    lost: str | None = None

    def measured(self) -> np.ndarray:
        """Boolean mask of requests that completed (with or without error) in the measured span (start, end];
        with ``by_send`` (``requests`` N) those *scheduled* from its start on that were answered, exactly the N
        asked (a request is counted against N by its scheduled time, :meth:`_StepRun.may_send`: by its send time,
        one scheduled before the start but sent after it made N + 1)."""
        d = self.done_ns
        if self.counted is not None:
            return self.counted
        if self.by_send:
            return (self.scheduled_ns >= self.measure_start_ns) & (d >= 0) & (d <= self.measure_end_ns)
        return (d > self.measure_start_ns) & (d <= self.measure_end_ns)

    def due_mask(self) -> np.ndarray:
        """Requests due in the measured span: scheduled in ``[start, end)`` (a request scheduled at the span's start
        is its own, not the warm-up's: one counting rule, so with no backlog at the start, completed + incomplete
        = due; in general due - completed = the backlog's growth, :meth:`in_system`); with ``by_send``
        (``requests`` N) the N scheduled from its start on."""
        if self.by_send:
            return self.scheduled_ns >= self.measure_start_ns
        return (self.scheduled_ns >= self.measure_start_ns) & (self.scheduled_ns < self.measure_end_ns)

    def incomplete_mask(self) -> np.ndarray:
        """Requests due in the measured span (:meth:`due_mask`) with no answer by its end."""
        d = self.done_ns
        return self.due_mask() & ((d < 0) | (d > self.measure_end_ns))

    def in_system(self, t_ns: int) -> int:
        """Requests scheduled before ``t_ns`` and not answered by it (the backlog at ``t_ns``; the half-open rule of
        :meth:`due_mask`)."""
        d = self.done_ns
        return int(((self.scheduled_ns < t_ns) & ((d < 0) | (d > t_ns))).sum())

    @property
    def duration_s(self) -> float:
        """Measured wall time, s."""
        return max(0, self.measure_end_ns - self.measure_start_ns) / 1e9


def window_figures(s: StepSamples, a_ns: int, b_ns: int) -> dict[str, float]:
    """Completions (successes) in ``(a_ns, b_ns]`` of ``s``: ``count``, ``queries_per_s``, ``p50_ms``,
    ``p99_ms`` of corrected latency (0 when empty)."""
    return _window(s.scheduled_ns, s.done_ns, s.error, a_ns, b_ns)


def cpu_seconds() -> float:
    """This process's user + system CPU time, s."""
    t = os.times()
    return t.user + t.system


__all__ = ["Closed", "Open", "StepSamples", "cpu_seconds", "window_figures"]
