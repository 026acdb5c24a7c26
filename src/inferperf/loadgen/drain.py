"""Drain the target between the steps of a ramp or a capacity search, so a step never inherits the backlog of
the one before it (issue 23 item 3).

A step that overloaded the server leaves work behind: requests the client gave up on (timed out) that the
server still holds in its queue or in service. The next step, measured on top of that backlog, would show
the previous step's latency (an overloaded 80 req/s step followed by 50 req/s: p50 15 s at 50, 17 ms once
drained). The rule, before every step but the first:

1. the previous step has already let its in-flight requests answer or time out (bounded by ``--timeout-ms``;
   :func:`inferperf.loadgen.driver.run_step` with a kept pool) and closed its connections;
2. when the target tells how busy it is (inferperf serve's ``/metrics`` gauges ``inferperf_queue_depth`` and
   ``inferperf_inflight_requests`` of the model), wait until they read 0, polling every
   :data:`DRAIN_POLL_S`, at most :data:`DRAIN_MAX_WAIT_S` or ``--timeout-ms``, whichever is longer;
3. then a quiet period of :data:`DRAIN_QUIET_S` with nothing sent.

The outcome is recorded in the next step's ``metrics.client.drain`` (docs/results-schema.md): how long it
waited, what the gauge read before and after, and whether it confirmed an empty server (null: no gauge).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock

DRAIN_QUIET_S = 0.5
"""Seconds with nothing sent before a step, after the server's gauge read empty (or at once without one)."""
DRAIN_POLL_S = 0.1
"""Seconds between two readings of the server's busy gauge."""
DRAIN_MAX_WAIT_S = 60.0
"""Most seconds a drain waits for the gauge to read empty (or ``--timeout-ms``, whichever is longer): work the
server kept after its clients gave up can outlast their timeout."""
#: the gauges of inferperf serve summed as "requests the server still holds" for one model.
BUSY_GAUGES = ("inferperf_queue_depth", "inferperf_inflight_requests")

BusyProbe = Callable[[], Awaitable["int | None"]]
"""An async reader of how many requests the server still holds (None: it does not say)."""


def parse_busy(text: str, model: str | None) -> int | None:
    """Requests queued plus in flight for ``model`` from a Prometheus text exposition, None when the
    :data:`BUSY_GAUGES` are absent (not inferperf serve, or another version)."""
    from prometheus_client.parser import text_string_to_metric_families

    total, seen = 0.0, False
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name in BUSY_GAUGES and (model is None or s.labels.get("model") == model):
                    total, seen = total + s.value, True
    except ValueError:  # not a Prometheus exposition
        return None
    return round(total) if seen else None


def metrics_busy(url: str, model: str | None, timeout_s: float = 2.0) -> BusyProbe:
    """A :data:`BusyProbe` reading ``URL/metrics`` in a worker thread (never blocking the event loop)."""
    import httpx

    def read() -> int | None:
        try:
            r = httpx.get(url.rstrip("/") + "/metrics", timeout=timeout_s)
        except httpx.HTTPError:
            return None
        return parse_busy(r.text, model) if r.status_code == 200 else None

    async def probe() -> int | None:
        return await asyncio.to_thread(read)

    return probe


async def drain(busy: BusyProbe | None, *, max_wait_s: float, quiet_s: float = DRAIN_QUIET_S,
                poll_s: float = DRAIN_POLL_S, clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:  # fmt: skip
    """Wait until the server holds nothing (when ``busy`` can tell, at most ``max_wait_s``), then ``quiet_s``.

    Returns:
        ``{waited_s, quiet_s, server_busy_before, server_busy_after, source, drained}``: ``source``
        ``metrics`` when the gauge answered, else None; ``drained`` True/False from the gauge, None without
        one (only the quiet period then).
    """
    t0 = clock.now_ns()
    before = after = await busy() if busy is not None else None
    while after and (clock.now_ns() - t0) / 1e9 < max_wait_s:
        await asyncio.sleep(poll_s)
        after = await busy()  # type: ignore[misc]
    await asyncio.sleep(quiet_s)
    return {"waited_s": (clock.now_ns() - t0) / 1e9, "quiet_s": quiet_s, "server_busy_before": before,
            "server_busy_after": after, "source": None if before is None else "metrics",
            "drained": None if after is None else after == 0}  # fmt: skip


def drain_note(d: dict[str, Any] | None) -> str | None:
    """A Result note when the drain could not confirm an empty server, else None."""
    if not d:
        return None
    if d["drained"] is False:
        return (f"the server still held {d['server_busy_after']} request(s) after {d['waited_s']:.1f} s of drain:"
                " this step may inherit the previous one's backlog")  # fmt: skip
    return None


__all__ = ["BUSY_GAUGES", "DRAIN_MAX_WAIT_S", "DRAIN_POLL_S", "DRAIN_QUIET_S", "BusyProbe", "drain", "drain_note", "metrics_busy",
           "parse_busy"]
