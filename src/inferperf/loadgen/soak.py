"""Soak (issue 13 item 6): hold ONE load for ``--soak-s`` and watch the server for leaks and drift.

One closed-loop concurrency or one open-loop rate runs for ``soak_s`` seconds
(after the usual warm-up). Every ``soak_interval_s`` the server's resident
memory is read, from its Prometheus ``/metrics`` (``process_resident_memory_bytes``)
or with psutil for ``--server-pid``. The measured span is cut into intervals
with, per interval: completions, throughput, error rate, p50/p99 (corrected
latency) and the last RSS sample. The leak verdict (:func:`inferperf.stats.leak_verdict`:
settle period, troughs of a periodic structure, level-shift check, OLS slope
with a HAC CI; flagged only when significant AND above ``leak_bytes_per_hour``
and ``leak_bytes_per_1000_requests``) and the p99 drift
(same rule; threshold 10 % of the median interval p99 per hour) go into
``metrics.client.soak`` of the single Result (format: docs/results-schema.md).
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np

from ..clock import SYSTEM_CLOCK
from ..errors import GateFailed, UsageError
from ..results.model import Result
from ..stats import drift_verdict, leak_verdict
from .driver import Closed, StepSamples, WindowRule, run_step, window_figures
from .event_loop import run as run_loop
from .options import LoadConfig
from .result import step_result
from .gen_target import read_load_target, transport_for
from .target import TargetInfo, fetch_stats

RssSource = Callable[[], "float | None"]
_RSS_RE = re.compile(r"^process_resident_memory_bytes(?:\{[^}]*\})?\s+([0-9.eE+-]+)", re.M)
#: p99 drift threshold as a fraction of the median interval p99, per hour.
DRIFT_FRACTION_PER_HOUR = 0.10
#: under this many seconds a soak is marked short: settling growth (allocator arenas, caches) can read as a leak.
SHORT_SOAK_S = 600.0


def parse_rss(text: str) -> float | None:
    """``process_resident_memory_bytes`` from Prometheus text exposition (None when absent)."""
    m = _RSS_RE.search(text)
    return float(m.group(1)) if m else None


def metrics_rss(url: str, timeout_s: float = 2.0) -> RssSource:
    """An RSS source reading ``URL/metrics`` (None when unreachable or the gauge is missing)."""

    def read() -> float | None:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout_s) as resp:
                return parse_rss(resp.read().decode("utf-8", "replace"))
        except (OSError, ValueError):
            return None

    return read


def psutil_rss(pid: int) -> RssSource:
    """An RSS source reading process ``pid`` with psutil. Raises UsageError when no such process."""
    import psutil

    try:
        proc = psutil.Process(pid)
    except psutil.Error as e:
        raise UsageError(f"--server-pid {pid}: no such process ({e}); pass the server's pid") from e

    def read() -> float | None:
        try:
            return float(proc.memory_info().rss)
        except psutil.Error:
            return None

    return read


async def _sample_rss(source: RssSource, interval_s: float, clock: Any, out: list[tuple[int, float]]) -> None:
    """Read ``source`` every ``interval_s`` (from the first read) and append ``(ns when read, bytes)`` to ``out``.

    The source blocks (an HTTP scrape of ``/metrics`` up to its timeout, a psutil read), so it runs in a
    worker thread (:func:`asyncio.to_thread`): the event loop keeps sending and timing requests meanwhile,
    and a slow scrape is never charged to the server's latency.
    """
    start, k = clock.now_ns(), 0
    while True:
        v = await asyncio.to_thread(source)
        if v is not None:
            out.append((clock.now_ns(), v))
        k += 1  # reads on a fixed grid: a slow read delays only itself (an overrun one is followed at once)
        wait_ns = start + round(k * interval_s * 1e9) - clock.now_ns()
        if wait_ns > 0:
            await asyncio.sleep(wait_ns / 1e9)


def live_interval(k: int, t_s: float, figures: dict[str, float], rss: list[tuple[int, float]], b_ns: int) -> dict:
    """The live figures of soak interval ``k`` (1-based) ending ``t_s`` into the measured span: ``interval``,
    ``t_s``, ``queries_per_s``, ``p99_ms``, ``rss_bytes`` (last sample by ``b_ns``, None without one) and
    ``rss_slope_bytes_per_hour`` (OLS slope of the RSS samples so far; None under 3). The verdict at the end
    is :func:`soak_block`'s; this line only shows the trend forming."""
    upto = [(t, v) for t, v in rss if t <= b_ns]
    slope = None
    if len(upto) >= 3 and upto[-1][0] > upto[0][0]:
        slope = float(np.polyfit([t / 3.6e12 for t, _ in upto], [v for _, v in upto], 1)[0])
    return {"interval": k, "t_s": t_s, "queries_per_s": figures["queries_per_s"], "p99_ms": figures["p99_ms"],
            "rss_bytes": upto[-1][1] if upto else None, "rss_slope_bytes_per_hour": slope}  # fmt: skip


