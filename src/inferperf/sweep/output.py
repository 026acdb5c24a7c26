"""Sweep outputs: the flat CSV (one row per case) and the rows of the console table."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from ..fsutil import atomic_open
from ..results.model import Result
from .outcome import SweepOutcome

COLUMNS = [
    "label", "model", "backend", "shapes", "batch", "intra_op_num_threads", "concurrency", "session_mode", "execution_mode",
    "env", "queries_per_s", "queries_per_s_ci_low", "queries_per_s_ci_high", "samples_per_s", "p50_ms", "p90_ms",
    "p95_ms", "p99_ms", "cpu_percent", "rss_peak_bytes", "valid", "marks", "runs", "failures", "case_key",
]  # fmt: skip


def row(label: str, marks: list[str], r: Result | None, failures: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """One CSV row for a case (figures empty when every run of it failed)."""
    out: dict[str, Any] = {c: "" for c in COLUMNS}
    out.update(label=label, model=model, marks=";".join(marks), failures=len(failures))
    if failures:
        out["failures"] = f"{len(failures)}: {failures[-1]['message'][:200]}"
    if r is None:
        out["runs"] = 0
        return out
    tp, lat = r.metrics.throughput, r.metrics.latency_ms
    ci = tp.queries_per_s_ci95 or ["", ""]
    res = r.metrics.resources
    out.update(
        backend=r.config.backend,
        shapes=json.dumps(r.config.workload.shapes),
        batch=r.config.workload.batch_size,
        intra_op_num_threads=r.config.session.effective.get(
            "intra_op_num_threads", r.config.session.effective.get("INFERENCE_NUM_THREADS")
        ),
        concurrency=r.config.concurrency,
        session_mode=r.config.session_mode if r.config.concurrency > 1 else "",
        execution_mode=r.config.session.requested.get("execution_mode", ""),
        env=json.dumps(r.config.env) if r.config.env else "",
        queries_per_s=round(tp.queries_per_s, 3),
        queries_per_s_ci_low=round(ci[0], 3) if ci[0] != "" else "",
        queries_per_s_ci_high=round(ci[1], 3) if ci[1] != "" else "",
        samples_per_s=round(tp.samples_per_s, 3),
        p50_ms=round(lat.p50, 6), p90_ms=round(lat.p90, 6), p95_ms=round(lat.p95, 6), p99_ms=round(lat.p99, 6),
        cpu_percent=round(res.cpu_percent_mean, 1) if res and res.cpu_percent_mean is not None else "",
        rss_peak_bytes=res.rss_peak_bytes if res else "",
        valid=r.validity.valid,
        runs=r.run.get("repeats", 1),
        case_key=r.case_key,
    )  # fmt: skip
    return out


def rows(outcome: SweepOutcome) -> list[dict[str, Any]]:
    """All cases' rows, sorted by throughput (best first; failed cases last)."""
    out = [
        row(c.label, c.marks, outcome.results.get(i), outcome.failures.get(i, []), c.model)
        for i, c in enumerate(outcome.cases)
    ]
    return sorted(out, key=lambda x: -(x["queries_per_s"] or -1.0))


def write_csv(outcome: SweepOutcome, path: Path) -> Path:
    """Write ``sweep.csv`` (columns :data:`COLUMNS`)."""
    with atomic_open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows(outcome))
    return path
