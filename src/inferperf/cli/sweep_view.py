"""What ``inferperf sweep`` prints: the expanded matrix and its plan, one line (or a progress bar) per run, the
results table and the findings."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..measure.speedup import sig
from ..sweep.outcome import SweepOutcome
from ..sweep.spec import SweepSpec


def print_plan(spec: SweepSpec, console: Console, err: Console) -> None:
    """The expansion's warnings (stderr), the cases with their marks, the stop rule and the time estimate."""
    from ..sweep.plan import plan_lines

    for w in spec.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    cases, reps = spec.cases, spec.rounds
    table = Table(title=f"sweep: {len(cases)} cases x {reps} round(s) = {len(cases) * reps} runs")
    table.add_column("#")
    table.add_column("case")
    table.add_column("marks")
    for i, c in enumerate(cases):
        table.add_row(str(i), c.label, ", ".join(c.marks))
    console.print(table)
    for line in plan_lines(cases, reps):
        console.print(line, highlight=False, markup=False)


def run_with_progress(spec: SweepSpec, err: Console) -> SweepOutcome:
    """Run the sweep (:func:`~inferperf.sweep.spec.run_spec`) with a progress bar on a terminal, or one line per
    finished run in a pipe or a log file; a failed run is one line either way."""
    from ..sweep.spec import run_spec

    total = len(spec.cases) * spec.rounds
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    task = progress.add_task("sweep", total=total)
    done = [0]

    def on_run(case: Any, round_: int, result: Any, error: str | None) -> None:
        progress.advance(task)
        done[0] += 1
        if error:
            err.print(f"[red]failed[/red] {escape(case.label)} (round {round_ + 1}): {escape(str(error))}", highlight=False)
        elif not err.is_terminal:  # no progress bar in a pipe or a log file: one line per finished run
            lat = result.metrics.latency_ms
            err.print(f"run {done[0]}/{total}: {case.label} round {round_ + 1}/{spec.rounds}:"
                      f" {sig(result.metrics.throughput.queries_per_s)} queries/s, p50 {sig(lat.p50)} ms,"
                      f" p99 {sig(lat.p99)} ms", highlight=False, markup=False)

    with progress:
        return run_spec(spec, ["inferperf", *sys.argv[1:]], on_run)


def print_results(spec: SweepSpec, outcome: SweepOutcome, console: Console) -> None:
    """The results table (q/s with its interval over rounds, p50, p99, CPU, validity, marks), the findings and
    where the files are."""
    from ..sweep.output import rows

    t = Table(title=f"sweep results ({outcome.measured_runs} runs measured, {outcome.skipped_runs} reused)")
    for col in ("case", "q/s [95 % CI]", "p50 ms", "p99 ms", "CPU %", "valid", "marks"):
        t.add_column(col)
    for r in rows(outcome):
        if r["queries_per_s"] == "":
            t.add_row(r["label"], f"[red]failed[/red] {r['failures']}", "", "", "", "", r["marks"])
            continue
        ci = ""
        if r["queries_per_s_ci_low"] != "":  # a bound at 0 was clipped there: the raw interval reached below 0
            ci = (f" [{r['queries_per_s_ci_low']:.1f}, {r['queries_per_s_ci_high']:.1f}]"
                  if r["queries_per_s_ci_low"] > 0 else f" (interval too wide, n={r['runs']})")
        t.add_row(r["label"], f"{r['queries_per_s']:.1f}{ci}", f"{sig(r['p50_ms'])}", f"{sig(r['p99_ms'])}",
                  f"{r['cpu_percent']}", "yes" if r["valid"] else "[red]no[/red]", r["marks"])
    console.print(t)
    if outcome.findings:
        console.print("[bold]findings[/bold]")
        for f in outcome.findings:
            console.print(f"- {f.text}", highlight=False, markup=False)
    else:
        console.print("no findings: the matrix has no axis with >= 2 values that the data support (or CIs overlap)")
    console.print(f"results: {spec.output} (sweep.csv, findings.json, cases/, runs/)", highlight=False)
