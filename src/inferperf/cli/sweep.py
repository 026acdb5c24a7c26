"""``inferperf sweep``: a test matrix over models x shapes x batch x threads x concurrency x settings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..errors import UsageError
from ..measure.speedup import sig
from . import app
from .axes import dim_axis, env_axis, ints, shape_axis, words
from .history import HistoryOpt, record
from .options import (BackendAxis, BatchSizeAxis, ConcurrencyAxis, ExecutionModeAxis, InterOpThreadsAxis,
    IntraOpThreadsAxis, SessionModeAxis)

Opt = typer.Option


def _settings(base: dict[str, Any], stop_flags: dict[str, float | int | None], warmup: int | None,
              case_timeout_s: float | None, cpus: str | None, numa_node: int | None) -> dict[str, Any]:
    """The matrix's ``settings`` with the flags given on the command line laid over them (flags win);
    the sweep's own default minimum duration is 2 s."""
    settings = dict(base)
    stop = dict(settings.get("stop", {}))
    stop.setdefault("min_duration_s", 2.0)
    stop.update({k: v for k, v in stop_flags.items() if v is not None})
    settings["stop"] = stop
    if warmup is not None:
        settings["warmup"] = {**settings.get("warmup", {}), "iterations": warmup}
    if case_timeout_s is not None:
        settings["worker_timeout_s"] = case_timeout_s
    placement = dict(settings.get("placement", {}))
    if cpus is not None:
        from ..measure.placement import parse_cpus

        placement["cpus"] = parse_cpus(cpus)
    if numa_node is not None:
        placement["numa_node"] = numa_node
    settings["placement"] = placement
    return settings


@app.command("sweep")
def sweep_command(
    model: Annotated[Optional[str], typer.Argument(help="ONNX file(s) or zoo:NAME, comma-separated (variants)")] = None,
    matrix: Annotated[Optional[Path], Opt(help="YAML matrix: models with per-model shapes, axes, settings (format: docs/sweep-matrix.md)")] = None,
    backend: BackendAxis = None,
    intra_op_num_threads: IntraOpThreadsAxis = None,
    inter_op_num_threads: InterOpThreadsAxis = None,
    execution_mode: ExecutionModeAxis = None,
    batch_size: BatchSizeAxis = None,
    shape: Annotated[Optional[list[str]], Opt(help="NAME:AxB,CxD (one flag per input; commas = values)")] = None,
    dim: Annotated[Optional[list[str]], Opt(help="SYMBOL=N,N (an axis over a symbolic dim)")] = None,
    concurrency: ConcurrencyAxis = None,
    session_mode: SessionModeAxis = None,
    env: Annotated[Optional[list[str]], Opt(help="NAME=V1,V2: environment of the worker, as an axis")] = None,
    allocator: Annotated[Optional[str], Opt(help="system,jemalloc,tcmalloc: the worker's memory allocator, as an"
                                                 " axis (LD_PRELOAD)")] = None,
    beyond_effective: Annotated[bool, Opt("--beyond-effective", help="default ladder also tries 2x the effective CPUs")] = False,
    repeat: Annotated[int, Opt(help="rounds; each case once per round, shuffled")] = 1,
    seed: Annotated[int, Opt(help="seed of the round shuffle")] = 0,
    warmup: Annotated[Optional[int], Opt(help="warm-up runs per case")] = None,
    iterations: Annotated[Optional[int], Opt(help="minimum queries per case")] = None,
    duration_s: Annotated[Optional[float], Opt(help="minimum seconds per case (default 2)")] = None,
    max_duration_s: Annotated[Optional[float], Opt(help="cap in seconds per case")] = None,
    case_timeout_s: Annotated[Optional[float], Opt(help="kill a case's worker after this many seconds")] = None,
    cpus: Annotated[Optional[str], Opt(help="pin every worker to these CPUs")] = None,
    numa_node: Annotated[Optional[int], Opt(help="bind every worker to this NUMA node")] = None,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="results folder (default ./inferperf-sweep-TIMESTAMP)")] = None,
    resume: Annotated[bool, Opt("--resume", help="continue the sweep in --output, skipping finished runs")] = False,
    dry_run: Annotated[bool, Opt("--dry-run", help="print the expanded matrix and stop")] = False,
    history: HistoryOpt = None,
) -> int:
    """Measure a test matrix, each case in a fresh worker process, and print scaling findings."""
    from ..sweep.space import Axes, Matrix, ModelEntry, expand, load_matrix
    from ..system import collect_system

    console = Console()
    err = Console(stderr=True)
    if resume and output is None:
        raise UsageError("--resume needs --output DIR: the folder of the sweep to continue")
    if matrix is not None:
        m = load_matrix(matrix)
    elif model:
        m = Matrix(models=[ModelEntry(path=p) for p in words(model) or []])
    else:
        raise UsageError("give a MODEL (or several, comma-separated) or --matrix FILE.yaml")
    shapes = shape_axis(shape) if shape else []
    dims = dim_axis(dim) if dim else []
    for entry in m.models:
        entry.shapes = entry.shapes or shapes
        entry.dims = entry.dims or dims
    axes: dict[str, Any] = {
        "backend": words(backend), "intra_op_num_threads": ints(intra_op_num_threads, "--intra-op-num-threads"),
        "inter_op_num_threads": ints(inter_op_num_threads, "--inter-op-num-threads"),
        "execution_mode": words(execution_mode), "batch_size": ints(batch_size, "--batch-size"),
        "concurrency": ints(concurrency, "--concurrency"), "session_mode": words(session_mode),
        "env": env_axis(env) if env else None, "allocator": words(allocator),
    }  # fmt: skip
    merged = m.axes.model_dump()
    merged.update({k: v for k, v in axes.items() if v is not None})
    m.axes = Axes.model_validate(merged)
    m.settings = _settings(m.settings, {"min_iterations": iterations, "min_duration_s": duration_s,
                                        "max_duration_s": max_duration_s}, warmup, case_timeout_s, cpus, numa_node)
    reps = repeat if repeat != 1 else m.repeat
    info = collect_system()
    cases, warnings = expand(m, info, beyond_effective)
    from ..sweep.space import preflight

    if not cases:
        raise UsageError("the matrix expands to no case: list at least one model")
    preflight(cases)
    if output is not None and output.exists() and not output.is_dir():
        raise UsageError(f"--output '{output}' is a file: give a folder for the sweep's results")
    if resume and output is not None and (output / "index.json").exists():
        from ..sweep.run import check_resumable

        check_resumable(cases, output)
    for w in warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    table = Table(title=f"sweep: {len(cases)} cases x {reps} round(s) = {len(cases) * reps} runs")
    table.add_column("#")
    table.add_column("case")
    table.add_column("marks")
    for i, c in enumerate(cases):
        table.add_row(str(i), c.label, ", ".join(c.marks))
    console.print(table)
    from ..sweep.plan import plan_lines

    for line in plan_lines(cases, reps):
        console.print(line, highlight=False, markup=False)
    if dry_run:
        return 0
    if output is None:
        import datetime as _dt

        output = Path(f"inferperf-sweep-{_dt.datetime.now(_dt.UTC):%Y%m%dT%H%M%S}")
        err.print(f"results go to {output}/ (set --output to choose)", highlight=False)
    if reps < 1:
        raise UsageError("--repeat must be >= 1")
    code = _run(cases, output, reps, seed, resume, console, err)
    if history:
        from ..history.ingest import read_results

        record(history, read_results([output / "cases"]))
    return code


