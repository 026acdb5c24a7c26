"""``load(cfg)``: every step of one load run (a list of concurrencies or rates), one Result per step.

Each step reads the target's Triton statistics before and after (when it
serves them) for the server block. With ``--workers N`` a step runs in N
processes (spawned, so nothing of this process's event loop or threads is
inherited): closed loop splits the concurrency, open loop gives worker ``k``
the offsets ``k, k+N, ...`` of ONE schedule (so the rate is global), all
start at one time zero, and their raw samples are pooled exactly (arrays
concatenated, never averaged percentiles). Windows then cover a fixed span:
``--duration-s``, or 3 windows of ``--measurement-interval-ms``.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import signal
from collections.abc import Callable
from typing import Any

import numpy as np

from ..clock import SYSTEM_CLOCK
from ..errors import MeasurementError
from ..interrupt import STOP, cooperative, handle_signals
from ..measure.arrivals import from_arrival
from ..policy.arrivals import strided
from ..results.model import Result
from .drain import DRAIN_MAX_WAIT_S, DRAIN_QUIET_S, BusyProbe, drain
from .energy import StepEnergy
from .event_loop import loop_factory
from .event_loop import run as run_loop
from .driver import Closed, Open, StepSamples, WindowRule, is_stable, run_step, window_figures
from .options import LoadConfig
from .result import RATE_SHORT_FRACTION, step_result
from .target import TargetInfo, fetch_stats
from .gen_target import read_load_target, transport_for
from .transport import ConnectionPool, HttpTransport

#: seconds between "all workers ready" and time zero (connections open in it).
WORKER_START_S = 0.5


def _share(total: int, k: int, n: int) -> int:
    return total // n + (1 if k < total % n else 0)


def build_mode(cfg: LoadConfig, value: float, k: int = 0, n: int = 1) -> Closed | Open:
    """The driver mode of step ``value`` (a concurrency or a rate) for worker ``k`` of ``n``."""
    if cfg.mode == "closed":
        return Closed(_share(int(value), k, n))
    rate = value if not cfg.arrival.startswith("trace:") else None
    schedule = strided(from_arrival(cfg.arrival, rate, seed=cfg.seed, trace_speed=cfg.trace_speed), k, n)
    return Open(schedule, max_connections=max(1, -(-cfg.max_connections // n)))


def _rule(cfg: LoadConfig) -> WindowRule:
    return WindowRule(cfg.measurement_interval_ms, cfg.stability_percentage, cfg.max_trials)


async def _step(cfg: LoadConfig, payloads: list[bytes], mode: Closed | Open, duration_s: float | None,
                requests: int | None, worker_id: int = 0, start_at_ns: int | None = None) -> StepSamples:  # fmt: skip
    return await run_step(
        transport_for(cfg), mode, payloads=payloads, warmup_s=cfg.warmup_s, duration_s=duration_s,
        requests=requests, windows=_rule(cfg), timeout_s=cfg.timeout_ms / 1000, worker_id=worker_id,
        start_at_ns=start_at_ns,
    )  # fmt: skip


def _worker(cfg: LoadConfig, payloads: list[bytes], value: float, k: int, n: int, duration_s: float | None,
            requests: int | None, conn: Any) -> None:  # fmt: skip
    """Worker process: say ready, wait for time zero, run the share, send the samples back. SIGINT/SIGTERM
    (the parent forwards its own; a terminal's Ctrl-C reaches the whole group) end the share early, kept."""
    try:
        with handle_signals(), cooperative():
            mode = build_mode(cfg, value, k, n)
            conn.send("ready")
            start_at = conn.recv()
            step = _step(cfg, payloads, mode, duration_s, requests, k, start_at)
            conn.send(run_loop(step, isinstance(mode, Closed)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent as one line
        conn.send(MeasurementError(f"load worker {k} failed: {type(e).__name__}: {e}"))
    finally:
        conn.close()


def pool_samples(parts: list[StepSamples], rule: WindowRule) -> StepSamples:
    """Pool workers' raw samples exactly: arrays concatenated (error codes remapped to one kind list), the
    measured span the overlap of theirs, windows re-cut over it, CPU and connections summed."""
    kinds = [""] + sorted({k for p in parts for k in p.error_kinds if k})
    remap = [np.asarray([kinds.index(k) for k in p.error_kinds], np.int8) for p in parts]
    cat = lambda f: np.concatenate([getattr(p, f) for p in parts])  # noqa: E731
    by_send = parts[0].by_send  # requests N: every worker's sends count (union); else the common span
    starts, ends = [p.measure_start_ns for p in parts], [p.measure_end_ns for p in parts]
    a, b = (min(starts), max(ends)) if by_send else (max(starts), min(ends))
    n = max(1, len(parts[0].windows_ns))
    edges = [a + (b - a) * i // n for i in range(n + 1)]
    first = parts[0]
    pooled = StepSamples(
        mode=first.mode, concurrency=sum(p.concurrency or 0 for p in parts) or None,
        schedule={k: v for k, v in (first.schedule or {}).items() if k not in ("worker", "workers")} or None,
        scheduled_ns=cat("scheduled_ns"), sent_ns=cat("sent_ns"), done_ns=cat("done_ns"), status=cat("status"),
        first_ns=cat("first_ns") if all(p.first_ns is not None for p in parts) else None,
        error=np.concatenate([r[p.error] for r, p in zip(remap, parts, strict=True)]), worker=cat("worker"),
        error_kinds=kinds, t0_ns=min(p.t0_ns for p in parts), measure_start_ns=a, measure_end_ns=b,
        windows_ns=list(zip(edges[:-1], edges[1:], strict=True)),
        client_cpu_s=sum(p.client_cpu_s for p in parts), client_span_s=sum(p.duration_s for p in parts),
        connections_peak=sum(p.connections_peak for p in parts),
        connections_ran_out=sum(p.connections_ran_out for p in parts),
        max_connections=sum(p.max_connections for p in parts), workers=len(parts), transport=first.transport,
        by_send=by_send, counted=cat_mask(parts) if by_send else None,
        rejection=next((p.rejection for p in parts if p.rejection), None),
        lost=next((p.lost for p in parts if p.lost), None),
        error_examples={k: v for p in reversed(parts) for k, v in p.error_examples.items()},
        interrupted=any(p.interrupted for p in parts),
        streams=[x for p in parts for x in (p.streams or [None] * p.done_ns.size)] if any(p.streams for p in parts)
        else None,
    )  # fmt: skip
    pooled.stable = is_stable([window_figures(pooled, x, y) for x, y in pooled.windows_ns],
                              rule.stability_percentage, rule.consecutive)  # fmt: skip
    return pooled


def cat_mask(parts: list[StepSamples]) -> np.ndarray:
    """Each worker's own measured mask, concatenated (``requests`` N: exactly the N each worker sent after
    its own warm-up, whatever microseconds their time zeros differ by)."""
    return np.concatenate([p.measured() for p in parts])


def workers_for(cfg: LoadConfig, value: float) -> int:
    """Processes a step runs in: ``cfg.workers``, but in closed loop at most one per stream (a worker given
    no stream would measure an empty span, and the pooled span is the overlap of theirs)."""
    return max(1, min(cfg.workers, int(value))) if cfg.mode == "closed" else cfg.workers


def run_workers(cfg: LoadConfig, payloads: list[bytes], value: float) -> StepSamples:
    """One step over :func:`workers_for` processes, pooled.

    Raises:
        MeasurementError: a worker failed or did not answer.
    """
    n = workers_for(cfg, value)
    duration = cfg.duration_s
    if duration is None and cfg.requests is None:
        duration = 3 * cfg.measurement_interval_ms / 1000
    ctx = mp.get_context("spawn")
    pipes: list[Any] = []
    procs: list[Any] = []
    forward = STOP.subscribe(lambda: [os.kill(p.pid, signal.SIGINT) for p in procs if p.pid and p.is_alive()])
    try:
        for k in range(n):
            reqs = None if cfg.requests is None else _share(cfg.requests, k, n)
            here, there = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(cfg, payloads, value, k, n, duration, reqs, there), daemon=True)
            p.start()
            there.close()
            pipes.append(here)
            procs.append(p)
        for c in pipes:
            _expect(c, 120.0, "ready")
        start_at = SYSTEM_CLOCK.now_ns() + round(WORKER_START_S * 1e9)
        for c in pipes:
            c.send(start_at)
        limit = cfg.warmup_s + (duration or 0) + cfg.timeout_ms / 1000 + 60.0
        parts = [_expect(c, limit, "samples") for c in pipes]
    finally:
        forward()
        for p in procs:
            p.join(5.0)
            if p.is_alive():
                p.kill()
    return pool_samples(parts, _rule(cfg))


def _expect(conn: Any, timeout_s: float, what: str) -> Any:
    if not conn.poll(timeout_s):
        raise MeasurementError(f"a load worker sent no {what} within {timeout_s:.0f} s")
    try:
        msg = conn.recv()
    except EOFError:
        raise MeasurementError(f"a load worker died before sending its {what}") from None
    if isinstance(msg, BaseException):
        raise msg
    return msg


class KeptConnections:
    """One event loop and one :class:`~inferperf.loadgen.transport.ConnectionPool` kept across the sequential
    steps of ``--stress`` and ``--find-max-rate``, and the drain between them (:mod:`.drain`): after each step
    its in-flight requests answer or time out (bounded by ``--timeout-ms``) and its connections are closed;
    before every step but the first the target is drained (its busy gauge read empty when it has one, then a
    quiet period), so no step inherits the previous one's backlog. With ``--workers`` the steps run in fresh
    processes and only the drain applies. Use as a context manager; closing closes the connections.

    Args:
        url: the target (an :class:`HttpTransport` to it), unless ``transport`` is given.
        transport: where requests go instead (a ``SimulatedServer`` in tests).
        loop: the event loop to run on (default a new one; a fake-time loop in tests).
        clock: the clock that loop runs on.
        busy: how many requests the server still holds (:func:`.drain.metrics_busy`), None if it cannot tell.
        quiet_s: the quiet period of each drain, s.
    """

    def __init__(self, url: str | None = None, *, transport: Any = None, loop: asyncio.AbstractEventLoop | None = None,
                 clock: Any = SYSTEM_CLOCK, busy: BusyProbe | None = None, quiet_s: float = DRAIN_QUIET_S) -> None:  # fmt: skip
        self.loop = loop or loop_factory(closed=False)()  # steps with schedules: microsecond waits
        self.pool = ConnectionPool(transport or HttpTransport(str(url)), 1)
        self.clock, self.busy, self.quiet_s = clock, busy, quiet_s
        self.steps = 0

    async def _step(self, cfg: LoadConfig, payloads: list[bytes], mode: Closed | Open) -> StepSamples:
        self.pool.peak, self.pool.ran_out = self.pool.count, 0  # per-step figures
        return await run_step(self.pool.transport, mode, payloads=payloads, warmup_s=cfg.warmup_s,
                              duration_s=cfg.duration_s, requests=cfg.requests, windows=_rule(cfg),
                              timeout_s=cfg.timeout_ms / 1000, pool=self.pool, clock=self.clock)  # fmt: skip

    def drain(self, cfg: LoadConfig) -> dict[str, Any] | None:
        """Before a step: drain the target (None before the first step: nothing to drain)."""
        if self.steps == 0:
            return None
        wait_s = max(DRAIN_MAX_WAIT_S, cfg.timeout_ms / 1000)
        task = self.loop.create_task(drain(self.busy, max_wait_s=wait_s, quiet_s=self.quiet_s, clock=self.clock))
        stop = STOP.subscribe(lambda: self.loop.call_soon_threadsafe(task.cancel))  # Ctrl-C: no step follows
        try:
            return self.loop.run_until_complete(task)
        except asyncio.CancelledError:
            return None
        finally:
            stop()

    def samples(self, cfg: LoadConfig, payloads: list[bytes], value: float) -> StepSamples:
        """One step's samples on this loop; its connections are closed once its in-flight requests are done."""
        try:
            return self.loop.run_until_complete(self._step(cfg, payloads, build_mode(cfg, value)))
        finally:
            self.pool.close()

    def stepped(self) -> None:
        """Count one step run (in this process or in workers): the next one is drained first."""
        self.steps += 1

    def __enter__(self) -> KeptConnections:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.close()
        self.loop.run_until_complete(_settle(asyncio.all_tasks(self.loop)))  # transports close, no task pending
        self.loop.close()


async def _settle(tasks: set[asyncio.Task[Any]]) -> None:
    """Cancel and await ``tasks`` (left by a hard stop: a second Ctrl-C), then let closing transports run."""
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0)


def run_one(cfg: LoadConfig, target: TargetInfo, value: float, command: list[str] | None = None,
            kept: KeptConnections | None = None) -> Result:
    """One step at ``value`` (concurrency or rate): samples, then its Result with the server block.

    ``kept``: the run's :class:`KeptConnections`: the target is drained before the step, which runs on its
    loop (single process) or in workers (``--workers``).
    """
    drained = kept.drain(cfg) if kept is not None else None
    sequences = target.payloads if getattr(target.payloads, "per_stream", False) else None
    if sequences is not None:
        sequences.reset()  # every stream starts a new sequence in this step
    before = fetch_stats(target)
    n = workers_for(cfg, value)
    energy = StepEnergy(target.url, cfg.energy_idle_s)
    try:
        with energy.metering():
            if n > 1:
                s = run_workers(cfg, target.payloads, value)
            elif kept is not None:
                s = kept.samples(cfg, target.payloads, value)
            else:
                mode = build_mode(cfg, value)
                step = _step(cfg, target.payloads, mode, cfg.duration_s, cfg.requests)
                s = run_loop(step, isinstance(mode, Closed))
        energy_doc = energy.block(s.status)
    finally:
        energy.close()
    if kept is not None:
        kept.stepped()
    s.drain = drained
    after = fetch_stats(target)
    r = step_result(s, target, cfg, command, stats_before=before, stats_after=after)
    r.metrics.energy = energy_doc
    if s.interrupted:
        mark_interrupted(r, s.duration_s)
    if sequences is not None:  # a sequence model: how many sequences the step's requests belonged to
        r.metrics.client = {**(r.metrics.client or {}), "sequences": sequences.counts()}
    if n < cfg.workers:
        r.notes.append(f"--workers {cfg.workers} at concurrency {int(value)}: {n} worker process(es) ran, one per"
                       " stream")  # fmt: skip
    return r


def load(cfg: LoadConfig, command: list[str] | None = None,
         on_step: Callable[[Result], None] | None = None, target: TargetInfo | None = None) -> list[Result]:  # fmt: skip
    """Run every step of ``cfg`` against its target; one Result (kind ``load``) per step, in order.

    Args:
        cfg: settings (``concurrency`` steps for closed loop, ``request_rate`` for open loop).
        command: argv recorded in each Result.
        on_step: called with each Result as soon as its step ends (print, write).
        target: an already read target (default: :func:`~.gen_target.read_load_target`).

    Raises:
        UsageError: unreachable target, unknown model, bad payload settings (before any load).
        MeasurementError: a worker process failed.
    """
    build_mode(cfg, cfg.steps[0])  # a bad trace file or rate is a usage error before any request
    owned = target is None  # read here: released here (--shared-memory system's regions)
    target = target or read_load_target(cfg)
    out = []
    try:
        for value in cfg.steps:
            if STOP.requested:
                break  # Ctrl-C / SIGTERM: the steps so far are written; the caller says what was kept
            r = run_one(cfg, target, value, command)
            out.append(r)
            if on_step is not None:
                on_step(r)
            if (r.metrics.client or {}).get("target_lost") or (r.metrics.client or {}).get("rejected"):
                break  # the target died, or refuses the requests themselves: later steps would only measure refusals
    finally:
        if owned:
            target.close()
    return out


def mark_interrupted(r: Result, measured_s: float) -> Result:
    """Mark a step that Ctrl-C or SIGTERM ended early: INVALID, ``metrics.client.interrupted`` true; its
    figures are those of the ``measured_s`` seconds it measured."""
    r.validity.valid = False
    r.validity.reasons.append(f"interrupted ({STOP.signal_name}) after {measured_s:.1f} s measured: partial figures")
    r.metrics.client = {**(r.metrics.client or {}), "interrupted": True}
    return r


def rate_short(r: Result) -> bool:
    """True when an open-loop step's achieved rate fell below 95 % of the rate its schedule asked in the
    measured span (``scheduled_rate``: a Poisson span varies around the nominal rate) (``--strict-rate``)."""
    c = r.metrics.client or {}
    due = c.get("scheduled_rate") or c.get("target_rate")
    return bool(c.get("target_rate")) and bool(due) and c.get("achieved_rate", 0.0) < RATE_SHORT_FRACTION * due


__all__ = ["build_mode", "load", "mark_interrupted", "pool_samples", "rate_short", "run_one", "run_workers"]
