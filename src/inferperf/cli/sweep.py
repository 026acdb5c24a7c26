"""``inferperf sweep``: a test matrix over models x shapes x batch x threads x concurrency x settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from . import app
from .axes import axes_of, dim_axis, shape_axis, words
from .history import HistoryOpt, record
from .options import (BackendAxis, BatchSizeAxis, ConcurrencyAxis, ExecutionModeAxis, InterOpThreadsAxis,
    IntraOpThreadsAxis, SessionModeAxis, config_flags)

Opt = typer.Option


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
    from ..errors import MeasurementError
    from ..measure.placement import parse_cpus
    from ..sweep.spec import SweepSpec, failure_message
    from .sweep_view import print_plan, print_results, run_with_progress

    console, err = Console(), Console(stderr=True)
    settings = config_flags({"warmup": warmup, "iterations": iterations, "duration_s": duration_s,
                             "max_duration_s": max_duration_s, "numa_node": numa_node},
                            **{"placement.cpus": None if cpus is None else parse_cpus(cpus)},
                            worker_timeout_s=case_timeout_s)
    spec = SweepSpec(words(model), matrix, shape_axis(shape) if shape else [], dim_axis(dim) if dim else [],
                     axes_of(locals()), settings, None if repeat == 1 else repeat, seed, beyond_effective, output,
                     resume).check()
    print_plan(spec, console, err)
    if dry_run:
        return 0
    if output is None:
        err.print(f"results go to {spec.output}/ (set --output to choose)", highlight=False)
    outcome = run_with_progress(spec, err)
    print_results(spec, outcome, console)
    failed = failure_message(spec, outcome)
    if failed:
        raise MeasurementError(failed)
    if history:
        from ..history.ingest import read_results

        record(history, read_results([spec.output / "cases"]))
    return 0
