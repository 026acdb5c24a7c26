"""``bench()``: measure one model in this process and return a Result.

Flow: resolve the model (path or ``zoo:NAME``) -> read its facts (hash, opset)
-> create the backend session (timed: cold start) -> resolve shapes and build
the input pool -> warm-up (its first call is the cold first inference) ->
measured closed loop under the stop rule -> statistics, windows, validity ->
:class:`~inferperf.results.model.Result`.
"""

from __future__ import annotations

import datetime as _dt
import os
import resource
import sys
from pathlib import Path
from typing import Any

import psutil

from .. import __version__
from ..backends.base import create_backend
from ..clock import SYSTEM_CLOCK, Clock
from ..config import BenchConfig
from ..errors import InferperfError, MeasurementError, UsageError
from ..results.io import case_key
from ..results.model import (
    CaseConfig,
    ColdStart,
    ErrorCounts,
    LatencySummary,
    Metrics,
    ModelInfo,
    Resources,
    Result,
    Samples,
    SessionConfig,
    StopConfig,
    Throughput,
    ToolInfo,
    Validity,
    WarmupConfig,
    Window,
    WorkloadConfig,
)
from ..stats import latency_summary, percentile_notes, windows
from ..system import collect_system
from ..workload.data import build_workload
from ..workload.signature import ModelFacts, check_model_file, inspect_model
from ..zoo import resolve as zoo_resolve
from ..zoo import zoo_name
from .loop import LiveState, measure_stream, warm_up
from .validity import verdict


def _map_run_error(backend_name: str, e: Exception) -> Exception:
    if isinstance(e, InferperfError):
        return e
    if backend_name == "onnxruntime":
        from ..backends.ort import map_run_error

        return map_run_error(e)
    return MeasurementError(f"{backend_name} failed while running: {type(e).__name__}: {e}")


