"""The Concurrent scenario through a backend's own executor (OpenVINO's ``AsyncInferQueue``).

A backend that offers ``async_executor(jobs)`` keeps ``jobs`` requests in
flight itself; this module drives it as N closed-loop streams: the main thread
waits for a free request, reads the clock, starts the next feed on it and
returns at once; the runtime's completion callback reads the clock again.
Latency = completion callback - start (ns), so it includes the input hand-over
in ``start`` like a blocking call would. Stream ``k`` is request ``k``.
Backends without an executor use :func:`inferperf.measure.concurrent.measure_concurrent` (threads).

Executor protocol (duck-typed): ``jobs``; ``set_callback(fn)`` with
``fn(handle, userdata)``; ``idle_job() -> int`` (blocks); ``start(feed, userdata)``;
``wait_all()`` (raises a failed request's error); ``description``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..clock import Clock
from .concurrent import StreamSamples
from .loop import LiveState, RunCallFailed, StopRule, count_error


def measure_async(
    executor: Any,
    feeds: Sequence[Sequence[Any]],
    clock: Clock,
    rule: StopRule,
    live: LiveState | None = None,
    on_start: Callable[[], None] | None = None,
) -> StreamSamples:
    """Run ``executor.jobs`` closed-loop streams until the total count and duration meet the stop rule.

    Args:
        executor: the backend's executor (see the module docstring).
        feeds: one input pool per stream; request ``k`` cycles through ``feeds[k % len(feeds)]``.
        clock: the real clock (the callback runs on the runtime's threads).
        rule: per-stream warm-up (every request runs at least ``rule.warmup_iterations`` times, never counted;
            the pool is drained before measuring) and the stop rule over all streams.
        live: optional progress state.
        on_start: called once after warm-up, before measurement starts.

    Returns:
        :class:`~inferperf.measure.concurrent.StreamSamples` (stream id = request id).

    Raises:
        RunCallFailed: a request failed during warm-up (the model cannot run); the runtime's error inside.
    """
    now = clock.now_ns
    n = executor.jobs
    pools = [list(feeds[k % len(feeds)]) or list(feeds[0]) for k in range(n)]
    idx = [0] * n
    warm: list[list[int]] = [[] for _ in range(n)]
    lat: list[list[int]] = [[] for _ in range(n)]
    starts: list[list[int]] = [[] for _ in range(n)]
    last_end = [0]
    state = {"measure": False, "t_begin": 0}

    def on_done(_handle: Any, userdata: tuple[int, int]) -> None:
        t1 = now()
        k, t0 = userdata
        if state["measure"]:
            lat[k].append(t1 - t0)
            starts[k].append(t0 - state["t_begin"])
            if t1 > last_end[0]:
                last_end[0] = t1
        else:
            warm[k].append(t1 - t0)

    executor.set_callback(on_done)

    def submit() -> None:
        k = executor.idle_job()
        feed = pools[k][idx[k] % len(pools[k])]
        idx[k] += 1
        t0 = now()
        executor.start(feed, (k, t0))

    if live is not None:
        live.phase = "warmup"
    t_warm = now()
    warm_end = t_warm + int(rule.warmup_duration_s * 1e9)
    try:
        try:
            while min(idx) < rule.warmup_iterations or now() < warm_end:
                submit()
            executor.wait_all()
        except Exception as e:  # the executor's calls are the runtime's: a request that fails in warm-up
            raise RunCallFailed(e) from e
        return _measure(executor, submit, state, lat, starts, last_end, warm, now, rule, live, on_start)
    except BaseException:  # Ctrl-C / SIGTERM: let the requests in flight finish before the session closes
        try:
            executor.wait_all()
        except Exception:  # noqa: BLE001 - the interrupt or the first error is what the caller sees
            pass
        raise


def _measure(executor: Any, submit: Callable[[], None], state: dict[str, Any], lat: list[list[int]],
             starts: list[list[int]], last_end: list[int], warm: list[list[int]], now: Callable[[], int],
             rule: StopRule, live: LiveState | None, on_start: Callable[[], None] | None) -> StreamSamples:
    """The measured part of :func:`measure_async`, after warm-up drained the requests."""
    n = executor.jobs
    if on_start is not None:
        on_start()
    state["t_begin"] = t_begin = now()
    state["measure"] = True
    if live is not None:
        live.phase, live.samples, live.t0_ns = "measure", lat[0], t_begin
    min_end = t_begin + int(rule.min_duration_s * 1e9)
    max_end = t_begin + int(rule.max_duration_s * 1e9)
    out = StreamSamples()
    while True:
        try:
            submit()
        except Exception as e:  # a failed start is counted, like a failed call in a thread stream
            if count_error(out, e) >= 100 and not any(lat):
                break
        t = now()
        if t >= max_end:
            out.stopped_by = "cap"
            break
        if t >= min_end and sum(len(x) for x in lat) >= rule.min_iterations:
            break
    try:
        executor.wait_all()
    except Exception as e:  # a request that failed in flight: the runtime's error
        raise RunCallFailed(e) from e
    out.warmup_latency_ns = warm
    for k in range(n):
        out.latency_ns.extend(lat[k])
        out.start_offsets_ns.extend(starts[k])
        out.stream_ids.extend([k] * len(lat[k]))
        out.per_stream_counts.append(len(lat[k]))
    out.duration_ns = max(last_end[0] - t_begin, 0)
    if out.stopped_by == "cap" and not rule.capped(sum(out.per_stream_counts), out.duration_ns):
        out.stopped_by = "rule"
    return out
