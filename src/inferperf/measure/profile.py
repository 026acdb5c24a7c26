"""``inferperf profile``: where the time goes, per operator, from ONNX Runtime's profiler.

One unprofiled measurement (:func:`~inferperf.measure.bench.bench`) gives the reference run time; then a
separate profiling session (same settings) runs warm-up + N runs, and its Chrome trace is parsed by
:func:`inferperf.analysis.profile.op_profile`. The Result is the bench Result with ``kind = "profile"`` and a
``metrics.profile`` block (docs/results-schema.md).
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from ..analysis.profile import cap_runs, op_profile, overhead_flag
from ..analysis.roofline import ROUGHNESS, classify
from ..clock import SYSTEM_CLOCK
from ..config import BenchConfig
from ..errors import UsageError
from ..results.model import Result
from ..system import collect_system
from .bench import bench
from .session import build_inputs, create_sessions, resolve_model


def _num_nodes(path: Path) -> int:
    try:
        import onnx

        return len(onnx.load(str(path), load_external_data=False).graph.node)
    except Exception:  # not ONNX-loadable here: assume a large graph (caps conservatively)
        return 2000


def _add_roofline(prof: dict[str, Any], threads: int) -> None:
    from ..backends.ort_probe import probe_peaks

    peaks = probe_peaks(threads)
    prof["peaks"] = {k: peaks[k] for k in ("peak_flops_per_s", "peak_bytes_per_s", "matmul_n", "copy_bytes",
                                            "threads", "cached", "path")}
    prof["roofline"] = classify(prof["nodes"], peaks["peak_flops_per_s"], peaks["peak_bytes_per_s"])
    prof["roofline_note"] = ROUGHNESS


def trace_prefix(trace_dir: Path) -> Path:
    """A trace file prefix unique per process and call (pid + random); ORT appends a timestamp."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    return trace_dir / f"inferperf-profile-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def profile(model: str | Path, config: BenchConfig | None = None, *, runs: int = 20, warmup: int = 3,
            trace_dir: Path | None = None, top: int = 10, command: list[str] | None = None,
            roofline: bool = True) -> Result:
    """Measure ``model`` unprofiled, then profile ``runs`` runs after ``warmup`` and return a profile Result.

    Args:
        model: ONNX path or ``zoo:NAME``.
        config: bench settings (backend must be onnxruntime).
        runs: profiled runs wanted; capped so warm-up + runs fit ORT's one-million-event limit.
        warmup: runs set apart at the start of the trace; the first holds kernel search (shown apart).
        trace_dir: where the Chrome trace goes (default: the system temp dir).
        top: nodes listed.
        roofline: probe this machine's peaks through ORT (cached) and classify the top nodes.

    Raises:
        UsageError: a backend other than onnxruntime, runs < 1.
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
    notes: list[str] = []
    if capped < runs:
        notes.append(f"profiled runs capped at {capped} (asked {runs}): ORT records at most 1,000,000 events")
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
    events = json.loads(trace.read_text())
    prof: dict[str, Any] = op_profile(events, skip_runs=warmup, top=top)
    if prof["dropped_partial_runs"]:
        notes.append(f"{prof['dropped_partial_runs']} partial run(s) at the end of the trace dropped (event cap)")
    unprof_ms = result.metrics.latency_ms.mean if result.metrics.latency_ms else float("nan")
    ratio, note = overhead_flag(prof["profiled_run_ms_mean"], unprof_ms)
    if note:
        notes.append(note)
    prof.update({"trace_path": str(trace), "warmup_runs": warmup, "requested_runs": runs,
                 "unprofiled_run_ms_mean": unprof_ms, "profiled_wall_ms_mean": wall_ns / capped / 1e6,
                 "overhead_ratio": ratio, "overhead_flagged": note is not None, "backend": cfg.backend})
    if roofline and cfg.backend == "onnxruntime":  # OpenVINO's counters carry no shapes
        _add_roofline(prof, int(threads))
    result.kind = "profile"
    result.metrics.profile = prof
    result.notes.extend(notes)
    return result
