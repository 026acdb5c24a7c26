"""An asyncio event loop whose time IS a :class:`~inferperf.clock.FakeClock`.

When nothing is ready, the loop jumps the clock to its next timer instead of
sleeping, so ``asyncio.sleep(0.010)`` is exactly 10 ms of fake time and tests
of batching and load generation assert exact values without waiting. Shared by
the serve batcher tests and the load-generator tests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import selectors
from collections.abc import Awaitable, Callable
from typing import Any

from inferperf.clock import FakeClock


class _JumpingSelector:
    """A selector that, instead of blocking for ``timeout``, moves the fake clock forward by it."""

    def __init__(self, clock: FakeClock) -> None:
        self._real = selectors.DefaultSelector()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[Any]:
        events = self._real.select(0)
        if not events and timeout:
            self._clock.advance_ns(round(timeout * 1e9))
        elif not events and timeout is None:
            raise RuntimeError("every task waits and no timer is set: the test would hang")
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class FakeTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is the fake clock; idle waits jump the clock to the next timer."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(_JumpingSelector(clock))  # type: ignore[arg-type]
        self._fake = clock

    def time(self) -> float:
        return self._fake.now_ns() / 1e9


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """A default executor that runs each call at once on the calling (loop) thread.

    With real worker threads, ``asyncio.to_thread(f)`` on a fake loop returns at a fake time that depends
    on real thread scheduling (the loop keeps jumping its clock while the thread waits for the GIL), so a
    value read in the thread (an RSS source) lands at a different fake time on every run. Inline, the call
    takes no fake time unless ``f`` advances the clock itself: the same samples on every run.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        f: concurrent.futures.Future = concurrent.futures.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - delivered to the awaiting coroutine, as a thread would
            f.set_exception(e)
        return f


def run_fake(clock: FakeClock, main: Callable[[], Awaitable[Any]], timeout_s: float = 60.0,
             inline_threads: bool = False) -> Any:  # fmt: skip
    """Run ``main()`` to completion on a :class:`FakeTimeLoop` (``timeout_s`` of FAKE time).

    ``inline_threads``: ``asyncio.to_thread`` calls run inline (:class:`InlineExecutor`), for tests whose
    figures must not depend on real thread scheduling; leave it off where a call must really run beside the
    loop (a blocking source the loop must not wait for).
    """
    loop = FakeTimeLoop(clock)
    if inline_threads:
        loop.set_default_executor(InlineExecutor())
    try:
        return loop.run_until_complete(asyncio.wait_for(main(), timeout=timeout_s))
    finally:
        loop.close()
