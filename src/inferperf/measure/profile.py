"""``inferperf profile``, the measuring half: where the time goes, per operator, from the runtime's profiler.

One unprofiled measurement (:func:`~inferperf.measure.bench.bench`) gives the reference run time; then a
separate profiling session (same settings) runs warm-up + N runs and writes a Chrome trace; with ONNX Runtime a
short probe measures this machine's peak compute and memory bandwidth (cached). The Result is the bench Result
with ``kind = "profile"`` and a raw ``metrics.profile`` record (trace path, runs, wall time, peaks);
:func:`inferperf.analysis.profile.summarize_profile` derives the op tables from it (DESIGN: measure records,
analysis derives; measure never imports analysis).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ..clock import SYSTEM_CLOCK
from ..config import BenchConfig
from ..errors import UsageError
from ..results.model import Result
from ..system import collect_system
from .bench import bench
from .session import build_inputs, create_sessions, resolve_model


#: ORT stops recording once this many events are held (onnxruntime/core/common/profiler.h, max_num_events_).
ORT_MAX_EVENTS = 1_000_000


def events_per_run(num_nodes: int) -> int:
    """Upper estimate of trace events one run adds: 3 per node (fences + kernel) plus ~4 session events."""
    return 3 * max(num_nodes, 1) + 4


def cap_runs(requested: int, warmup: int, num_nodes: int, limit: int = ORT_MAX_EVENTS) -> int:
    """Profiled runs that fit under ORT's event cap (``limit``) after ``warmup`` runs and ~100 load events.

    Returns:
        ``min(requested, fit)``, at least 1.
    """
    fit = (limit - 100) // events_per_run(num_nodes) - warmup
    return max(1, min(requested, fit))



def _num_nodes(path: Path) -> int:
    try:
        import onnx

        return len(onnx.load(str(path), load_external_data=False).graph.node)
    except Exception:  # not ONNX-loadable here: assume a large graph (caps conservatively)
        return 2000


def _peaks(threads: int) -> dict[str, Any]:
    from ..backends.ort_probe import probe_peaks

    peaks = probe_peaks(threads)
    return {k: peaks[k] for k in ("peak_flops_per_s", "peak_bytes_per_s", "matmul_n", "copy_bytes",
                                  "threads", "cached", "path")}


def trace_prefix(trace_dir: Path) -> Path:
    """A trace file prefix unique per process and call (pid + random); ORT appends a timestamp."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    return trace_dir / f"inferperf-profile-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def profile(model: str | Path, config: BenchConfig | None = None, *, runs: int = 20, warmup: int = 3,
            trace_dir: Path | None = None, command: list[str] | None = None, roofline: bool = True) -> Result:
    """Measure ``model`` unprofiled, then profile ``runs`` runs after ``warmup``; return the raw profile Result.

    Args:
        model: ONNX path or ``zoo:NAME``.
        config: bench settings (backend onnxruntime, openvino or torch).
        runs: profiled runs wanted; capped so warm-up + runs fit ORT's one-million-event limit.
        warmup: runs set apart at the start of the trace; the first holds kernel search (shown apart).
        trace_dir: where the Chrome trace goes (default: the system temp dir).
        roofline: probe this machine's peaks through ORT (cached) for the roofline classification.

    Returns:
        a kind ``profile`` Result whose ``metrics.profile`` holds ``trace_path``, ``warmup_runs``,
        ``requested_runs``, ``measured_runs`` (after the cap), ``profiled_wall_ns`` (wall time of the measured
        runs), ``unprofiled_run_ms_mean``, ``backend`` and ``peaks`` (or None); pass it to
        :func:`inferperf.analysis.profile.summarize_profile` for the op tables.

    Raises:
        UsageError: another backend, runs < 1 or warmup < 1.
    """
    cfg = config or BenchConfig()
    if cfg.backend not in ("onnxruntime", "openvino", "torch"):
        raise UsageError(f"profile supports --backend onnxruntime, openvino or torch (got {cfg.backend})")
    if runs < 1 or warmup < 1:
        raise UsageError("profile needs --runs >= 1 and --warmup-runs >= 1 (the first run holds kernel search)")
    result = bench(model, cfg, command=command)
    plan = resolve_model(model, cfg, SYSTEM_CLOCK)
    nodes = _num_nodes(Path(plan.facts.path)) if cfg.backend == "onnxruntime" else 0
    capped = cap_runs(runs, warmup, nodes)
    if capped < runs:
        result.notes.append(f"profiled runs capped at {capped} (asked {runs}): ORT records at most 1,000,000 events")
    system = collect_system()
    sessions = create_sessions(cfg, plan, system, SYSTEM_CLOCK, None)
    try:
        workload = build_inputs(cfg, sessions.inputs, plan, system, 1)
        backend = sessions.backends[0]
        prefix = trace_prefix(trace_dir or Path(tempfile.gettempdir()))
        trace, wall_ns = backend.profile_runs(workload.feeds, capped, warmup, prefix)
        threads = backend.effective_settings().get("intra_op_num_threads") or 1
    finally:
        sessions.close()
    unprof_ms = result.metrics.latency_ms.mean if result.metrics.latency_ms else float("nan")
    peaks = _peaks(int(threads)) if roofline and cfg.backend == "onnxruntime" else None  # OpenVINO's counters carry no shapes
    result.kind = "profile"
    result.metrics.profile = {"trace_path": str(trace), "warmup_runs": warmup, "requested_runs": runs,
                              "measured_runs": capped, "profiled_wall_ns": wall_ns,
                              "unprofiled_run_ms_mean": unprof_ms, "backend": cfg.backend, "peaks": peaks}
    return result
