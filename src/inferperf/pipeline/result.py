"""One pipeline run -> one Result (kind ``pipeline``): ``metrics.stages`` per stage, ``run.pipeline`` for the
whole (bottleneck, twice-as-fast estimate, overhead, buffers, workers, recognised outputs).

End-to-end latency (``metrics.latency_ms``, ``samples.latency_ns``) of each completed item runs from its
intended send time (open loop: the schedule; closed loop: the send) to the last stage's return; throughput
divides completed items by the measurement window. Every field: docs/results-schema.md, "Pipeline".
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..config import ValidityOptions
from ..errors import RuntimeFailure
from ..measure.facts import model_sha256
from ..measure.speedup import sig
from ..measure.validity import verdict
from ..results.build import new_result
from ..results.model import (CaseConfig, ErrorCounts, LatencySummary, Metrics, ModelInfo, Resources, Result, Samples,
                             SessionConfig, StopConfig, SystemInfo, Throughput, Validity, WarmupConfig, Window,
                             WorkloadConfig)  # fmt: skip
from ..stats import latency_summary, percentile_notes, windows
from . import analysis as an
from .spec import PipelineSpec, model_path
from .trace import Trace


def _plain(x: Any, depth: int = 0) -> Any:
    """A JSON-able summary of a stage's output item: strings, numbers and short lists of them; arrays by shape."""
    if isinstance(x, (str, bool, int, float)) or x is None:
        return x
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return {"array": list(x.shape), "dtype": str(x.dtype)}
    if isinstance(x, dict) and depth < 2:
        return {str(k): _plain(v, depth + 1) for k, v in x.items() if not isinstance(v, (bytes, bytearray))}
    if isinstance(x, (list, tuple)) and depth < 2:
        return [_plain(v, depth + 1) for v in list(x)[:50]]
    return type(x).__name__


def _check(check: Any, outputs: list[Any], notes: list[str]) -> dict[str, Any] | None:
    """Apply the pipeline's ``check`` (final item -> {name: number}) to the kept outputs: mean and min.

    A check that raises or returns something else is noted and gives no accuracy block: the measurement
    itself stands.
    """
    if check is None or not outputs:
        return None
    vals: dict[str, list[float]] = {}
    name = getattr(check, "__name__", "check")
    for item in outputs:
        try:
            got = check(item) or {}
            if not isinstance(got, dict):
                raise TypeError(f"returned {type(got).__name__}, not a dict of numbers")
            for k, v in got.items():
                vals.setdefault(str(k), []).append(float(v))
        except Exception as e:  # noqa: BLE001 - the user's check
            notes.append(f"check {name} failed ({type(e).__name__}: {e}): no accuracy figures; fix the check"
                         f" (final item -> {{name: number}})")
            return None
    if not vals:
        return None
    return {"items": len(outputs), "mean": {k: float(np.mean(v)) for k, v in vals.items()},
            "min": {k: float(np.min(v)) for k, v in vals.items()}}


def _gil(fig: dict[str, Any], alone: dict[str, Any] | None, cpus: int) -> dict[str, Any] | None:
    """Thread stages running Python: do their threads get more than one core between them?

    ``cpu_cores`` = the stage's CPU seconds / window. GIL-limited: more than one worker on a machine with
    more than one CPU, the work is CPU work (>= 0.3 CPU seconds per wall second of service), there was
    always an item waiting (the standalone run keeps its queue full; in the pipeline, a mean occupancy >= 1),
    and yet the threads together used at most 1.1 cores. Judged on the standalone run when there is one
    (alone, no other stage competes for the CPUs). A thread waiting for the GIL accrues no CPU time
    (``time.thread_time_ns``), so the wait shows as missing cores, wherever it falls.
    """
    if fig["kind"] != "function" or fig["executor"] != "threads" or fig["cpu_per_wall"] is None:
        return None
    solo = alone if alone and alone.get("cpu_cores") is not None else None
    cores = solo["cpu_cores"] if solo else fig["cpu_cores"]
    cpw = (solo or {}).get("cpu_per_wall") or fig["cpu_per_wall"]
    backlog = bool(solo) or fig["queue"]["mean"] >= 1.0
    limited = fig["workers"] > 1 and cpus > 1 and backlog and cpw >= 0.3 and cores <= 1.1
    return {"cpu_per_wall": fig["cpu_per_wall"], "cpu_cores": fig["cpu_cores"],
            "standalone_cpu_cores": solo["cpu_cores"] if solo else None, "limited": bool(limited)}


