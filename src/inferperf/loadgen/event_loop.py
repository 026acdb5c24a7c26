"""The event loop a load step runs on: uvloop for closed loop when it is installed, asyncio's own otherwise.

uvloop (libuv; installed with ``uvicorn[standard]``, a dependency, on Linux and macOS) runs the load client's
closed loop at a lower CPU cost per request than asyncio's selector loop (BENCHMARKS.md, "Generator ceiling").
Its timers are whole milliseconds, *rounded*: a sleep under 0.5 ms returns at once and one of 0.6 ms lasts 1 ms,
so an open-loop schedule on it would send up to half a millisecond early. asyncio's selector loop rounds every
timeout *up* (epoll takes whole milliseconds), so a scheduled send is never early but up to 1 ms late: at
2,000 req/s (a 0.5 ms gap) the send lag's p99 sat at 0.8-0.9 ms from that rounding alone (issue 29). Open loop
(and anything with a schedule) runs on asyncio's loop with :class:`PreciseEpollSelector`, whose waits are
microseconds, rounded up: never early, and late only by the kernel's timer slack (50 us by default). A closed
loop's only timer is the deadline watchdog (:mod:`.deadlines`), where a millisecond does not matter.

``INFERPERF_EVENT_LOOP=asyncio`` forces asyncio's loop everywhere (to compare, or to rule uvloop out).
"""

from __future__ import annotations

import asyncio
import os
import select
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


#: select(2) takes descriptors below FD_SETSIZE only; a loop whose epoll descriptor is above it (opened after
#: a thousand others) keeps epoll's millisecond waits.
FD_SETSIZE = 1024


if hasattr(selectors, "EpollSelector"):

    class PreciseEpollSelector(selectors.EpollSelector):
        """``selectors.EpollSelector`` whose timed waits have microsecond resolution.

        ``epoll_wait`` takes its timeout in whole milliseconds (CPython rounds up), so a 0.3 ms wait lasts
        1 ms. Here a timed wait is taken by ``select(2)`` on the epoll descriptor itself (readable as soon as
        any registered event is ready; the timeout a ``timeval``, CPython rounds it up to the microsecond),
        then the ready events are collected by ``epoll_wait`` with timeout 0: one more system call per timed
        wait, and a wait that is never early. Untimed (None) and zero waits are plain epoll.
        """

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            """As ``EpollSelector.select``; a positive ``timeout`` (s) is honoured to the microsecond."""
            if timeout is not None and timeout > 0:
                fd = self.fileno()
                if fd < FD_SETSIZE:
                    select.select([fd], [], [], timeout)
                    timeout = 0
            return super().select(timeout)

    def _precise_loop() -> asyncio.AbstractEventLoop:
        return asyncio.SelectorEventLoop(PreciseEpollSelector())

else:  # pragma: no cover - macOS, Windows: the platform's default loop
    _precise_loop = asyncio.new_event_loop


def loop_factory(closed: bool) -> Callable[[], asyncio.AbstractEventLoop]:
    """The constructor of the loop for a step: ``uvloop.new_event_loop`` for a closed loop when uvloop imports
    (and ``INFERPERF_EVENT_LOOP`` is not ``asyncio``); otherwise asyncio's selector loop on
    :class:`PreciseEpollSelector` (Linux; the platform's default loop elsewhere)."""
    if closed and os.environ.get("INFERPERF_EVENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:  # Windows, PyPy, or an install without it
            pass
        else:
            return uvloop.new_event_loop
    return _precise_loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio`` (recorded in the Result's transport block)."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(coro: Coroutine[Any, Any, T], closed: bool) -> T:
    """``asyncio.run(coro)`` on the loop :func:`loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory(closed)) as runner:
        return runner.run(coro)


__all__ = ["FD_SETSIZE", "loop_factory", "loop_name", "run"]
