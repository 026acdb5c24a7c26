"""Operator profiles from ONNX Runtime's Chrome-trace events (pure; no runtime imported).

ORT's profiler (``SessionOptions.enable_profiling``) records from session creation and writes a JSON list
of Chrome-trace events (``ph: X``, ``ts``/``dur`` in microseconds). Session events (``cat: Session``) include
one ``model_run`` per ``run()`` call; node events (``cat: Node``) are named ``<node>_kernel_time`` (and
``_fence_before``/``_fence_after``) with ``args.op_name``, ``args.provider`` and the input/output shapes.
Source: onnxruntime/core/common/profiler.cc and core/framework/sequential_executor.cc.

Warm-up is excluded by timestamp: every kernel event is assigned to the ``model_run`` window holding it,
and the first ``skip_runs`` windows (warm-up; the first of them includes kernel search) are set apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np


#: op type -> family, so fused and layout-specific kernels of one ONNX op add up (FusedConv is Conv + activation).
FAMILIES = {"Conv": "Conv", "FusedConv": "Conv", "NhwcFusedConv": "Conv", "NhwcConv": "Conv",
            "ConvTranspose": "Conv", "MatMul": "MatMul", "FusedMatMul": "MatMul", "Gemm": "MatMul",
            "MatMulNBits": "MatMul", "ReorderInput": "Layout", "ReorderOutput": "Layout",
            "Convolution": "Conv", "GroupConvolution": "Conv", "FullyConnected": "MatMul",  # OpenVINO
            "aten::conv2d": "Conv", "aten::convolution": "Conv", "aten::linear": "MatMul", "aten::matmul": "MatMul",
            "aten::addmm": "MatMul", "aten::mm": "MatMul"}  # torch


def family_percent(prof: dict[str, Any]) -> dict[str, float]:
    """Percent of kernel time per op family (:data:`FAMILIES`; other op types are their own family)."""
    out: dict[str, float] = {}
    for o in prof["ops"]:
        fam = FAMILIES.get(o["op"], o["op"])
        out[fam] = out.get(fam, 0.0) + o["percent_of_kernels"]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _runs(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """``model_run`` windows (start_us, end_us) in time order."""
    runs = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
            for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    return sorted(runs)


def _kernels(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")]


def _shape(args: dict[str, Any], key: str = "input_type_shape") -> list[list[int]]:
    """Shapes from ORT's ``[{"float": [1, 3, 8, 8]}, ...]`` lists (``input_type_shape``/``output_type_shape``)."""
    return [[int(d) for d in dims] for item in (args.get(key) or []) for dims in dict(item).values()]


def split_runs(events: list[dict[str, Any]], skip_runs: int = 0, event_cap: bool = True) -> dict[str, Any]:
    """Assign kernel events to ``model_run`` windows and keep the complete runs after ``skip_runs``.

    Args:
        events: the trace (list of dicts as ORT writes them).
        skip_runs: leading runs to set apart (warm-up).
        event_cap: the trace may have been cut at ORT's event cap (``onnxruntime``'s profiler stops recording at
            1,000,000 events). Then the runs at the END of the trace whose kernel count falls short of the
            largest count are dropped and counted in ``dropped_partial``. A short run followed by a full one was
            not cut and is kept. False for traces a backend writes itself (OpenVINO's ``PERF_COUNT``, torch):
            they are never cut, and OpenVINO's count of EXECUTED layers varies from run to run (100-104 of
            PP-OCRv4 det's layers across six runs, measured), so no run is dropped.

    Returns:
        ``{"runs": [(start_us, end_us, [kernel events])...], "skipped": [...same...], "dropped_partial": n}``.
    """
    windows = _runs(events)
    buckets: list[list[dict[str, Any]]] = [[] for _ in windows]
    starts = np.array([w[0] for w in windows])
    for k in _kernels(events):
        ts = float(k["ts"])
        i = int(np.searchsorted(starts, ts, side="right")) - 1
        if 0 <= i and ts <= windows[i][1] + 1:
            buckets[i].append(k)
    all_runs = [(w[0], w[1], b) for w, b in zip(windows, buckets)]
    kept = all_runs[skip_runs:]
    dropped = 0
    if kept and event_cap:
        full = max(len(r[2]) for r in kept)
        while kept and len(kept[-1][2]) < full:
            kept.pop()
            dropped += 1
    return {"runs": kept, "skipped": all_runs[:skip_runs], "dropped_partial": dropped}


