"""Turn raw samples into the measured figures of a Result: summary, windows, validity, notes; the Result itself.

:func:`summarize` is shared by in-process runs and by the aggregation of repeated
runs, so a figure is always derived the same way from the same kind of samples.
:func:`assemble` is the last step of one run: the Result document from the run's parts.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Sequence
from typing import Any

from ..config import BenchConfig
from ..results.build import new_result
from ..results.model import (
    CaseConfig,
    ColdStart,
    ErrorCounts,
    LatencySummary,
    Metrics,
    ModelInfo,
    Placement,
    Resources,
    Result,
    Samples,
    SessionConfig,
    StopConfig,
    Throughput,
    Validity,
    WarmupConfig,
    Window,
    WorkloadConfig,
)
from ..stats import latency_summary, percentile_notes, windows
from .allocator import loaded_allocator
from .validity import verdict


def summarize(
    latency_ns: Sequence[int],
    start_offsets_ns: Sequence[int],
    duration_ns: int,
    cfg: BenchConfig,
    errors: int = 0,
    run: int = 0,
) -> tuple[LatencySummary, list[Window], bool, list[str], list[str]]:
    """Latency summary, time windows and validity verdict of one run.

    Args:
        latency_ns, start_offsets_ns: raw samples (ns), offsets from the run's start.
        duration_ns: measurement wall time (ns).
        cfg: the case config (percentile method, stop rule, validity rules).
        errors: failed queries in the run.
        run: run index recorded on each window.

    Returns:
        (summary, windows, valid, reasons, notes).
    """
    summary = latency_summary(latency_ns, cfg.percentile_method)
    notes = percentile_notes(summary["count"])
    v = cfg.validity
    n_win = min(v.n_windows, summary["count"] // 5)
    wins = windows(start_offsets_ns, latency_ns, duration_ns, n_win) if n_win >= 1 and duration_ns > 0 else []
    valid, reasons, vnotes = verdict(
        summary["count"],
        duration_ns / 1e9,
        cfg.stop.min_iterations,
        cfg.stop.min_duration_s,
        cfg.stop.max_duration_s,
        [w["p50_ms"] for w in wins if w["count"]],
        v.max_window_cv_percent,
        v.min_windows,
        errors,
    )
    return LatencySummary(**summary), [Window(run=run, **w) for w in wins], valid, reasons, notes + vnotes


def _resources(measured: Any, sampler: Any, rss_delta_bytes: int) -> Resources:
    """CPU % over the measured window; peak RSS from the sampler, else the process lifetime's (and which)."""
    duration_s = measured.duration_ns / 1e9
    # ru_maxrss is KiB on Linux, bytes on macOS; it covers the whole process life, model load included
    lifetime_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    sampled = sampler.summary() if sampler else {"rss_peak_bytes": None, "steal_percent": None}
    return Resources(
        cpu_percent_mean=100.0 * measured.cpu_s / duration_s if duration_s > 0 else None,
        rss_peak_bytes=sampled["rss_peak_bytes"] or lifetime_peak,
        rss_peak_source="sampler" if sampled["rss_peak_bytes"] else "ru_maxrss",
        steal_percent=sampled["steal_percent"],
        session_rss_delta_bytes=rss_delta_bytes,
    )


def _case(cfg: BenchConfig, backend_name: str, requested: dict[str, Any], eff: dict[str, Any], workload: Any,
          plan: Any, streams: int, placement: Placement) -> CaseConfig:
    w = cfg.workload
    return CaseConfig(
        backend=backend_name,
        session=SessionConfig(requested=requested, effective=eff),
        workload=WorkloadConfig(
            shapes=workload.shapes,
            dtypes=workload.dtypes,
            batch_size=workload.batch_size,
            input_pool_size=len(workload.feeds),
            data_source=workload.data_source,
            seed=w.seed,
            int_ranges={k: list(r) for k, r in workload.int_ranges.items()},
            values=dict(w.values),
            batching=plan.batching,
        ),
        scenario=cfg.scenario,
        concurrency=streams,
        session_mode=cfg.session_mode,
        warmup=WarmupConfig(iterations=cfg.warmup.iterations, duration_s=cfg.warmup.duration_s),
        stop=StopConfig(**cfg.stop.model_dump()),
        placement=placement,
        env=dict(cfg.env),
        allocator=cfg.allocator,
        percentile_method=cfg.percentile_method,
        repeat=cfg.repeat,
    )


