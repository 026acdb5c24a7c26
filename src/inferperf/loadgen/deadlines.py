"""Per-request deadlines for the load driver, kept by one periodic check instead of one timer per request.

``asyncio.timeout`` around every exchange arms and cancels a loop timer per request (a ``Timeout`` object, the
current task, a ``TimerHandle`` in the loop's heap, its cancellation): on uvloop that was ~22 % of the load
generator's CPU per request on a trivial endpoint (benchmarks/load_ceiling.py, issue 29), the generator's
largest Python cost. Here an exchange only records its task and send time in a dict; one watchdog task wakes
every ``tick_s`` and cancels the tasks whose exchange has run past the deadline, the way ``asyncio.timeout``
cancels (``Task.cancel``, then ``Task.uncancel`` where it is caught), so an outside cancellation is never
swallowed.

Precision: a request is declared timed out between ``timeout_s`` and ``timeout_s + tick_s`` after its send
(``tick_s`` = an eighth of the timeout, within [1 ms, 100 ms]); its sample's answer time is when that was
noticed. Requests are never cut *early*.
"""

from __future__ import annotations

import asyncio

from ..clock import Clock


def tick_for(timeout_s: float) -> float:
    """The watchdog's period for ``timeout_s``: ``timeout_s / 8`` clipped to [0.001, 0.1] s."""
    return min(max(timeout_s / 8, 0.001), 0.1)


class Deadlines:
    """In-flight exchanges by task, and the watchdog that cancels the late ones.

    Args:
        timeout_s: the per-request deadline, s (> 0).
        clock: the driver's clock (ns); the event loop must run on the same clock.

    Use: ``begin(task, sent_ns)`` before awaiting the answer, ``end(task)`` after it (in ``finally``); on a
    ``CancelledError`` there, :meth:`expired` says whether it was this deadline (the cancellation is then
    consumed) or a cancellation from outside (re-raise it). :meth:`run` is the watchdog; cancel its task at
    the step's end.
    """

    __slots__ = ("timeout_ns", "tick_s", "_clock", "_inflight", "_expired")

    def __init__(self, timeout_s: float, clock: Clock) -> None:
        self.timeout_ns = round(timeout_s * 1e9)
        self.tick_s = tick_for(timeout_s)
        self._clock = clock
        self._inflight: dict[asyncio.Task, int] = {}
        self._expired: set[asyncio.Task] = set()

    def begin(self, task: asyncio.Task, sent_ns: int) -> None:
        """``task`` now waits for an answer to a request sent at ``sent_ns``."""
        self._inflight[task] = sent_ns

    def end(self, task: asyncio.Task) -> None:
        """``task``'s exchange is over (answered, failed or cancelled)."""
        self._inflight.pop(task, None)

    def expired(self, task: asyncio.Task) -> bool:
        """Called on a ``CancelledError`` in ``task``'s exchange: True when the watchdog cancelled it and nothing
        else did (the cancellation is consumed with ``Task.uncancel``); False: re-raise it."""
        if task not in self._expired:
            return False
        self._expired.discard(task)
        return task.uncancel() == 0

    def check(self) -> int:
        """Cancel every exchange past its deadline now; returns how many."""
        late = self._clock.now_ns() - self.timeout_ns
        n = 0
        for task, sent in list(self._inflight.items()):
            if sent <= late and task not in self._expired:
                self._expired.add(task)
                task.cancel()
                n += 1
        return n

    async def run(self) -> None:
        """The watchdog: :meth:`check` every ``tick_s`` until cancelled."""
        while True:
            await asyncio.sleep(self.tick_s)
            self.check()


__all__ = ["Deadlines", "tick_for"]