def bench(
    model: str | Path,
    config: BenchConfig | None = None,
    *,
    clock: Clock | None = None,
    live: LiveState | None = None,
    command: list[str] | None = None,
    backend_kwargs: dict[str, Any] | None = None,
) -> Result:
    """Measure ``model`` under ``config`` in this process (SingleStream) and return the Result.

    Args:
        model: an ONNX file path or ``zoo:NAME``.
        config: what to measure and how (:class:`~inferperf.config.BenchConfig`); defaults if None.
        clock: the clock for the timed loop (a FakeClock in tests); the system clock by default.
        live: progress state a display thread may read.
        command: argv to record as the reproducing command (default ``sys.argv``).
        backend_kwargs: extra backend arguments (the null backend's ``latencies_s``, ``inputs``).

    Returns:
        A :class:`~inferperf.results.model.Result` with raw samples, summary, windows and validity.

    Raises:
        UsageError / ModelError: bad model, flags, shapes or data (exit 2).
        RuntimeFailure: the runtime failed running the model (exit 1).
    """
    cfg = config or BenchConfig()
    clock = clock or SYSTEM_CLOCK
    if cfg.scenario != "single-stream" or cfg.concurrency != 1:
        raise UsageError(
            f"scenario {cfg.scenario!r} with concurrency {cfg.concurrency} is not available yet: use single-stream"
        )
    if cfg.placement.cpus is not None or cfg.placement.numa_node is not None:
        raise UsageError("placement (cpus, numa_node) is not available yet: pin with taskset or numactl instead")
    notes: list[str] = []
    zname = zoo_name(str(model))
    path = zoo_resolve(str(model))
    if cfg.backend == "null":
        p = check_model_file(path) if Path(path).exists() or zname else None
        facts = inspect_model(p) if p else ModelFacts(path=Path(str(model)), sha256="0" * 64, size_bytes=0)
    else:
        facts = inspect_model(path)
    if zname and zname in _CONSTANT_WEIGHT_MODELS():
        notes.append(f"zoo:{zname} has constant weights: its outputs ignore its inputs; use it for speed only")

    system = collect_system()
    kwargs = dict(backend_kwargs or {})
    if cfg.backend == "null":
        kwargs.setdefault("latencies_s", [x / 1e3 for x in cfg.null_latency_ms])
        kwargs.setdefault("clock", clock)
    backend = create_backend(cfg.backend, cfg.session, **kwargs)

    proc = psutil.Process()
    rss_before = proc.memory_info().rss
    t0 = clock.now_ns()
    backend.load(facts.path)
    session_create_ns = clock.now_ns() - t0
    rss_after_load = proc.memory_info().rss
    notes.extend(backend.notes())
    inputs, outputs = backend.inputs(), backend.outputs()

    w = cfg.workload
    workload = build_workload(
        inputs,
        shapes=w.shapes,
        dims=w.dims,
        batch_size=w.batch_size,
        pool_size=w.input_pool_size,
        seed=w.seed,
        int_ranges=w.int_ranges,
        values=w.values,
        index_ranges=facts.index_ranges,
        input_data=w.input_data,
        memory_bytes=system.memory_bytes,
        max_fraction_of_ram=w.max_pool_fraction_of_ram,
        force=w.force,
    )
    run = backend.runner()
    feeds = workload.feeds
    try:
        warm = warm_up(run, feeds, clock, cfg.warmup.iterations, cfg.warmup.duration_s, live)
    except Exception as e:
        raise _map_run_error(cfg.backend, e) from e

    cpu_before = proc.cpu_times()
    s = measure_stream(
        run,
        feeds,
        clock,
        cfg.stop.min_iterations,
        cfg.stop.min_duration_s,
        cfg.stop.max_duration_s,
        live,
        first_feed=len(warm),
    )
    cpu_after = proc.cpu_times()
    n_errors = sum(s.errors.values())
    if not s.latency_ns:
        raise MeasurementError(
            f"every measured query failed ({', '.join(f'{k} x{v}' for k, v in s.errors.items())}):"
            " rerun with --debug to see the runtime error"
        )
    backend.close()

    duration_s = s.duration_ns / 1e9
    summary = latency_summary(s.latency_ns, cfg.percentile_method)
    notes.extend(percentile_notes(summary["count"]))
    v = cfg.validity
    n_win = min(v.n_windows, summary["count"] // 5)
    wins = windows(s.start_offsets_ns, s.latency_ns, s.duration_ns, n_win) if n_win >= 1 and s.duration_ns else []
    valid, reasons, vnotes = verdict(
        summary["count"],
        duration_s,
        cfg.stop.min_iterations,
        cfg.stop.min_duration_s,
        cfg.stop.max_duration_s,
        [x["p50_ms"] for x in wins if x["count"]],
        v.max_window_cv_percent,
        v.min_windows,
        n_errors,
    )
    notes.extend(vnotes)
    if duration_s > 0 and summary["mean"] < 0.001 and cfg.backend != "null":
        notes.append("mean latency under 1 µs: the clock's resolution and loop overhead dominate")

    qps = summary["count"] / duration_s if duration_s > 0 else 0.0
    cpu_s = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    # ru_maxrss is KiB on Linux, bytes on macOS
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    case = CaseConfig(
        backend=backend.name,
        session=SessionConfig(requested=backend.requested_settings(), effective=backend.effective_settings()),
        workload=WorkloadConfig(
            shapes=workload.shapes,
            dtypes=workload.dtypes,
            batch_size=workload.batch_size,
            input_pool_size=len(feeds),
            data_source=workload.data_source,
            seed=w.seed,
            int_ranges={k: list(r) for k, r in workload.int_ranges.items()},
            values=dict(w.values),
        ),
        scenario=cfg.scenario,
        concurrency=cfg.concurrency,
        warmup=WarmupConfig(iterations=cfg.warmup.iterations, duration_s=cfg.warmup.duration_s),
        stop=StopConfig(**cfg.stop.model_dump()),
        placement=cfg.placement,
        percentile_method=cfg.percentile_method,
    )
    # The key covers what defines the case (requested settings, inputs, scenario), not how long it was
    # measured, how it is summarised, or what this machine resolved the settings to.
    key_doc = case.model_dump(mode="json", exclude={"warmup", "stop", "percentile_method"})
    key_doc["session"] = {"requested": key_doc["session"]["requested"]}
    return Result(
        tool=ToolInfo(version=__version__),
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        command=list(command if command is not None else sys.argv),
        case_key=case_key(facts.sha256, key_doc),
        run={"pid": os.getpid(), "repeat_index": 0, "stopped_by": s.stopped_by},
        system=system,
        model=ModelInfo(
            path=str(facts.path),
            sha256=facts.sha256,
            size_bytes=facts.size_bytes,
            opset=facts.opset,
            inputs=inputs,
            outputs=outputs,
            zoo_name=zname,
        ),
        config=case,
        metrics=Metrics(
            cold_start=ColdStart(
                session_create_ms=session_create_ns / 1e6,
                first_inference_ms=warm[0] / 1e6,
            ),
            latency_ms=LatencySummary(**summary),
            throughput=Throughput(
                queries_per_s=qps,
                samples_per_s=qps * workload.batch_size,
                per_stream=[qps],
                duration_s=duration_s,
            ),
            windows=[Window(**x) for x in wins],
            resources=Resources(
                cpu_percent_mean=100.0 * cpu_s / duration_s if duration_s > 0 else None,
                rss_peak_bytes=rss_peak,
                session_rss_delta_bytes=max(0, rss_after_load - rss_before),
            ),
            errors=ErrorCounts(count=n_errors, by_kind=dict(s.errors)),
        ),
        samples=Samples(
            latency_ns=s.latency_ns,
            warmup_latency_ns=warm,
            start_offsets_ns=s.start_offsets_ns,
        ),
        validity=Validity(valid=valid, reasons=reasons, rules=v.model_dump()),
        notes=notes,
    )


def _CONSTANT_WEIGHT_MODELS() -> set[str]:
    from ..zoo import entries

    return {e.name for e in entries() if e.kind == "onnx-light"}