def _stages(tr: Trace, infos: dict[str, Any], alone: dict[str, Any], cpus: int) -> dict[str, dict[str, Any]]:
    """``metrics.stages``: each stage's figures, standalone run, GIL check and backend settings."""
    out = {}
    for s, name in enumerate(tr.stages):
        fig = an.stage_figures(tr, s)
        fig["standalone"] = alone.get(name)
        fig["gil"] = _gil(fig, alone.get(name), cpus)
        fig.update(infos.get(name) or {})
        out[name] = fig
    return out


def _bottleneck_notes(name: str | None, why: str, faster: dict | None, x: float) -> list[str]:
    """The bottleneck line and, when there is one, what twice its speed would give."""
    notes = [f"bottleneck: {why}" if name else why]
    if faster and faster["items_per_s"]:
        notes.append(f"if {name!r} were twice as fast: about {sig(faster['items_per_s'])} items/s (now {sig(x)}),"
                     f" then limited by {faster['limited_by']} (estimate, Amdahl over stages)")
    return notes


def _in_service(tr: Trace, stages: dict[str, dict[str, Any]], name: str | None, x: float) -> tuple[float, list[str]]:
    """Items in service or hand-over (not waiting) at throughput ``x`` by Little's law, and the note when a closed
    loop keeps far more in flight than that."""
    svc_sum_s = sum((f["service_ms"]["mean"] + (f["handover_ms"] or {}).get("mean", 0.0)) / 1e3
                    for f in stages.values() if f["service_ms"])
    needed = x * svc_sum_s
    if tr.mode == "closed" and tr.concurrency and tr.concurrency > 2 * needed + 1 and name:
        return needed, [f"{tr.concurrency} items in flight, but at {sig(x)} items/s only {needed:.2f} are in service"
                        f" (Little's law over {1e3 * svc_sum_s:.4g} ms of service per item); the rest wait in queues."
                        f" --concurrency {math.ceil(needed) + 1} should keep {name!r} busy with latency near the"
                        f" service sum"]  # fmt: skip
    return needed, []


def _overhead(stages: dict[str, dict[str, Any]], x: float, cpu_bound: bool) -> tuple[dict[str, Any] | None, list[str]]:
    """The pipeline against its slowest stage run alone (None without standalone runs), and the note when it is
    below :data:`~inferperf.pipeline.analysis.OVERHEAD_RATIO` of it."""
    caps = {n: a["items_per_s"] for n, f in stages.items() if (a := f.get("standalone")) and a["items_per_s"]}
    if not caps:
        return None, []
    slowest = min(caps, key=caps.__getitem__)
    ratio = x / caps[slowest] if caps[slowest] else None
    hops = {n: {"queue_wait_ms": f["queue_wait_ms"]["mean"] if f["queue_wait_ms"] else None,
                "handover_ms": f["handover_ms"]["mean"] if f["handover_ms"] else 0.0,
                "hop_ms": f["hop_ms_mean"]} for n, f in stages.items()}
    overhead = {"slowest_alone": slowest, "slowest_alone_items_per_s": caps[slowest], "ratio": ratio,
                "overhead": bool(ratio is not None and ratio < an.OVERHEAD_RATIO), "hops": hops}
    if not overhead["overhead"]:
        return overhead, []
    return overhead, [f"pipeline overhead: {sig(x)} items/s is {ratio:.2f}x the slowest stage alone ({slowest!r},"
                      f" {sig(caps[slowest])} items/s): see queue wait and hand-over per hop"
                      + (" (the stages share the CPUs)" if cpu_bound else "")]


