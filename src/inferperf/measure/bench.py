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

import os
from pathlib import Path
from typing import Any

from ..backends import check_available
from ..clock import SYSTEM_CLOCK, Clock
from ..config import BenchConfig
from ..errors import InferperfError, MeasurementError, UsageError
from ..results.model import Placement, Result
from ..system import collect_system
from ..zoo import with_default_shapes
from .assemble import assemble, case_key_doc
from .loop import LiveState, RunCallFailed
from .placement import node_cpus, pin
from .energy import EnergyMeter, energy_block, measure_idle, unavailable_block
from .sampler import ResourceSampler
from .scenario import batch1_reference, run_scenario
from .session import build_inputs, create_sessions, resolve_model

__all__ = ["bench", "case_key_doc", "run_once"]


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
    staging: Any = None,
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
        staging: a :class:`~inferperf.measure.staged.Staging` (``--pre``/``--post``): each query runs
            pre -> model -> post, each timed; in this process only (no repeats, no NUMA binding); a ``pre``
            makes the feeds, so ``config.workload`` may not set batch size, shapes, dims or data.

    Returns:
        A :class:`~inferperf.results.model.Result`; with ``repeat`` > 1, one Result pooling the
        runs' samples, with run-level confidence intervals.

    Raises:
        UsageError / ModelError: bad model, flags, shapes or data (exit 2).
        RuntimeFailure / MeasurementError: the runtime or a worker failed (exit 1).
    """
    if staging is not None and staging.pre is not None and config is not None:
        wl = config.workload  # the user's, before the zoo's default shapes
        if wl.batch_size or wl.shapes or wl.dims or wl.input_data or wl.values or wl.int_ranges:
            raise UsageError("--pre makes the model's feeds: drop --batch-size/--shape/--dim/--input-data/--value/"
                             "--int-range (or build the batch in the pre function)")
    cfg = with_default_shapes(model, config or BenchConfig())  # zoo:ppocr-cls runs at 48x192 unless told
    check_available([cfg.backend], str(model))  # a missing extra or a module:function off torch: one line
    in_worker = os.environ.get("INFERPERF_WORKER") == "1"
    elsewhere = cfg.placement.numa_node is not None or cfg.env or cfg.allocator != "system"
    if staging is not None and (cfg.repeat > 1 or elsewhere):
        raise UsageError("--pre/--post run in this process: drop --repeat, --numa-node, --allocator and env settings")
    if cfg.repeat > 1 or (not in_worker and elsewhere):
        from .runner import run_repeats

        return run_repeats(model, cfg, command=command, on_result=on_run)
    return run_once(model, cfg, clock=clock, live=live, command=command, backend_kwargs=backend_kwargs,
                    staging=staging)


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
    staging: Any = None,
) -> Result:
    """One measured run in this process; see :func:`bench` for arguments and errors.

    Steps: pin CPUs, resolve the model, create the session(s), build the inputs, warm up and
    measure (:func:`~inferperf.measure.scenario.run_scenario`), the Offline batch-1 reference,
    assemble the Result. The caller's CPU affinity is restored when the run ends, however it ends.
    """
    clock = clock or SYSTEM_CLOCK
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        notes: list[str] = []
        placement = _placement(cfg, notes)
        plan = resolve_model(model, cfg, clock)
        notes.extend(plan.notes)
        system = collect_system()
        sessions = create_sessions(cfg, plan, system, clock, backend_kwargs)
        energy = None
        try:
            backend = sessions.backends[0]
            notes.extend(backend.notes())
            eff = backend.effective_settings()
            intra = eff.get("intra_op_num_threads")
            if isinstance(intra, int) and sessions.streams * intra > system.effective_cpus:
                notes.append(f"oversubscribed: {sessions.streams} stream(s) x {intra} intra-op threads"
                             f" > {system.effective_cpus} effective CPUs")
            workload = _workload(cfg, sessions, plan, system, staging)
            measuring = not getattr(clock, "is_fake", False)
            energy = EnergyMeter.open() if cfg.sampler and measuring else None
            idle = (measure_idle(energy, cfg.energy_idle_s, clock)
                    if energy is not None and energy.domains and cfg.energy_idle_s > 0 else None)
            sampler = ResourceSampler(cfg.sampler_interval_s, energy=energy) if energy is not None else None
            runners = sessions.runners()
            seen = backend
            if staging is not None:
                runners, seen = [staging.wrap(r) for r in runners], staging.backend(backend)
            try:
                measured = run_scenario(cfg, seen, runners, workload.feeds, clock, live, sampler,
                                        shared_session=len(sessions.backends) == 1)
                eff.update(measured.settings)
                if not measured.latency_ns and measured.first_error is not None:
                    _all_failed(cfg.backend, measured)
                reference = None if staging else _reference(cfg, runners[0], workload, measured, clock, notes)
            except RunCallFailed as e:  # only the runtime's own call is the runtime's failure; else a bug
                raise _map_run_error(cfg.backend, e.error) from e.error
        finally:
            sessions.close()
            if energy is not None:
                energy.close()
        result = assemble(cfg=cfg, plan=plan, sessions=sessions, eff=eff,
                          workload=workload, measured=measured, sampler=sampler, placement=placement,
                          notes=notes, reference=reference, command=command, repeat_index=repeat_index)
        if staging is not None:
            result.metrics.stages = staging.stages(result.metrics.latency_ms.count)
        result.metrics.energy = (
            energy_block(energy, idle, cfg.energy_idle_s, sampler.energy_window_s, result.metrics.latency_ms.count)
            if energy is not None and sampler is not None else
            unavailable_block("the resource sampler was off (--no-sampler): the counters are read with it"
                              if measuring else "a fake clock: nothing ran"))
        return result
    finally:
        if affinity is not None and os.sched_getaffinity(0) != affinity:
            os.sched_setaffinity(0, affinity)  # a library caller gets its CPUs back


def _workload(cfg: BenchConfig, sessions: Any, plan: Any, system: Any, staging: Any) -> Any:
    """The input pool: seeded synthetic feeds, or (``--pre``) the raw items the pre function turns into feeds."""
    if staging is None or staging.items is None:
        return build_inputs(cfg, sessions.inputs, plan, system, sessions.streams)
    from ..workload.data import Workload

    staging.input_names = [t.name for t in sessions.inputs]
    staging.inputs = {t.name: t for t in sessions.inputs}
    return Workload(shapes={}, dtypes={}, feeds=list(staging.items), batch_size=1, data_source=staging.source)


def _all_failed(backend_name: str, measured: Any) -> None:
    """Every measured query raised: report the first runtime error as one line (its traceback under --debug).

    Raises:
        the mapped error's class (RuntimeFailure, UsageError, MeasurementError) with the counts by kind.
    """
    first = measured.first_error
    mapped = _map_run_error(backend_name, first)
    counts = ", ".join(f"{k} x{v}" for k, v in measured.errors.items())
    raise type(mapped)(f"every measured query failed ({counts}); the first: {mapped}") from first


def _reference(cfg: BenchConfig, run: Any, workload: Any, measured: Any, clock: Clock,
               notes: list[str]) -> dict[str, Any] | None:
    """The Offline batch-1 reference (see :func:`~inferperf.measure.scenario.batch1_reference`), or None."""
    if cfg.scenario != "offline" or workload.batch_size <= 1 or not measured.latency_ns:
        return None
    sps = len(measured.latency_ns) * workload.batch_size / (measured.duration_ns / 1e9) if measured.duration_ns else 0.0
    ref, note = batch1_reference(run, workload.feeds, workload.batch_size, sps, clock)
    if note:
        notes.append(note)
    return ref
