"""The event loop a load step runs on: uvloop for closed loop when it is installed, asyncio's own otherwise.

uvloop (libuv; installed with ``uvicorn[standard]``, a dependency, on Linux and macOS) runs the load client's
closed loop at a lower CPU cost per request than asyncio's selector loop (BENCHMARKS.md, "Generator ceiling").
Its timers are whole milliseconds, *rounded*: a sleep under 0.5 ms returns at once and one of 0.6 ms lasts 1 ms,
so an open-loop schedule on it would send up to half a millisecond early. asyncio's selector loop rounds every
timeout *up* (epoll's milliseconds), so a scheduled send is never early; open loop (and anything with a schedule)
stays on it. A closed loop's only timers are the per-request deadlines (``--timeout-ms``), where a millisecond
does not matter.

``INFERPERF_EVENT_LOOP=asyncio`` forces asyncio's loop everywhere (to compare, or to rule uvloop out).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory(closed: bool) -> Callable[[], asyncio.AbstractEventLoop]:
    """The constructor of the loop for a step: ``uvloop.new_event_loop`` for a closed loop when uvloop imports
    (and ``INFERPERF_EVENT_LOOP`` is not ``asyncio``), else ``asyncio.new_event_loop``."""
    if closed and os.environ.get("INFERPERF_EVENT_LOOP", "").lower() != "asyncio":
        try:
            import uvloop
        except ImportError:  # Windows, PyPy, or an install without it
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio`` (recorded in the Result's transport block)."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(coro: Coroutine[Any, Any, T], closed: bool) -> T:
    """``asyncio.run(coro)`` on the loop :func:`loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory(closed)) as runner:
        return runner.run(coro)


__all__ = ["loop_factory", "loop_name", "run"]
