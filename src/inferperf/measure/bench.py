"""``bench()``: measure one model and return a Result.

One run, in this process (:func:`run_once`): resolve the model (path or
``zoo:NAME``), batch a fixed-batch model if asked, pin CPUs if asked, create
the session(s) (timed: cold start), build the input pool, warm up (the first
call is the cold first inference), measure under the stop rule in the chosen
scenario with the resource sampler on, then derive the figures from the raw
samples. ``repeat`` > 1 (or a NUMA binding) goes through
:mod:`inferperf.measure.runner`, one fresh worker process per run.
"""

from __future__ import annotations

import datetime as _dt
import importlib
from contextlib import nullcontext
import os
import resource
import sys
from pathlib import Path
from typing import Any

import psutil

from .._version import __version__
from ..backends import check_available
from ..backends.base import create_backend
from ..clock import SYSTEM_CLOCK, Clock
from ..config import BenchConfig
from ..errors import InferperfError, MeasurementError
from ..results.io import case_key
from ..results.model import (
    CaseConfig,
    ColdStart,
    ErrorCounts,
    Metrics,
    ModelInfo,
    Placement,
    Resources,
    Result,
    Samples,
    SessionConfig,
    StopConfig,
    Throughput,
    ToolInfo,
    Validity,
    WarmupConfig,
    WorkloadConfig,
)
from ..system import collect_system
from ..workload.data import build_workload
from ..workload.signature import ModelFacts, check_model_file, inspect_model
from ..zoo import entries as zoo_entries
from ..zoo import resolve as zoo_resolve
from ..zoo import with_default_shapes
from ..zoo import zoo_name
from .assemble import summarize
from .facts import static_shapes, torch_facts
from .async_exec import measure_async
from .concurrent import measure_concurrent
from .loop import LiveState, RunCallFailed, call_runtime, measure_stream, warm_up
from .placement import node_cpus, pin
from .sampler import ResourceSampler


#: backend name -> the runtime module whose first import a fresh process pays (``runtime_import_ms``).
_RUNTIME_MODULES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "torch": "torch"}


def _map_run_error(backend_name: str, e: Exception) -> Exception:
    if isinstance(e, InferperfError):
        return e
    if backend_name == "onnxruntime":
        from ..backends.ort import map_run_error

        return map_run_error(e)
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip() and not ln.strip().startswith("Exception from")]
    return MeasurementError(f"{backend_name} failed while running: {type(e).__name__}: {(lines or [''])[0][:300]}")


def bench(
    model: str | Path,
    config: BenchConfig | None = None,
    *,
    clock: Clock | None = None,
    live: LiveState | None = None,
    command: list[str] | None = None,
    backend_kwargs: dict[str, Any] | None = None,
    on_run: Any = None,
) -> Result:
    """Measure ``model`` under ``config`` and return the Result.

    Args:
        model: an ONNX file path or ``zoo:NAME``.
        config: what to measure and how (:class:`~inferperf.config.BenchConfig`); defaults if None.
        clock: the clock for the timed loop (a FakeClock in tests); the system clock by default.
        live: progress state a display thread may read (in-process runs).
        command: argv to record as the reproducing command (default ``sys.argv``).
        backend_kwargs: extra backend arguments (the null backend's ``latencies_s``, ``inputs``).
        on_run: with repeats, called as ``on_run(case_index, round, result)`` as each run finishes
            (to save partial results).

    Returns:
        A :class:`~inferperf.results.model.Result`; with ``repeat`` > 1, one Result pooling the
        runs' samples, with run-level confidence intervals.

    Raises:
        UsageError / ModelError: bad model, flags, shapes or data (exit 2).
        RuntimeFailure / MeasurementError: the runtime or a worker failed (exit 1).
    """
    cfg = with_default_shapes(model, config or BenchConfig())  # zoo:ppocr-cls runs at 48x192 unless told
    check_available([cfg.backend], str(model))  # a missing extra or a module:function off torch: one line
    in_worker = os.environ.get("INFERPERF_WORKER") == "1"
    if cfg.repeat > 1 or (not in_worker and (cfg.placement.numa_node is not None or cfg.env)):
        from .runner import run_repeats

        return run_repeats(model, cfg, command=command, on_result=on_run)
    return run_once(model, cfg, clock=clock, live=live, command=command, backend_kwargs=backend_kwargs)