def _workers(stages: dict[str, dict[str, Any]], cpus: int) -> tuple[dict[str, Any], list[str]]:
    """Worker counts that balance the stages (:func:`~inferperf.pipeline.analysis.worker_advice` on each stage's
    service time and CPU cores per busy worker), the flags to rerun with, and the note when they differ."""
    service_s: dict[str, float] = {}
    cores_per_worker: dict[str, float] = {}
    for n, f in stages.items():
        a = f.get("standalone") or {}
        per = a.get("service_ms_mean") or (f["service_ms"] or {}).get("mean")
        if not per:
            continue
        service_s[n] = per / 1e3
        cpw = a.get("cpu_per_wall") if a.get("cpu_per_wall") is not None else f["cpu_per_wall"]
        threads = ((f.get("session") or {}).get("effective") or {}).get("intra_op_num_threads") or 1
        cores_per_worker[n] = (min(1.0, max(0.05, cpw if cpw is not None else 1.0))
                               * (threads if f["kind"] == "model" else 1))  # fmt: skip
    workers = an.worker_advice(service_s, cores_per_worker, cpus)
    changed = {n: w for n, w in workers["workers"].items() if w != stages[n]["workers"]}
    gil = [n for n, f in stages.items() if f["gil"] and f["gil"]["limited"]]
    workers["rerun"] = " ".join([*(f"--workers {n}={w}" for n, w in changed.items()),
                                 *(f"--executor {n}=processes" for n in gil)])
    if not (changed or gil):
        return workers, []
    return workers, [f"workers that balance the stages on {cpus} CPUs: {workers['rerun']} (about"
                     f" {sig(workers['items_per_s'])} items/s; rerun to check)"]


def _stage_notes(tr: Trace, stages: dict[str, dict[str, Any]]) -> list[str]:
    """Per stage: GIL-limited threads, failures, refusals, items stuck in service, inputs that cannot be copied."""
    notes = []
    for n, f in stages.items():
        if f["gil"] and f["gil"]["limited"]:
            g = f["gil"]
            got = g["standalone_cpu_cores"] if g["standalone_cpu_cores"] is not None else g["cpu_cores"]
            notes.append(f"stage {n!r}: {f['workers']} threads with items waiting got {got:.2f} cores of CPU"
                         f" between them: the GIL serialises them; use 'executor: processes'")
        if f["errors"]["count"]:
            kinds = ", ".join(f"{k} {v}" for k, v in f["errors"]["by_kind"].items())
            notes.append(f"stage {n!r} failed on {f['errors']['count']} item(s): {kinds}")
        if f["rejected"]:
            notes.append(f"queue before {n!r} (policy reject) refused {f['rejected']} item(s)")
    for n, f in stages.items():
        if f["in_service_at_end"]:
            notes.append(f"stage {n!r}: {f['in_service_at_end']} item(s) still in service when the run ended (stuck,"
                         f" or slower than --drain-timeout-s): counted busy to the end of the window")
    for n, why in tr.capture_errors.items():
        notes.append(f"stage {n!r}: its inputs cannot be copied ({why}): not measured alone")
    return notes