def op_profile(events: list[dict[str, Any]], skip_runs: int = 0, top: int = 10, event_cap: bool = True) -> dict[str, Any]:
    """The ``metrics.profile`` block from one ORT trace.

    Args:
        events: ORT Chrome-trace events.
        skip_runs: warm-up runs at the start of the trace to set apart (not counted).
        top: how many nodes to list in ``nodes`` (heaviest first).
        event_cap: the trace may be cut at ORT's event cap (:func:`split_runs`); False for OpenVINO and torch.

    Returns:
        dict with ``runs`` (profiled runs counted), ``run_ms`` (per run), ``profiled_run_ms_mean``,
        ``kernel_ms_mean`` and ``outside_kernels_ms`` (mean per run: run time not inside any kernel),
        ``ops`` (per op type: total_ms over all runs, mean_ms per run, count per run, percent of run time,
        amdahl_speedup = the end-to-end speed-up if that op type cost nothing, per_run_ms), ``nodes`` (top nodes with
        op, shapes, total_ms over all runs, count per run, mean_ms per call, percent), ``first_run_ms`` and
        ``first_run_kernel_ms`` (the first set-apart run, which holds kernel search), ``dropped_partial_runs``.

    Raises:
        ValueError: no complete ``model_run`` after ``skip_runs`` in the trace.
    """
    parts = split_runs(events, skip_runs, event_cap)
    runs = parts["runs"]
    if not runs:
        raise ValueError(f"trace has no complete model_run after {skip_runs} warm-up run(s): profile more runs")
    n = len(runs)
    run_us = np.array([r[1] - r[0] for r in runs])
    total_run_us = float(run_us.sum())
    by_op: dict[str, list[float]] = {}
    by_node: dict[str, dict[str, Any]] = {}
    per_run: dict[str, list[float]] = {}
    for r, (_, _, ks) in enumerate(runs):
        for k in ks:
            args = k.get("args", {}) or {}
            op = str(args.get("op_name", "?"))
            dur = float(k.get("dur", 0))
            by_op.setdefault(op, [0.0, 0])
            by_op[op][0] += dur
            by_op[op][1] += 1
            per_run.setdefault(op, [0.0] * n)[r] += dur / 1e3
            name = str(k["name"])[: -len("_kernel_time")]
            node = by_node.setdefault(name, {"name": name, "op": op, "provider": args.get("provider"),
                                             "input_shapes": _shape(args), "output_shapes": _shape(args, "output_type_shape"),
                                             "total_us": 0.0, "count": 0})
            node["total_us"] += dur
            node["count"] += 1
    kernel_us = sum(v[0] for v in by_op.values())
    ops = []
    for op, (tot, cnt) in sorted(by_op.items(), key=lambda kv: -kv[1][0]):
        frac = tot / total_run_us if total_run_us else 0.0
        ops.append({"op": op, "total_ms": tot / 1e3, "mean_ms": tot / n / 1e3, "count": round(cnt / n),
                    "percent": 100 * frac, "percent_of_kernels": 100 * tot / kernel_us if kernel_us else 0.0,
                    "amdahl_speedup": (1 / (1 - frac)) if frac < 1 else float("inf"),
                    "per_run_ms": per_run[op]})
    nodes = []
    for node in sorted(by_node.values(), key=lambda d: -d["total_us"])[:top]:
        tot = node.pop("total_us")
        calls = node.pop("count")
        node["total_ms"] = tot / 1e3  # over all profiled runs
        node["count"] = round(calls / n)  # calls per run (a node inside a loop or If runs more than once)
        node["mean_ms"] = tot / calls / 1e3  # per call
        node["percent"] = 100 * tot / total_run_us if total_run_us else 0.0
        nodes.append(node)
    out: dict[str, Any] = {
        "runs": n, "run_ms": [float(x) / 1e3 for x in run_us],
        "profiled_run_ms_mean": total_run_us / n / 1e3, "kernel_ms_mean": kernel_us / n / 1e3,
        "kernel_ms_per_run": [float(x) for x in np.sum(list(per_run.values()), axis=0)] if per_run else [],
        "outside_kernels_ms": (total_run_us - kernel_us) / n / 1e3,
        "outside_kernels_percent": 100 * (total_run_us - kernel_us) / total_run_us if total_run_us else 0.0,
        "ops": ops, "nodes": nodes, "families_percent_of_kernels": {}, "dropped_partial_runs": parts["dropped_partial"],
        "first_run_ms": None, "first_run_kernel_ms": None,
    }
    out["families_percent_of_kernels"] = family_percent(out)
    if parts["skipped"]:
        s0, e0, ks0 = parts["skipped"][0]
        out["first_run_ms"] = (e0 - s0) / 1e3
        out["first_run_kernel_ms"] = sum(float(k.get("dur", 0)) for k in ks0) / 1e3
    return out