async def soak_samples(transport: Any, mode: Any, *, soak_s: float, interval_s: float, warmup_s: float,
                       rss: RssSource | None, clock: Any = SYSTEM_CLOCK, payloads: Any = (),
                       timeout_s: float = 30.0, on_interval: Callable[[dict], Any] | None = None,
                       ) -> tuple[StepSamples, list[tuple[int, float]]]:  # fmt: skip
    """Run one step of ``soak_s`` seconds while sampling ``rss`` every ``interval_s``: (samples, [(ns, bytes)]).

    ``on_interval``: called with :func:`live_interval`'s figures as each whole interval ends (the console's
    line per interval). A stop request (Ctrl-C, SIGTERM) ends the soak early: the samples say ``interrupted``.
    """
    taken: list[tuple[int, float]] = []
    task = asyncio.ensure_future(_sample_rss(rss, interval_s, clock, taken)) if rss is not None else None
    first: list[int] = []

    def window(a: int, b: int, figures: dict[str, float]) -> None:
        first.append(first[0] if first else a)
        if on_interval is not None:
            on_interval(live_interval(len(first), (b - first[0]) / 1e9, figures, taken, b))

    try:
        rule = WindowRule(int(interval_s * 1000), 100.0, 10**9)
        s = await run_step(transport, mode, payloads=payloads, warmup_s=warmup_s, duration_s=soak_s,
                           windows=rule, timeout_s=timeout_s, clock=clock, on_window=window)  # fmt: skip
    finally:
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
    if rss is not None:
        v = rss()
        if v is not None:
            taken.append((clock.now_ns(), v))
    return s, taken


def soak_block(s: StepSamples, rss: list[tuple[int, float]], interval_s: float, *, rss_source: str | None,
               bytes_per_hour: float, bytes_per_1000_requests: float) -> dict:  # fmt: skip
    """The ``metrics.client.soak`` block: per-interval figures, RSS leak verdict, p99 drift."""
    a0, end = s.measure_start_ns, s.measure_end_ns
    step = int(interval_s * 1e9)
    done = s.done_ns
    answered = done >= 0
    intervals = []
    a = a0
    while a < end:
        b = min(a + step, end)
        f = window_figures(s, a, b)
        in_iv = answered & (done > a) & (done <= b)
        n_all = int(in_iv.sum())
        errs = int((in_iv & (s.error != 0)).sum())
        prior = [v for t, v in rss if t <= b]
        intervals.append({"t_s": (b - a0) / 1e9, "requests": int((answered & (done > a0) & (done <= b)).sum()),
                          "count": int(f["count"]), "queries_per_s": float(f["queries_per_s"]),
                          "error_rate": errs / n_all if n_all else 0.0, "p50_ms": float(f["p50_ms"]),
                          "p99_ms": float(f["p99_ms"]), "rss_bytes": prior[-1] if prior else None,
                          "partial": b - a < step})  # fmt: skip
        a = b
    block: dict[str, Any] = {"interval_s": interval_s, "duration_s": (end - a0) / 1e9, "rss_source": rss_source,
                             "intervals": intervals, "rss": None, "latency_drift": None, "verdict": "no rss source",
                             "short_soak": (end - a0) / 1e9 < SHORT_SOAK_S}
    with_rss = [iv for iv in intervals if iv["rss_bytes"] is not None]
    if len(with_rss) >= 3:
        t = [iv["t_s"] for iv in with_rss]
        block["rss"] = leak_verdict(t, [iv["rss_bytes"] for iv in with_rss], [iv["requests"] for iv in with_rss],
                                    bytes_per_hour=bytes_per_hour, bytes_per_1000_requests=bytes_per_1000_requests)
        block["verdict"] = ("leak" if block["rss"]["leak"] else "no leak") if block["rss"]["judged"] else "too few intervals"
    elif rss_source is not None:
        block["verdict"] = "too few intervals"
    lat = [iv for iv in intervals if iv["count"] > 0]
    if len(lat) >= 3:
        p99 = [iv["p99_ms"] for iv in lat]
        d = drift_verdict([iv["t_s"] for iv in lat], p99, DRIFT_FRACTION_PER_HOUR * float(np.median(p99)))
        block["latency_drift"] = {"slope_ms_per_hour": d["slope_per_hour"], "ci95_ms_per_hour": d["ci95_per_hour"],
                                  "significant": d["significant"], "drift": d["drift"]}
    return block


