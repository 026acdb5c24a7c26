"""The measured span of a load step: when it starts and ends, its windows, and their stability verdict.

Three ways (the rules are :mod:`.driver`'s module docstring): a fixed ``duration_s`` (windows only report
stability), ``requests`` N (the span ends with the last answer of the N measured sends), or windows of
``interval_ms`` until :func:`.windows.is_stable` says the last ``consecutive`` agree, at most ``max_trials``.
A stop request (:data:`inferperf.interrupt.STOP`) ends the span at once. ``run`` is the driver's step state
(its clock, per-request lists, ``finished``/``until``/``figures``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np

from ..interrupt import STOP
from .deadlines import tick_for
from .samples import Closed, Open
from .windows import WindowRule, _equal, _window, is_stable


async def measure_span(run: Any, windows: WindowRule, start: int, duration_s: float | None,
                   on_window: Callable[[int, int, dict[str, float]], Any] | None,
                   cpu: Callable[[], float]) -> tuple[tuple, float]:  # fmt: skip
    """Wait out the warm-up, then run the window control until the step ends (a stop request ends it at once).

    Returns:
        ``(span, cpu_s)``: :func:`control_span`'s ``(start_ns, end_ns, windows_ns, stable)`` and the client's CPU
        seconds over the measured span.
    """
    loop = asyncio.get_running_loop()
    unsubscribe = STOP.subscribe(lambda: loop.call_soon_threadsafe(run.interrupt))
    try:
        await run.until(start)
        cpu0 = cpu()
        span = await control_span(run, windows, start, None if duration_s is None else round(duration_s * 1e9),
                              on_window)  # fmt: skip
        return span, cpu() - cpu0
    finally:
        unsubscribe()


async def control_span(run: Any, rule: WindowRule, start_ns: int, duration_ns: int | None,
                   on_window: Callable[[int, int, dict[str, float]], Any] | None = None) -> tuple:  # fmt: skip
    """Decide the measured span: fixed duration, ``requests``, or windows until stable. An interrupted step
    ends at the interrupt. ``on_window(a, b, figures)``: after each whole window of a fixed duration."""
    interval = rule.interval_ms * 1_000_000
    if run.requests is not None:
        await run.finished.wait()
        end = run.clock.now_ns() if run.interrupted else max([d for d in run.done if d >= 0] or [start_ns])
        n = max(1, (end - start_ns) // interval)
        return start_ns, end, _equal(start_ns, end, n), None
    if duration_ns is not None:
        a, ended = start_ns, False
        while on_window is not None and not ended and a + interval < start_ns + duration_ns:
            ended = await run.until(a + interval)
            if not ended:
                on_window(a, a + interval, run.figures(a, a + interval))
            a += interval
        ended = ended or await run.until(start_ns + duration_ns)
        end = max(start_ns, run.clock.now_ns()) if ended else start_ns + duration_ns
        n = max(1, (end - start_ns) // interval)
        wins = _equal(start_ns, end, n)
        return start_ns, end, wins, stability(run, wins, rule)
    wins: list[tuple[int, int]] = []
    for k in range(rule.max_trials):
        a, b = start_ns + k * interval, start_ns + (k + 1) * interval
        ended = await run.until(b)
        if ended:
            b = max(a, min(b, run.clock.now_ns()))
        wins.append((a, b))
        stable = stability(run, wins, rule)
        if stable or ended:
            break
    last = wins[-rule.consecutive:]
    return last[0][0], last[-1][1], wins, stability(run, wins, rule)


def stability(run: Any, wins: list[tuple[int, int]], rule: WindowRule) -> bool | None:
    """Whether the last ``rule.consecutive`` windows of ``wins`` (``(start_ns, end_ns)`` on the step's clock) agree
    on throughput and p99 within ``rule.stability_percentage`` (perf_analyzer's stability rule), from ``run``'s
    per-request send/answer times (ns) and error flags; None when :func:`.windows.is_stable` cannot tell yet."""
    sched, done = np.asarray(run.sched, np.int64), np.asarray(run.done, np.int64)
    err = np.asarray(run.err, np.int8)
    figs = [_window(sched, done, err, a, b) for a, b in wins]
    return is_stable(figs, rule.stability_percentage, rule.consecutive)


def start_sending(run: Any, mode: Closed | Open, t0: int,
                   tasks: set[asyncio.Task[None]]) -> tuple[asyncio.Future[Any], list[asyncio.Future[Any]]]:
    """Start the load of ``run`` (the driver's step state): closed loop, one sender per stream and a watcher that ends the step once all have
    stopped; open loop, the dispatcher that sends on ``mode.schedule`` from ``t0`` (its requests go to ``tasks``).

    Returns:
        ``(main, senders)``: the task whose end is the load's end, and the closed loop's senders (open: none).
    """
    if not isinstance(mode, Closed):
        return asyncio.ensure_future(run.dispatch(mode.schedule, t0, tasks)), []
    senders = [asyncio.ensure_future(run.closed_stream(k)) for k in range(mode.concurrency)]

    async def watch() -> None:
        await asyncio.gather(*senders, return_exceptions=True)
        run.stopping = True
        run.finished.set()

    return asyncio.ensure_future(watch()), senders


async def wind_down(run: Any, main: asyncio.Future[Any], senders: list[asyncio.Future[Any]],
                     tasks: set[asyncio.Task[None]], *, keep_connections: bool, timeout_s: float) -> None:
    """Stop sending and end every task of the step (``tasks``: the open loop's requests, read as they are then).
    With connections kept for the next step (and no stop request), in-flight requests may answer first (bounded
    by the request timeout): cancelling them would close their connections."""
    run.stopping = True
    if keep_connections and not run.interrupted:
        waiting = [t for t in (*senders, *tasks) if not t.done()]
        if waiting:
            await asyncio.wait(waiting, timeout=timeout_s + 2 * tick_for(timeout_s))  # the watchdog's lag
    for t in [main, *tasks, *senders]:
        t.cancel()
    await asyncio.gather(main, *tasks, *senders, return_exceptions=True)


__all__ = ["control_span", "measure_span", "stability", "start_sending", "wind_down"]
