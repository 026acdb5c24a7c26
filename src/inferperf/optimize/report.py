"""What :func:`inferperf.optimize.run.optimize` returns: one row per variant, and the table as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..measure.speedup import raw_ci
from ..results.model import Result
from .convert import Built


@dataclass
class VariantReport:
    """One row of the optimize table.

    Attributes:
        name: ``fp32`` (the reference), ``fp16``, ``int8-static``, ``int8-static-auto``, ...
        path: the model file measured (None when the build failed).
        build: how it was built (settings, notes, error, seconds).
        result: its pooled Result (None when not measured); ``result_path`` where it was written.
        accuracy: its accuracy block (also in ``result.metrics.accuracy``).
        speed: :func:`~inferperf.optimize.verdict.speedup` against fp32.
        verdict, reasons: see :func:`~inferperf.optimize.verdict.verdict`.
    """

    name: str
    path: Path | None
    build: Built
    result: Result | None = None
    result_path: Path | None = None
    accuracy: dict[str, Any] | None = None
    speed: dict[str, Any] | None = None
    verdict: str = ""
    reasons: list[str] = field(default_factory=list)


@dataclass
class OptimizeReport:
    """What :func:`optimize` did. ``gate_failed``: a variant was rejected on accuracy;
    ``gates_explicit``: the user set the gates (or ``--fail-on-gate``), so that failure exits 3."""

    model: str
    output: Path
    variants: list[VariantReport]
    notes: list[str] = field(default_factory=list)
    sensitivity: list[dict[str, Any]] | None = None
    auto_exclude: dict[str, Any] | None = None
    gate_failed: bool = False
    gates_explicit: bool = False
    isa_flags: list[str] = field(default_factory=list)


def summary_doc(report: OptimizeReport) -> dict[str, Any]:
    """The table as plain data (``optimize-summary.json``)."""
    rows = []
    for r in report.variants:
        res = r.result
        rows.append({
            "variant": r.name, "path": str(r.path) if r.path else None,
            "size_bytes": res.model.size_bytes if res else None,
            "session_create_ms": res.metrics.cold_start.session_create_ms if res and res.metrics.cold_start else None,
            "p50_ms": res.metrics.latency_ms.p50 if res else None,
            "p99_ms": res.metrics.latency_ms.p99 if res else None,
            "queries_per_s": res.metrics.throughput.queries_per_s if res else None,
            "queries_per_s_ci95": raw_ci(res.metrics.throughput.per_run) if res else None,  # raw, not clipped at 0
            "speedup": r.speed, "verdict": r.verdict, "reasons": r.reasons,
            "accuracy_passed": r.accuracy.get("passed") if r.accuracy else None,
            "result": str(r.result_path) if r.result_path else None,
        })
    return {"model": report.model, "rows": rows, "notes": report.notes, "auto_exclude": report.auto_exclude,
            "gate_failed": report.gate_failed, "gates_explicit": report.gates_explicit,
            "sensitivity_top": (report.sensitivity or [])[:10]}


def gate_message(report: OptimizeReport) -> str | None:
    """Why the command exits 3, or None: a variant rejected on accuracy under gates the user set (explicit
    ``--max-accuracy-drop``, or ``--fail-on-gate``)."""
    if not (report.gate_failed and report.gates_explicit):
        return None
    bad = [r.name for r in report.variants if r.verdict == "REJECT"]
    return (f"accuracy gate failed for {', '.join(bad)} (see the table): relax --max-accuracy-drop, exclude nodes"
            " (--auto-exclude) or drop those variants")
