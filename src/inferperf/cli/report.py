"""``inferperf report``: Results (files or folders, any mix of kinds) -> one HTML file or Markdown."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from . import app

Opt = typer.Option


@app.command("report")
def report_command(
    results: Annotated[list[Path], typer.Argument(help="Result files or folders of any command: bench, sweep, optimize,"
                                                          " runtime comparison, serve, load, tune, profile, pipeline;"
                                                          " history documents (history export --json)")],
    output: Annotated[Optional[Path], Opt("--output", "-o", help="report file (default report.html / report.md)")] = None,
    fmt: Annotated[str, Opt("--format", help="html (one self-contained file) | markdown")] = "html",
    title: Annotated[str, Opt(help="page title")] = "inferperf report",
    target_qps: Annotated[Optional[float], Opt(help="rate to size a fleet for, queries/s, per workload (with --slo-p99-ms; inferperf plan's simulation)")] = None,
    slo_p99_ms: Annotated[Optional[float], Opt(help="p99 objective in ms for recommendations and capacity")] = None,
) -> int:
    """Turn Results into a report: summary, environment, method, raw data, charts, bottlenecks, recommendations."""
    from ..report import ReportOptions, report

    if fmt not in ("html", "markdown", "md"):
        raise UsageError(f"--format {fmt!r}: choose html or markdown")
    fmt = "markdown" if fmt == "md" else fmt
    if target_qps is not None and target_qps <= 0:
        raise UsageError("--target-qps must be positive")
    if slo_p99_ms is not None and slo_p99_ms <= 0:
        raise UsageError("--slo-p99-ms must be positive")
    out = output or Path("report.html" if fmt == "html" else "report.md")
    opts = ReportOptions(title=title, target_qps=target_qps, slo_p99_ms=slo_p99_ms)
    path, rep = report(results, out, fmt, opts)
    for n in rep.notes:
        print(f"note: {n}", file=sys.stderr)
    print(f"report: {path} ({len(rep.rows)} case(s); sections: {', '.join(rep.sections)}; {len(rep.charts)} chart(s))")
    return 0