def _run(cases, output: Path, reps: int, seed: int, resume: bool, console: Console, err: Console) -> int:
    from ..sweep.output import rows
    from ..sweep.run import run_sweep

    total = len(cases) * reps
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    task = progress.add_task("sweep", total=total)

    done = [0]

    def on_run(case, round_, result, error) -> None:
        progress.advance(task)
        done[0] += 1
        if error:
            err.print(f"[red]failed[/red] {escape(case.label)} (round {round_ + 1}): {escape(str(error))}", highlight=False)
        elif not err.is_terminal:  # no progress bar in a pipe or a log file: one line per finished run
            lat = result.metrics.latency_ms
            err.print(f"run {done[0]}/{total}: {case.label} round {round_ + 1}/{reps}:"
                      f" {sig(result.metrics.throughput.queries_per_s)} queries/s, p50 {sig(lat.p50)} ms,"
                      f" p99 {sig(lat.p99)} ms", highlight=False, markup=False)

    try:
        with progress:
            outcome = run_sweep(cases, output, reps, seed, resume, ["inferperf", *sys.argv[1:]], on_run)
    except KeyboardInterrupt:
        from ..errors import Interrupted
        from ..interrupt import STOP

        raise Interrupted(f"interrupted by {STOP.signal_name}: finished runs are kept in {output}; rerun with"
                          " --resume to continue", STOP.exit_code) from None
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
    console.print(f"results: {output} (sweep.csv, findings.json, cases/, runs/)", highlight=False)
    if outcome.failures and not outcome.results:
        first = next(iter(outcome.failures.values()))[0]
        from ..errors import MeasurementError

        raise MeasurementError(f"every case failed (first: {first['message']}); results in {output}")
    return 0