def _placement(cfg: BenchConfig, notes: list[str]) -> Placement:
    p = cfg.placement
    if p.numa_node is not None:
        bound = os.environ.get("INFERPERF_NUMACTL") == "1"
        cpus = pin(p.cpus or node_cpus(p.numa_node)) if not bound or p.cpus else sorted(os.sched_getaffinity(0))
        if not bound:
            where = f"CPUs {cpus}" if p.cpus else f"NUMA node {p.numa_node}'s CPUs"
            notes.append(f"numactl not found: pinned to {where} only, memory not bound")
        return Placement(cpus=cpus, numa_node=p.numa_node, memory_bound=bound)
    if p.cpus is not None:
        return Placement(cpus=pin(p.cpus))
    return Placement()


def run_once(
    model: str | Path,
    cfg: BenchConfig,
    *,
    clock: Clock | None = None,
    live: LiveState | None = None,
    command: list[str] | None = None,
    backend_kwargs: dict[str, Any] | None = None,
    repeat_index: int = 0,
) -> Result:
    """One measured run in this process; see :func:`bench` for arguments and errors."""
    clock = clock or SYSTEM_CLOCK
    notes: list[str] = []
    placement = _placement(cfg, notes)
    zname = zoo_name(str(model))
    path = zoo_resolve(str(model))
    if cfg.backend == "null":
        p = check_model_file(path) if Path(path).exists() or zname else None
        facts = inspect_model(p) if p else ModelFacts(path=Path(str(model)), sha256="0" * 64, size_bytes=0)
    elif cfg.backend == "torch" and not str(path).lower().endswith(".onnx"):
        facts = torch_facts(str(path))
    else:
        facts = inspect_model(path)
    if zname and zname in {e.name for e in zoo_entries() if e.kind == "onnx-light"}:
        notes.append(f"zoo:{zname} has constant weights: its outputs ignore its inputs; use it for speed only")
    batching = None
    w = cfg.workload
    phases: dict[str, float] = {}
    runtime_module = _RUNTIME_MODULES.get(cfg.backend)
    if runtime_module and runtime_module not in sys.modules:
        t_imp = clock.now_ns()  # a fresh process pays this once; reported apart from session creation
        try:
            importlib.import_module(runtime_module)
        except ImportError:
            pass  # create_backend reports it with the install command
        phases["runtime_import_ms"] = (clock.now_ns() - t_imp) / 1e6
    if cfg.backend not in ("null", "torch"):
        from .batching import make_batchable, needs_batching

        if needs_batching(facts.path, w.batch_size):
            source = facts
            batched_path, batching = make_batchable(facts.path, facts.sha256, w.batch_size, cfg.backend, cfg.session)
            facts = inspect_model(batched_path)
            notes.append(f"{source.path.name} has a fixed batch of 1; measured a verified batchable copy ({batching})")

    system = collect_system()
    streams = cfg.concurrency if cfg.scenario == "concurrent" else 1
    kwargs = dict(backend_kwargs or {})
    if cfg.backend == "null":
        kwargs.setdefault("latencies_s", [x / 1e3 for x in cfg.null_latency_ms])
        kwargs.setdefault("clock", clock)
    elif streams > 1:
        kwargs.setdefault("default_threads", max(1, system.effective_cpus // streams))
        kwargs.setdefault("concurrency", streams if cfg.session_mode == "shared" else 1)  # streams per session
    if cfg.backend == "openvino" and not w.input_data:
        kwargs.setdefault("static_shapes", static_shapes(facts.path, cfg))
    n_sessions = streams if cfg.session_mode == "per-stream" else 1
    backends = [create_backend(cfg.backend, cfg.session, **kwargs) for _ in range(n_sessions)]

    proc = psutil.Process()
    rss_before = proc.memory_info().rss
    load_ns = []
    for b in backends:
        t0 = clock.now_ns()
        b.load(facts.path)
        load_ns.append(clock.now_ns() - t0)
    phases.update(getattr(backends[0], "load_phases", dict)())
    if n_sessions > 1:
        phases["other_sessions_create_ms_mean"] = sum(load_ns[1:]) / (len(load_ns) - 1) / 1e6
    rss_after_load = proc.memory_info().rss
    backend = backends[0]
    notes.extend(backend.notes())
    inputs, outputs = backend.inputs(), backend.outputs()
    eff = backend.effective_settings()
    intra = eff.get("intra_op_num_threads")
    if isinstance(intra, int) and streams * intra > system.effective_cpus:
        notes.append(
            f"oversubscribed: {streams} stream(s) x {intra} intra-op threads > {system.effective_cpus} effective CPUs"
        )

    workload = build_workload(
        inputs,
        shapes=w.shapes,
        dims=w.dims,
        batch_size=w.batch_size,
        pool_size=w.input_pool_size * streams,
        seed=w.seed,
        int_ranges=w.int_ranges,
        values=w.values,
        index_ranges=facts.index_ranges,
        input_data=w.input_data,
        memory_bytes=system.memory_bytes,
        max_fraction_of_ram=w.max_pool_fraction_of_ram,
        force=w.force,
    )
    feeds = workload.feeds
    runners = [b.runner() for b in backends]
    if n_sessions == 1:
        runners = runners * streams
    sampler = ResourceSampler(cfg.sampler_interval_s) if cfg.sampler and not getattr(clock, "is_fake", False) else None
    cpu_before = proc.cpu_times()
    try:
        if streams == 1:
            warm = warm_up(runners[0], feeds, clock, cfg.warmup.iterations, cfg.warmup.duration_s, live)
            first_ns = warm[0]
            cpu_before = proc.cpu_times()
            with sampler or nullcontext():
                s = measure_stream(
                    runners[0], feeds, clock, cfg.stop.min_iterations, cfg.stop.min_duration_s,
                    cfg.stop.max_duration_s, live, first_feed=len(warm),
                )
            lat, starts, stream_ids, counts = s.latency_ns, s.start_offsets_ns, [], [len(s.latency_ns)]
            duration_ns, errors, stopped_by, warm_all = s.duration_ns, s.errors, s.stopped_by, warm
        else:
            t0 = clock.now_ns()
            call_runtime(runners[0], feeds[0])  # the cold first inference, alone
            first_ns = clock.now_ns() - t0
            pools = [feeds[k::streams] or feeds for k in range(streams)]
            marks: dict[str, Any] = {}
            # a backend's own executor first (OpenVINO's AsyncInferQueue), else threads around runner()
            make_executor = getattr(backend, "async_executor", None) if n_sessions == 1 else None
            executor = make_executor(streams) if make_executor else None
            with sampler or nullcontext():
                if executor is not None:
                    eff["concurrent_executor"] = f"{executor.description} ({executor.jobs} requests)"
                    c = measure_async(
                        executor, pools, clock, cfg.warmup.iterations, cfg.warmup.duration_s,
                        cfg.stop.min_iterations, cfg.stop.min_duration_s, cfg.stop.max_duration_s, live,
                        on_start=lambda: marks.__setitem__("cpu", proc.cpu_times()),
                    )
                else:
                    c = measure_concurrent(
                        runners, pools, clock, cfg.warmup.iterations, cfg.warmup.duration_s,
                        cfg.stop.min_iterations, cfg.stop.min_duration_s, cfg.stop.max_duration_s, live,
                        on_start=lambda: marks.__setitem__("cpu", proc.cpu_times()),
                    )
            cpu_before = marks.get("cpu", cpu_before)
            lat, starts, stream_ids, counts = c.latency_ns, c.start_offsets_ns, c.stream_ids, c.per_stream_counts
            duration_ns, errors, stopped_by = c.duration_ns, c.errors, c.stopped_by
            warm_all = [first_ns] + [x for ws in c.warmup_latency_ns for x in ws]
        placement_of = getattr(backend, "node_placement", None)  # ORT: which provider ran which nodes
        nodes = call_runtime(placement_of, feeds[0]) if placement_of else None
        if nodes:
            eff["nodes_by_provider"] = nodes
    except RunCallFailed as e:  # only the runtime's own call is the runtime's failure; anything else is a bug
        raise _map_run_error(cfg.backend, e.error) from e.error
    finally:
        cpu_after = proc.cpu_times()
        for b in backends:
            b.close()
    n_errors = sum(errors.values())
    if not lat:
        raise MeasurementError(
            f"every measured query failed ({', '.join(f'{k} x{v}' for k, v in errors.items())}):"
            " rerun with --debug to see the runtime error"
        )
    summary, wins, valid, reasons, snotes = summarize(lat, starts, duration_ns, cfg, n_errors, repeat_index)
    notes.extend(snotes)
    if summary.mean < 0.001 and cfg.backend != "null":
        notes.append("mean latency under 1 µs: the clock's resolution and loop overhead dominate")

    duration_s = duration_ns / 1e9
    qps = summary.count / duration_s if duration_s > 0 else 0.0
    cpu_s = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    # ru_maxrss is KiB on Linux, bytes on macOS
    rss_lifetime_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    sampled = sampler.summary() if sampler else {"rss_peak_bytes": None, "steal_percent": None}
    case = CaseConfig(
        backend=backend.name,
        session=SessionConfig(requested=backend.requested_settings(), effective=eff),
        workload=WorkloadConfig(
            shapes=workload.shapes,
            dtypes=workload.dtypes,
            batch_size=workload.batch_size,
            input_pool_size=len(feeds),
            data_source=workload.data_source,
            seed=w.seed,
            int_ranges={k: list(r) for k, r in workload.int_ranges.items()},
            values=dict(w.values),
            batching=batching,
        ),
        scenario=cfg.scenario,
        concurrency=streams,
        session_mode=cfg.session_mode,
        warmup=WarmupConfig(iterations=cfg.warmup.iterations, duration_s=cfg.warmup.duration_s),
        stop=StopConfig(**cfg.stop.model_dump()),
        placement=placement,
        env=dict(cfg.env),
        percentile_method=cfg.percentile_method,
        repeat=cfg.repeat,
    )
    return Result(
        tool=ToolInfo(version=__version__),
        created_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        command=list(command if command is not None else sys.argv),
        case_key=case_key(facts.sha256, case_key_doc(case)),
        run={"pid": os.getpid(), "repeat_index": repeat_index, "stopped_by": stopped_by},
        system=collect_system(),
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
            cold_start=ColdStart(session_create_ms=load_ns[0] / 1e6, first_inference_ms=first_ns / 1e6, phases=phases),
            latency_ms=summary,
            throughput=Throughput(
                queries_per_s=qps,
                samples_per_s=qps * workload.batch_size,
                per_stream=[k / duration_s if duration_s > 0 else 0.0 for k in counts],
                duration_s=duration_s,
            ),
            windows=wins,
            resources=Resources(
                cpu_percent_mean=100.0 * cpu_s / duration_s if duration_s > 0 else None,
                rss_peak_bytes=sampled["rss_peak_bytes"] or rss_lifetime_peak,
                steal_percent=sampled["steal_percent"],
                session_rss_delta_bytes=max(0, rss_after_load - rss_before),
            ),
            errors=ErrorCounts(count=n_errors, by_kind=dict(errors)),
        ),
        samples=Samples(
            latency_ns=lat,
            warmup_latency_ns=warm_all,
            start_offsets_ns=starts,
            stream_ids=stream_ids,
            timeline=sampler.timeline() if sampler else None,
        ),
        validity=Validity(valid=valid, reasons=reasons, rules=cfg.validity.model_dump()),
        notes=notes,
    )


def case_key_doc(case: CaseConfig) -> dict[str, Any]:
    """The part of a case config its key covers: what defines the case, not how long it was measured,
    how it is summarised, how often it was repeated, or what this machine resolved the settings to."""
    doc = case.model_dump(mode="json", exclude={"warmup", "stop", "percentile_method", "repeat"})
    doc["session"] = {"requested": doc["session"]["requested"]}
    doc["workload"].pop("batching", None)  # holds a measured difference; the model hash already differs
    src = doc["workload"].get("data_source", "")
    if src.startswith("file:"):
        doc["workload"]["data_source"] = "file" + src[src.rfind("#"):]  # the data's hash, not how its path was spelled
    if doc["placement"].get("numa_node") is not None:
        doc["placement"].pop("cpus", None)  # resolved from the node on this machine
    doc["placement"].pop("memory_bound", None)
    return doc

