"""The measuring steps of one run: warm up and measure in the chosen scenario; the offline batch-1 reference.

:func:`run_scenario` runs SingleStream / Offline (one closed-loop stream) or
Concurrent (N streams: the backend's own executor when it has one, else
threads), with the resource sampler on around the measured window only, and
returns the raw samples. :func:`batch1_reference` runs a short batch-1 loop on
the same session after an Offline run, so a batch that is slower per sample
than batch 1 is said, not hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil

from ..clock import Clock
from ..config import BenchConfig
from .async_exec import measure_async
from .concurrent import measure_concurrent
from .loop import LiveState, RunCallFailed, StopRule, call_runtime, measure_stream, warm_up

#: the batch-1 reference's bounds: it stops at whichever comes first
REFERENCE_QUERIES = 50
REFERENCE_MAX_S = 2.0
REFERENCE_WARMUP = 3


@dataclass
class Measured:
    """Raw samples of one run (integer ns) and what the run's loop reported.

    Attributes:
        latency_ns, start_offsets_ns, stream_ids: one entry per completed query (stream ids empty for one stream).
        per_stream_counts: completed queries per stream.
        duration_ns: measurement wall time.
        errors: exception kind -> count of failed measured queries.
        stopped_by: ``rule`` or ``cap``.
        warmup_latency_ns: warm-up latencies, ``[0]`` the cold first inference.
        first_ns: the cold first inference.
        cpu_s: process CPU seconds (user + system) spent in the measured window.
        settings: facts to add to the effective session settings (executor, nodes by provider).
        first_error: the first exception a measured query raised (None if none did).
    """

    latency_ns: list[int]
    start_offsets_ns: list[int]
    stream_ids: list[int]
    per_stream_counts: list[int]
    duration_ns: int
    errors: dict[str, int]
    stopped_by: str
    warmup_latency_ns: list[int]
    first_ns: int
    cpu_s: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    first_error: BaseException | None = None


def _cpu_s(t: Any) -> float:
    return float(t.user + t.system)


def run_scenario(cfg: BenchConfig, backend: Any, runners: Sequence[Callable[[Any], Any]], feeds: Sequence[Any],
                 clock: Clock, live: LiveState | None, sampler: Any, shared_session: bool) -> Measured:
    """Warm up and measure ``cfg.scenario`` over ``feeds``; ``len(runners)`` streams.

    Args:
        cfg: warm-up, stop rule and scenario.
        backend: the (first) session; its ``async_executor`` and ``node_placement`` are used when present.
        runners: one runtime callable per stream.
        feeds: the input pool (split across streams).
        clock, live: the clock and the progress state.
        sampler: a started-on-enter resource sampler (context manager) or None.
        shared_session: one session serves every stream (its own executor may then be used).

    Raises:
        RunCallFailed: the runtime call failed in warm-up or the cold first inference.
    """
    proc = psutil.Process()
    streams = len(runners)
    if streams == 1:
        warm = warm_up(runners[0], feeds, clock, cfg.warmup.iterations, cfg.warmup.duration_s, live)
        cpu_before = proc.cpu_times()
        with sampler or nullcontext():
            s = measure_stream(runners[0], feeds, clock, StopRule.of(cfg.warmup, cfg.stop), live, first_feed=len(warm))
        out = Measured(s.latency_ns, s.start_offsets_ns, [], [len(s.latency_ns)], s.duration_ns, s.errors,
                       s.stopped_by, warm, warm[0], _cpu_s(proc.cpu_times()) - _cpu_s(cpu_before),
                       first_error=s.first_error)
    else:
        out = _concurrent(cfg, backend, runners, feeds, clock, live, sampler, shared_session, proc)
    placement_of = getattr(backend, "node_placement", None)  # ORT: which provider ran which nodes
    nodes = call_runtime(placement_of, feeds[0]) if placement_of else None
    if nodes:
        out.settings["nodes_by_provider"] = nodes
    return out


def _concurrent(cfg: BenchConfig, backend: Any, runners: Sequence[Callable[[Any], Any]], feeds: Sequence[Any],
                clock: Clock, live: LiveState | None, sampler: Any, shared_session: bool, proc: Any) -> Measured:
    streams = len(runners)
    t0 = clock.now_ns()
    call_runtime(runners[0], feeds[0])  # the cold first inference, alone
    first_ns = clock.now_ns() - t0
    pools = [list(feeds[k::streams]) or list(feeds) for k in range(streams)]
    marks: dict[str, Any] = {"cpu": proc.cpu_times()}
    settings: dict[str, Any] = {}
    # a backend's own executor first (OpenVINO's AsyncInferQueue), else threads around runner()
    make_executor = getattr(backend, "async_executor", None) if shared_session else None
    executor = make_executor(streams) if make_executor else None
    stop = cfg.stop
    with sampler or nullcontext():
        if executor is not None:
            settings["concurrent_executor"] = f"{executor.description} ({executor.jobs} requests)"
            c = measure_async(executor, pools, clock, StopRule.of(cfg.warmup, stop), live,
                              on_start=lambda: marks.__setitem__("cpu", proc.cpu_times()))
        else:
            c = measure_concurrent(runners, pools, clock, StopRule.of(cfg.warmup, stop), live,
                                   on_start=lambda: marks.__setitem__("cpu", proc.cpu_times()))
    warm_all = [first_ns] + [x for ws in c.warmup_latency_ns for x in ws]
    return Measured(c.latency_ns, c.start_offsets_ns, c.stream_ids, c.per_stream_counts, c.duration_ns, c.errors,
                    c.stopped_by, warm_all, first_ns, _cpu_s(proc.cpu_times()) - _cpu_s(marks["cpu"]), settings,
                    c.first_error)


def batch1_feeds(feeds: Sequence[dict[str, Any]], batch_size: int, limit: int = 64) -> list[dict[str, Any]] | None:
    """Batch-1 feeds cut from the rows of batch-``batch_size`` feeds (the same data, one row each).

    Returns:
        up to ``limit`` feeds, or None when some input's leading dim is not the batch (nothing to cut).
    """
    out: list[dict[str, Any]] = []
    for feed in feeds:
        if any(np.ndim(a) == 0 or np.shape(a)[0] != batch_size for a in feed.values()):
            return None
        for row in range(batch_size):
            out.append({k: np.ascontiguousarray(a[row:row + 1]) for k, a in feed.items()})
            if len(out) >= limit:
                return out
    return out or None


def batch1_reference(run: Callable[[Any], Any], feeds: Sequence[dict[str, Any]], batch_size: int,
                     samples_per_s: float, clock: Clock) -> tuple[dict[str, Any] | None, str | None]:
    """A short batch-1 loop on the same session, after an Offline run at ``batch_size``.

    Bounded: :data:`REFERENCE_WARMUP` warm-up calls, then :data:`REFERENCE_QUERIES` queries or
    :data:`REFERENCE_MAX_S` seconds, whichever comes first.

    Args:
        run: the session's runtime callable.
        feeds: the Offline run's input pool (batch ``batch_size`` rows per feed).
        batch_size: rows per Offline query.
        samples_per_s: the Offline run's samples/s.
        clock: the clock.

    Returns:
        ``(reference, note)``: ``reference`` is ``{"batch_size": 1, "samples_per_s", "queries", "duration_s",
        "per_sample_ratio"}`` (``per_sample_ratio`` = batch-N samples/s / batch-1 samples/s) or None
        when the session cannot run batch 1; ``note`` says why not, or that batch N is slower per sample.
    """
    ones = batch1_feeds(feeds, batch_size)
    if ones is None:
        return None, "batch-1 reference not run: an input's leading dim is not the batch"
    try:
        warm_up(run, ones, clock, REFERENCE_WARMUP, 0.0)
    except RunCallFailed as e:
        return None, f"batch-1 reference not run: this session refuses batch 1 ({str(e)[:160]})"
    s = measure_stream(run, ones, clock, StopRule(REFERENCE_WARMUP, 0.0, REFERENCE_QUERIES, 0.0, REFERENCE_MAX_S))
    if not s.latency_ns or s.duration_ns <= 0:
        return None, "batch-1 reference not run: every batch-1 query failed on this session"
    ref_sps = len(s.latency_ns) / (s.duration_ns / 1e9)
    ratio = samples_per_s / ref_sps
    ref = {
        "batch_size": 1,
        "samples_per_s": ref_sps,
        "queries": len(s.latency_ns),
        "duration_s": s.duration_ns / 1e9,
        "per_sample_ratio": ratio,
    }
    note = None
    if ratio < 1.0:
        note = (f"batch {batch_size} is slower per sample than batch 1: {samples_per_s:.1f} vs {ref_sps:.1f}"
                f" samples/s ({ratio:.2f}x, batch-1 reference of {len(s.latency_ns)} queries in this process):"
                " batching does not pay here; try a smaller --batch-size or single-stream")
    return ref, note
