"""One stop request for every long command: Ctrl-C (SIGINT) and SIGTERM behave the same.

The CLI installs :func:`handle_signals` once. A signal then does one of two things:

- inside a :func:`cooperative` section (``load``: steps, soak intervals, stress, capacity search), the first
  signal only *requests* a stop (:data:`STOP`): the step in progress ends at once, keeps its partial figures
  and is written marked interrupted; no exception crosses an event loop, so no task is left pending
  ("Task was destroyed but it is pending!"). A second signal raises :class:`KeyboardInterrupt` (hard stop).
- elsewhere (``sweep``, ``tune``, ``pipeline``, ``bench``) it raises :class:`KeyboardInterrupt` where the
  main thread is, as Ctrl-C always did; those commands keep every finished run and say so.

Library code never installs handlers: it reads :data:`STOP` (``STOP.requested``) between steps, or
subscribes a callback (``STOP.subscribe``) to wake an event loop (``loop.call_soon_threadsafe``).
:class:`~inferperf.errors.Interrupted` is what a cooperative command raises at its end, with the line
that says what was kept; its exit code is 130 (SIGINT) or 143 (SIGTERM), as shells report 128 + signal.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class StopRequest:
    """A process-wide "stop soon" flag with callbacks (thread-safe; callbacks run in the signalling thread).

    ``signum``: the signal that asked (None: not requested, or asked by code).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requested = False
        self.signum: int | None = None
        self._callbacks: dict[int, Callable[[], Any]] = {}
        self._next = 0
        self._cooperative = 0

    @property
    def requested(self) -> bool:
        """True once a stop was requested."""
        return self._requested

    @property
    def signal_name(self) -> str:
        """``SIGTERM``, or ``SIGINT`` (also when no handler saw the signal: a bare KeyboardInterrupt is Ctrl-C)."""
        return signal.Signals(self.signum).name if self.signum is not None else "SIGINT"

    @property
    def exit_code(self) -> int:
        """130 for SIGINT (and a request by code), 143 for SIGTERM: 128 + the signal, as shells report it."""
        return 143 if self.signum == signal.SIGTERM else 130

    def request(self, signum: int | None = None) -> None:
        """Ask every subscriber to stop (idempotent: callbacks run once, on the first request)."""
        with self._lock:
            if self._requested:
                return
            self._requested, self.signum = True, signum
            callbacks = list(self._callbacks.values())
        for cb in callbacks:
            try:
                cb()
            except Exception:  # noqa: BLE001 - a closed loop must not stop the others from hearing it
                pass

    def subscribe(self, callback: Callable[[], Any]) -> Callable[[], None]:
        """Call ``callback()`` on the stop request (at once if already requested); returns the unsubscriber."""
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._callbacks[key] = callback
            already = self._requested
        if already:
            callback()

        def unsubscribe() -> None:
            with self._lock:
                self._callbacks.pop(key, None)

        return unsubscribe

    @property
    def cooperating(self) -> bool:
        """True inside a :func:`cooperative` section."""
        return self._cooperative > 0

    def reset(self) -> None:
        """Forget a request (tests; the CLI's :func:`main` before each command)."""
        with self._lock:
            self._requested, self.signum = False, None
            self._callbacks.clear()
            self._cooperative = 0


#: the process's stop request.
STOP = StopRequest()


@contextmanager
def cooperative() -> Iterator[StopRequest]:
    """Inside: a first SIGINT/SIGTERM requests a stop (:data:`STOP`) instead of raising KeyboardInterrupt."""
    STOP._cooperative += 1
    try:
        yield STOP
    finally:
        STOP._cooperative -= 1


@contextmanager
def deferred() -> Iterator[StopRequest]:
    """Inside: a first SIGINT/SIGTERM is held until the block ends, then raises :class:`KeyboardInterrupt`
    (outside a :func:`cooperative` section). For work a signal must not cut in half, such as a database
    commit: an exception raised inside SQLite's commit leaves the session needing a rollback, and the next
    write then fails as Optuna's ``StorageInternalError`` instead of the interrupt. A second signal still
    raises at once (hard stop). :func:`interruptible` re-opens a part of the block (a measurement)."""
    STOP._cooperative += 1
    try:
        yield STOP
    except BaseException:
        STOP._cooperative -= 1
        raise
    STOP._cooperative -= 1
    if STOP.requested and not STOP.cooperating:
        raise KeyboardInterrupt


@contextmanager
def interruptible() -> Iterator[StopRequest]:
    """Inside a :func:`deferred` block: signals raise :class:`KeyboardInterrupt` again (at once on entry when
    one was held), for the long part that holds no database transaction."""
    held, STOP._cooperative = STOP._cooperative, 0
    try:
        if STOP.requested:
            raise KeyboardInterrupt
        yield STOP
    finally:
        STOP._cooperative = held


def _on_signal(signum: int, frame: object) -> None:
    first = not STOP.requested
    if STOP.cooperating and first:
        STOP.request(signum)
        return
    if first:
        STOP.request(signum)
    raise KeyboardInterrupt


@contextmanager
def handle_signals() -> Iterator[StopRequest]:
    """Route SIGINT and SIGTERM to the stop request for the block (main thread only), restoring the
    previous handlers after. Outside a :func:`cooperative` section a signal raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield STOP
        return
    sigs = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.getsignal(s) for s in sigs}
    for s in sigs:
        signal.signal(s, _on_signal)
    try:
        yield STOP
    finally:
        for s, h in before.items():
            signal.signal(s, h)


__all__ = ["STOP", "StopRequest", "cooperative", "deferred", "handle_signals", "interruptible"]
