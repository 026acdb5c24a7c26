"""The only module that reads time (monotonic clocks, and :func:`utc_now` for wall-clock timestamps).

``SystemClock.now_ns`` is bound directly to :func:`time.perf_counter_ns` (no
Python wrapper in hot loops); ``FakeClock`` lets tests drive stop rules,
warm-up and windows with exact values.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import Protocol


class Clock(Protocol):
    """Anything with a monotonic ``now_ns() -> int`` (nanoseconds) and ``sleep(seconds)``."""

    def now_ns(self) -> int:  # pragma: no cover - protocol
        """Monotonic time in integer nanoseconds."""
        ...

    def sleep(self, seconds: float) -> None:  # pragma: no cover - protocol
        """Wait ``seconds`` (float, s)."""
        ...


class SystemClock:
    """The real clock: ``now_ns`` is :func:`time.perf_counter_ns` itself (monotonic, integer ns)."""

    is_fake = False

    def __init__(self) -> None:
        self.now_ns = time.perf_counter_ns
        self.sleep = time.sleep


class FakeClock:
    """A clock that only moves when told to; for exact tests of timing logic.

    Args:
        start_ns: initial reading in nanoseconds.
    """

    is_fake = True

    def __init__(self, start_ns: int = 0) -> None:
        self._t = int(start_ns)

    def now_ns(self) -> int:
        """Current fake time in integer nanoseconds."""
        return self._t

    def advance_ns(self, ns: int) -> None:
        """Move time forward by ``ns`` nanoseconds (must be >= 0).

        Raises:
            ValueError: if ``ns`` is negative (a monotonic clock never goes back).
        """
        if ns < 0:
            raise ValueError("a monotonic clock cannot go back")
        self._t += int(ns)

    def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` (float, s) instead of waiting."""
        self.advance_ns(round(seconds * 1e9))


SYSTEM_CLOCK = SystemClock()

#: CPU time of the calling thread in integer ns (:func:`time.thread_time_ns`, bound directly: no wrapper);
#: a thread waiting for the GIL or a lock does not accumulate it.
thread_cpu_ns = time.thread_time_ns


def utc_now() -> _dt.datetime:
    """The wall clock now, timezone-aware UTC: for timestamps people read (log lines), never for durations
    (those come from a :class:`Clock`'s monotonic ``now_ns``)."""
    return _dt.datetime.now(_dt.timezone.utc)


def wall_s() -> float:
    """Seconds since the epoch (:func:`time.time`): for instants other processes or machines compare (a tune
    worker's heartbeat in a shared study) and that tools report (Triton's ``last_inference``), never for durations
    (those come from a :class:`Clock`)."""
    return time.time()


def monotonic_s() -> float:
    """The system clock's monotonic reading in seconds (``SYSTEM_CLOCK.now_ns() / 1e9``): deadlines and waits of
    orchestration code (tune's time budget, a lock's wait) that runs on the real clock."""
    return SYSTEM_CLOCK.now_ns() / 1e9