def soak(cfg: LoadConfig, command: list[str] | None = None, on_step: Callable[[Result], None] | None = None,
         target: TargetInfo | None = None, rss: RssSource | None = None,
         on_interval: Callable[[dict], Any] | None = None) -> list[Result]:  # fmt: skip
    """``inferperf load --soak-s N``: one Result (kind load) with ``metrics.client.soak``.

    ``on_interval``: each whole interval's live figures as it ends (:func:`live_interval`). Interrupted
    (Ctrl-C, SIGTERM), the Result holds every finished interval and the partial last one (``partial``), is
    INVALID (``metrics.client.interrupted``) and the leak gate is not applied.

    Raises:
        UsageError: no --soak-s, more than one step, --workers > 1, a missing --server-pid.
        GateFailed: ``fail_on_leak`` and the RSS growth is a leak (after ``on_step`` saw the Result).
    """
    from .run import build_mode, mark_interrupted

    if cfg.soak_s is None:
        raise UsageError("soak needs --soak-s N (seconds)")
    if len(cfg.steps) != 1:
        raise UsageError(f"--soak-s holds ONE load: pass one --concurrency or --request-rate, not {cfg.steps}")
    if not cfg.soak_interval_s > 0 or cfg.soak_interval_s * 3 > cfg.soak_s:
        raise UsageError(f"--soak-interval-s {cfg.soak_interval_s:g}: must be > 0 and at most --soak-s/3")
    if cfg.workers > 1:
        raise UsageError("--soak-s runs with --workers 1")
    mode = build_mode(cfg, cfg.steps[0])
    target = target or read_load_target(cfg)
    if rss is not None:
        source = "given"
    elif cfg.server_pid is not None:
        rss, source = psutil_rss(cfg.server_pid), "psutil"
    else:
        rss = metrics_rss(cfg.url)
        source = "metrics" if rss() is not None else None
        rss = rss if source else None
    before = fetch_stats(target)
    # the loop of any step of this mode (event_loop): an open-loop soak's sends keep microsecond waits
    s, taken = run_loop(soak_samples(transport_for(cfg), mode, soak_s=cfg.soak_s,
                                     interval_s=cfg.soak_interval_s, warmup_s=cfg.warmup_s, rss=rss,
                                     payloads=target.payloads, timeout_s=cfg.timeout_ms / 1000,
                                     on_interval=on_interval), isinstance(mode, Closed))  # fmt: skip
    after = fetch_stats(target)
    r = step_result(s, target, cfg, command, stats_before=before, stats_after=after)
    if s.interrupted:
        mark_interrupted(r, s.duration_s)
    block = soak_block(s, taken, cfg.soak_interval_s, rss_source=source, bytes_per_hour=cfg.leak_bytes_per_hour,
                       bytes_per_1000_requests=cfg.leak_bytes_per_1000_requests)  # fmt: skip
    r.metrics.client = {**(r.metrics.client or {}), "soak": block}
    r.notes.append(soak_line(block))
    if on_step is not None:
        on_step(r)
    if cfg.fail_on_leak and block["verdict"] == "leak" and not s.interrupted:
        raise GateFailed(f"--fail-on-leak: {block['rss']['reason']}")
    return [r]


def soak_line(block: dict) -> str:
    """One console line: the soak verdict."""
    line = f"soak {block['duration_s']:.0f} s, {len(block['intervals'])} intervals: {block['verdict']}"
    if block["rss"]:
        line += f" ({block['rss']['reason']})"
    if block["latency_drift"]:
        d = block["latency_drift"]
        line += f"; p99 drift {d['slope_ms_per_hour']:+.2f} ms/h" + (" (DRIFT)" if d["drift"] else "")
    if block.get("short_soak"):
        line += f"; short soak (< {SHORT_SOAK_S:.0f} s): early growth may settle, rerun longer before calling it a leak"
    return line