def _summary(tr: Trace, stages: dict[str, dict[str, Any]], system: SystemInfo, x: float,
             spec: PipelineSpec) -> tuple[dict[str, Any], list[str]]:
    """``run.pipeline``: bottleneck, twice-as-fast, overhead, buffers, workers, CPU use; and the notes."""
    cpus = system.effective_cpus
    n_window = tr.completions_in_window()
    cpu_per_item = (tr.cpu_s / n_window) if tr.cpu_s and n_window else None
    cores_used = (tr.cpu_s / (tr.window_ns / 1e9)) if tr.cpu_s is not None else None
    cpu_bound = cores_used is not None and cores_used >= 0.9 * cpus
    name, why = an.bottleneck(stages)
    rate = (tr.schedule or {}).get("rate_per_s") if tr.mode == "open" else None
    faster = an.what_if_faster(stages, name, cpus=cpus, cpu_s_per_item=cpu_per_item, concurrency=tr.concurrency,
                               rate=rate) if name else None
    notes = _bottleneck_notes(name, why, faster, x)
    needed, more = _in_service(tr, stages, name, x)
    notes += more
    if cpu_bound:
        notes.append(f"CPU-bound: the stages together used {cores_used:.2f} of {cpus} effective CPUs; a faster stage"
                     f" frees CPU for the others more than it shortens its own time")
    overhead, more = _overhead(stages, x, cpu_bound)
    notes += more
    buffers = an.buffer_advice(stages)
    workers, more = _workers(stages, cpus)
    notes += more + _stage_notes(tr, stages)
    if rate and x < 0.95 * rate:
        notes.append(f"overloaded: {sig(x)} items/s completed of the {rate:g}/s offered; queues grow and latency with"
                     f" them for as long as the run lasts")
    if tr.incomplete:
        notes.append(f"{tr.incomplete} item(s) still in flight at the drain deadline: counted incomplete")
    summary = {"name": spec.name, "bottleneck": name, "bottleneck_reason": why, "twice_as_fast": faster,
               "cpu_s_per_item": cpu_per_item, "cpu_cores_used": cores_used, "effective_cpus": cpus,
               "overhead": overhead, "buffers": buffers, "workers": workers, "mode": tr.mode,
               "concurrency": tr.concurrency, "in_service_mean": needed, "schedule": tr.schedule,
               "incomplete": tr.incomplete, "rejected": sum(1 for r in tr.measured() if r.rejected),
               "outputs": [_plain(o) for o in tr.outputs]}  # fmt: skip
    return summary, notes


def _models(spec: PipelineSpec) -> list[dict[str, Any]]:
    """The model stages' files and their sha256."""
    return [{"stage": s.name, "model": s.model, "sha256": model_sha256(model_path(s.model, spec.base_dir))}
            for s in spec.stages if s.model]