def overhead_flag(profiled_ms: float, unprofiled_ms: float, limit: float = 1.2) -> tuple[float, str | None]:
    """Ratio of profiled to unprofiled run time and a note when it exceeds ``limit`` (profiler distorts)."""
    ratio = profiled_ms / unprofiled_ms if unprofiled_ms > 0 else float("nan")
    note = None
    if ratio > limit:
        note = (f"profiled runs take {ratio:.2f}x the unprofiled ones (> {limit}): the profiler's own cost "
                "distorts small ops; read per-op shares with care")
    return ratio, note


def summarize_profile(result: Any, top: int = 10) -> Any:
    """Derive the op tables of a kind ``profile`` Result whose ``metrics.profile`` holds the raw record.

    :func:`inferperf.measure.profile.profile` measures (unprofiled bench, profiler trace, machine peaks) and
    records the trace path and wall time; this reads the trace it names and fills in :func:`op_profile`'s
    tables, the profiled/unprofiled overhead ratio (:func:`overhead_flag`) and, where peaks were probed, the
    roofline classification (:func:`inferperf.analysis.roofline.classify`). Notes go to ``result.notes``.

    Args:
        result: a :class:`~inferperf.results.model.Result` of kind ``profile`` (modified in place).
        top: how many nodes to list.

    Returns:
        ``result``, with ``metrics.profile`` complete (docs/results-schema.md).

    Raises:
        ValueError: the trace holds no complete run after the warm-up runs.
        OSError: the trace file named in the record cannot be read.
    """
    import json
    from pathlib import Path

    from ..roofline import ROUGHNESS, classify

    raw: dict[str, Any] = dict(result.metrics.profile)
    events = json.loads(Path(raw["trace_path"]).read_text())
    prof: dict[str, Any] = op_profile(events, skip_runs=int(raw["warmup_runs"]), top=top,
                                      event_cap=raw.get("backend", "onnxruntime") == "onnxruntime")
    if prof["dropped_partial_runs"]:
        result.notes.append(f"{prof['dropped_partial_runs']} partial run(s) at the end of the trace dropped (event cap)")
    ratio, note = overhead_flag(prof["profiled_run_ms_mean"], float(raw["unprofiled_run_ms_mean"]))
    if note:
        result.notes.append(note)
    prof.update(raw)
    prof.update({"profiled_wall_ms_mean": raw["profiled_wall_ns"] / max(int(raw["measured_runs"]), 1) / 1e6,
                 "overhead_ratio": ratio, "overhead_flagged": note is not None})
    prof.pop("profiled_wall_ns", None)
    prof.pop("measured_runs", None)
    peaks = raw.get("peaks")
    if peaks:
        prof["roofline"] = classify(prof["nodes"], peaks["peak_flops_per_s"], peaks["peak_bytes_per_s"])
        prof["roofline_note"] = ROUGHNESS
    result.metrics.profile = prof
    return result