def assemble(*, cfg: BenchConfig, plan: Any, sessions: Any, eff: dict[str, Any],
             workload: Any, measured: Any, sampler: Any, placement: Placement, notes: list[str],
             reference: dict[str, Any] | None, command: list[str] | None, repeat_index: int) -> Result:
    """The Result of one in-process run from its parts (see :func:`inferperf.measure.bench.run_once`).

    Args:
        plan, sessions: :class:`~inferperf.measure.session.ModelPlan`, :class:`~inferperf.measure.session.Sessions`.
        measured: :class:`~inferperf.measure.scenario.Measured` (raw samples, integer ns).
        reference: the Offline batch-1 reference, recorded as ``metrics.throughput.batch1_reference``.

    Raises:
        MeasurementError: every measured query failed.
    """
    from ..errors import MeasurementError

    m = measured
    errors = m.errors
    n_errors = sum(errors.values())
    if not m.latency_ns:
        raise MeasurementError(
            f"every measured query failed ({', '.join(f'{k} x{v}' for k, v in errors.items())}):"
            " rerun with --debug to see the runtime error"
        )
    summary, wins, valid, reasons, snotes = summarize(m.latency_ns, m.start_offsets_ns, m.duration_ns, cfg,
                                                      n_errors, repeat_index)
    notes = [*notes, *snotes]
    loaded = loaded_allocator()
    if loaded != cfg.allocator:
        notes.append(f"allocator {cfg.allocator} asked for, but this process runs {loaded} (run.allocator): the"
                     " figures are the loaded one's")
    if summary.mean < 0.001 and cfg.backend != "null":
        notes.append("mean latency under 1 µs: the clock's resolution and loop overhead dominate")
    duration_s = m.duration_ns / 1e9
    qps = summary.count / duration_s if duration_s > 0 else 0.0
    facts = plan.facts
    case = _case(cfg, sessions.name, sessions.requested, eff, workload, plan, sessions.streams, placement)
    throughput = Throughput(
        queries_per_s=qps,
        samples_per_s=qps * workload.batch_size,
        per_stream=[k / duration_s if duration_s > 0 else 0.0 for k in m.per_stream_counts],
        duration_s=duration_s,
        **({"batch1_reference": reference} if reference is not None else {}),
    )
    return new_result(
        kind="bench",
        model_sha256=facts.sha256,
        key_doc=case_key_doc(case),
        command=command,
        run={"pid": os.getpid(), "repeat_index": repeat_index, "stopped_by": m.stopped_by,
             "allocator": loaded_allocator()},
        model=ModelInfo(
            path=str(facts.path),
            sha256=facts.sha256,
            size_bytes=facts.size_bytes,
            opset=facts.opset,
            inputs=sessions.inputs,
            outputs=sessions.outputs,
            zoo_name=plan.zoo_name,
            source_sha256=plan.source_sha256,
        ),
        config=case,
        metrics=Metrics(
            cold_start=ColdStart(session_create_ms=sessions.load_ns[0] / 1e6, first_inference_ms=m.first_ns / 1e6,
                                 phases=plan.phases),
            latency_ms=summary,
            throughput=throughput,
            windows=wins,
            resources=_resources(m, sampler, sessions.rss_delta_bytes),
            errors=ErrorCounts(count=n_errors, by_kind=dict(errors)),
        ),
        samples=Samples(
            latency_ns=m.latency_ns,
            warmup_latency_ns=m.warmup_latency_ns,
            start_offsets_ns=m.start_offsets_ns,
            stream_ids=m.stream_ids,
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
    if doc.get("allocator", "system") == "system":
        doc.pop("allocator", None)  # the default: keys stay those of Results written before the knob existed
    return doc