def assemble(tr: Trace, spec: PipelineSpec, opts: Any, system: SystemInfo, infos: dict[str, Any],
             alone: dict[str, Any], *, check: Any = None, command: list[str] | None = None, source: str = "",
             queue_setting: str | None = None) -> Result:
    """The Result of one run (see the module docstring); ``command`` None records none (not ``sys.argv``: the
    report then writes ``inferperf pipeline PATH`` as the command to reproduce it)."""
    done = tr.completed()
    lat = [r.done_ns - r.intended_ns for r in done]
    offs = [r.intended_ns - tr.t0_ns for r in done]
    x = tr.throughput()
    stages = _stages(tr, infos, alone, system.effective_cpus)
    summary, notes = _summary(tr, stages, system, x, spec)
    summary["queue_setting"] = queue_setting
    models = _models(spec)
    summary["models"] = models
    src = Path(source) if source else None
    text = src.read_bytes() if src and src.is_file() else spec.model_dump_json().encode()
    sha = hashlib.sha256(text + "".join(m["sha256"] for m in models).encode()).hexdigest()
    errors: dict[str, int] = {}
    for r in tr.measured():
        kind = f"{r.error[0]}:{r.error[1]}" if r.error else (f"{r.rejected}:rejected" if r.rejected else None)
        if kind:
            errors[kind] = errors.get(kind, 0) + 1
    if not lat and errors:
        first = next(iter(tr.first_errors.items()), None)
        where = f"; the first, in stage {first[0]!r}: {first[1]}" if first else ""
        raise RuntimeFailure(f"every measured item failed ({', '.join(f'{k} x{v}' for k, v in errors.items())}){where}")
    accuracy = _check(check, tr.outputs, notes)
    vopt = ValidityOptions()
    n_win = min(vopt.n_windows, len(lat) // 5)
    span = max([tr.window_ns, *(o + v for o, v in zip(offs, lat))])  # the drain's completions too
    wins = windows(offs, lat, span, n_win) if n_win >= 1 else []
    valid, reasons, vnotes = verdict(len(tr.measured()), tr.window_ns / 1e9, opts.stop.min_items,
                                     opts.stop.min_duration_s, opts.stop.max_duration_s,
                                     [w["p50_ms"] for w in wins if w["count"]], vopt.max_window_cv_percent,
                                     vopt.min_windows, sum(errors.values()))  # the stop rule counts items sent
    reasons = [x.replace("queries", "items").replace("--iterations", "--items") for x in reasons]
    if not lat:
        reasons.insert(0, "no item completed")
    if tr.incomplete:
        valid, reasons = False, [*reasons, f"{tr.incomplete} item(s) did not finish by the drain deadline"]
    open_loop = tr.mode == "open"
    scenario = "server" if open_loop else ("single-stream" if tr.concurrency == 1 else "concurrent")
    requested = {s.name: {"workers": s.workers, "executor": s.executor, "queue": spec.queue_of(s).model_dump(),
                          **({"model": s.model, "backend": s.backend, "session": s.session} if s.model else
                             {"function": s.function})} for s in spec.stages}
    requested["queue_sizes"] = tr.queue_sizes
    cfg = CaseConfig(
        backend="pipeline", session=SessionConfig(requested=requested, effective={n: i for n, i in infos.items() if i}),
        workload=WorkloadConfig(shapes={}, input_pool_size=opts.pool_size, seed=opts.seed,
                                data_source=f"generator:{spec.source.generator}" if spec.source.generator
                                else f"files:{spec.source.files}"),
        scenario=scenario, concurrency=tr.concurrency or 1, request_rate=(tr.schedule or {}).get("rate_per_s"),
        warmup=WarmupConfig(iterations=sum(1 for r in tr.items if not r.measured), duration_s=0.0),
        stop=StopConfig(min_iterations=opts.stop.min_items, min_duration_s=opts.stop.min_duration_s,
                        max_duration_s=opts.stop.max_duration_s))  # fmt: skip
    key_doc = {"config": cfg.model_dump(exclude={"warmup", "stop"}), "arrival": tr.schedule}
    rss = None
    try:
        import psutil

        rss = psutil.Process().memory_info().rss
    except Exception:  # noqa: BLE001 - resource figures are best effort
        pass
    metrics = Metrics(
        latency_ms=LatencySummary(**latency_summary(lat)) if lat else LatencySummary.empty(),
        throughput=Throughput(queries_per_s=x, samples_per_s=x, duration_s=tr.window_ns / 1e9),
        windows=[Window(**w) for w in wins],
        resources=Resources(cpu_percent_mean=100.0 * summary["cpu_cores_used"] if summary["cpu_cores_used"] is not None
                            else None, rss_peak_bytes=rss),
        errors=ErrorCounts(count=sum(errors.values()), by_kind=errors),
        accuracy=accuracy,
        client={"send_lag_ms": latency_summary(tr.send_lag_ns) if tr.send_lag_ns else None} if open_loop else None,
        stages=stages)  # fmt: skip
    return new_result(
        kind="pipeline", model_sha256=sha, key_doc=key_doc, command=command or [], system=system,
        run={"pipeline": summary},
        model=ModelInfo(path=source or spec.name, sha256=sha, size_bytes=len(text), inputs=[], outputs=[],
                        variant="pipeline"),
        config=cfg, metrics=metrics, samples=Samples(latency_ns=lat, start_offsets_ns=offs),
        validity=Validity(valid=valid, reasons=reasons, rules=vopt.model_dump()),
        notes=notes + percentile_notes(len(lat)) + vnotes)  # fmt: skip


__all__ = ["assemble"]
