"""``inferperf tune``: Bayesian search for the fastest configuration under a latency SLO, validated, resumable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import app
from .axes import axes_of, words
from .history import HistoryOpt, record
from .options import (BackendAxis, BatchSizeAxis, ConcurrencyAxis, Dim, ExecutionModeAxis,
    GraphOptimizationLevelAxis, InterOpThreadsAxis, IntraOpThreadsAxis, SessionModeAxis, Shape, build_config,
    config_flags)

Opt = typer.Option


@app.command("tune")
def tune_command(
    model: Annotated[str, typer.Argument(help="ONNX file or zoo:NAME")],
    shape: Shape = None,
    dim: Dim = None,
    config: Annotated[Optional[Path], Opt(help="base settings file (BenchConfig fields) every trial starts from")] = None,
    space: Annotated[Optional[Path], Opt(help="YAML space: axis -> values (format: docs/tune.md)")] = None,
    variants: Annotated[Optional[Path], Opt(help="an `inferperf optimize -o DIR` folder: its variants that passed"
                                                 " their accuracy gate become the precision axis")] = None,
    precision: Annotated[Optional[str], Opt(help="axis (with --variants): e.g. fp32,fp16,int8-dynamic (default: all"
                                                 " that passed)")] = None,
    build_variants: Annotated[Optional[str], Opt(help="build these variants first (inferperf optimize --no-measure into"
                                                      " OUTPUT/variants), e.g. fp16,int8-dynamic")] = None,
    backend: BackendAxis = None,
    intra_op_num_threads: IntraOpThreadsAxis = None,
    inter_op_num_threads: InterOpThreadsAxis = None,
    execution_mode: ExecutionModeAxis = None,
    graph_optimization_level: GraphOptimizationLevelAxis = None,
    enable_mem_pattern: Annotated[Optional[str], Opt(help="axis: true,false")] = None,
    enable_cpu_mem_arena: Annotated[Optional[str], Opt(help="axis: true,false")] = None,
    session_config: Annotated[Optional[list[str]], Opt(help="axis: KEY=V1|V2 (a session.* entry); repeatable")] = None,
    batch_size: BatchSizeAxis = None,
    concurrency: ConcurrencyAxis = None,
    session_mode: SessionModeAxis = None,
    allocator: Annotated[Optional[str], Opt(help="axis: system,jemalloc,tcmalloc (LD_PRELOAD in each trial's worker)")] = None,
    serve: Annotated[bool, Opt("--serve", help="tune the served model: each trial starts inferperf serve and drives"
                                             " inferperf load at it")] = False,
    max_batch_size: Annotated[Optional[str], Opt(help="axis (--serve): comma list, 0 = no batching")] = None,
    max_queue_delay_us: Annotated[Optional[str], Opt(help="axis (--serve): comma list of microseconds")] = None,
    instance_count: Annotated[Optional[str], Opt(help="axis (--serve): comma list")] = None,
    max_oversubscription: Annotated[Optional[float], Opt(help="prune streams x threads above this many per effective"
                                                               " CPU (default 1)")] = None,
    objective: Annotated[str, Opt(help="throughput | throughput-per-core | p99")] = "throughput",
    slo_p99_ms: Annotated[Optional[float], Opt(help="p99 latency bound, ms (a constraint)")] = None,
    min_throughput: Annotated[Optional[float], Opt(help="with --objective p99: samples/s floor")] = None,
    multi_objective: Annotated[bool, Opt("--multi-objective", help="Pareto front of throughput vs p99")] = False,
    sampler: Annotated[str, Opt(help="tpe | gp (needs torch) | random | grid")] = "tpe",
    n_trials: Annotated[int, Opt(help="budget: measured trials, validation runs included, all workers together")] = 30,
    timeout_s: Annotated[Optional[float], Opt(help="wall-clock budget of this process, s")] = None,
    seed: Annotated[int, Opt(help="sampler and round-shuffle seed")] = 0,
    storage: Annotated[Optional[str], Opt(help="sqlite:///F.db | journal:F.log | postgresql+psycopg://U@H/DB"
                                               " (default: sqlite in --output)")] = None,
    study_name: Annotated[Optional[str], Opt(help="study to create or join (default from the model)")] = None,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="results folder (default ./inferperf-tune-MODEL)")] = None,
    trial_duration_s: Annotated[float, Opt(help="minimum measured seconds per trial")] = 4.0,
    min_samples: Annotated[Optional[int], Opt(help="samples per trial (default 459 with a p99 goal, else 100)")] = None,
    warmup: Annotated[Optional[int], Opt(help="warm-up queries per run")] = None,
    validate_top: Annotated[int, Opt(help="candidates re-measured with the defaults")] = 2,
    validation_rounds: Annotated[int, Opt(help="interleaved rounds of the validation")] = 3,
    no_validate: Annotated[bool, Opt("--no-validate", help="skip the validation (best = search's best, unvalidated)")] = False,
    from_sweep: Annotated[Optional[Path], Opt(help="warm start: a sweep folder measured on this machine")] = None,
    history: HistoryOpt = None,
) -> int:
    """Find the fastest configuration under a latency SLO with Bayesian search (Optuna), each trial in a fresh
    process, the winner re-measured against the runtime's defaults. Exit 3 when no configuration meets the SLO."""
    from ..system import collect_system
    from ..tune.spec import TuneRequest, outcome_error, run_tune
    from .tune_view import TuneView

    request = TuneRequest(
        model, build_config(config_flags({"shape": shape, "dim": dim, "warmup": warmup}), config), axes_of(locals()),
        space_file=space, max_oversubscription=max_oversubscription, served=serve, variants_dir=variants,
        build_variants=None if build_variants is None else words(build_variants) or [], precision=words(precision),
        objective=objective, slo_p99_ms=slo_p99_ms, min_throughput=min_throughput, multi_objective=multi_objective,
        min_samples=min_samples, trial_duration_s=trial_duration_s, output=output, options=dict(
            n_trials=n_trials, sampler=sampler, seed=seed, storage=storage, study_name=study_name, timeout_s=timeout_s,
            validate=not no_validate, validate_top=validate_top, validation_rounds=validation_rounds,
            from_sweep=from_sweep))
    view = TuneView(collect_system())
    outcome = run_tune(request, command=["inferperf", *sys.argv[1:]], info=view.info, on_start=view.header,
                       on_trial=view.on_trial, on_validation=view.on_validation,
                       progress=lambda line: print(line, flush=True))
    view.summary(outcome.summary)
    best = request.folder / "best.json"
    if history and best.exists():
        from ..results.io import load as load_result

        record(history, [(str(best), load_result(best))])
    if (error := outcome_error(outcome)) is not None:  # every trial failed (exit 1), or none met the SLO (exit 3)
        raise error
    return 0
