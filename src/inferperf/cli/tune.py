"""``inferperf tune``: Bayesian search for the fastest configuration under a latency SLO, validated, resumable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..errors import GateFailed, UsageError
from ..measure.speedup import sig
from . import app
from .axes import bools, ints, session_config_axis, words
from .history import HistoryOpt, record
from .options import (BackendAxis, BatchSizeAxis, ConcurrencyAxis, Dim, ExecutionModeAxis,
    GraphOptimizationLevelAxis, InterOpThreadsAxis, IntraOpThreadsAxis, SessionModeAxis, Shape)

Opt = typer.Option


def _space(flags: dict[str, Any], space_file: Path | None, serve: bool, max_oversubscription: float | None) -> Any:
    """The space: the file's axes overlaid with the flags given; the machine's default space when none is given."""
    from importlib.util import find_spec

    from ..backends.base import backend_names
    from ..system import collect_system
    from ..tune.space import check_values, default_space, load_space, validate_space

    doc: dict[str, Any] = load_space(space_file).model_dump(exclude_none=True) if space_file else {}
    doc.update({k: v for k, v in flags.items() if v})
    if max_oversubscription is not None:
        doc["max_oversubscription"] = max_oversubscription
    axes = {k: v for k, v in doc.items() if k != "max_oversubscription" and v}
    if not axes:
        installed = ["onnxruntime"] + (["openvino"] if find_spec("openvino") else [])  # found, not imported
        base = default_space(collect_system(), installed, serve=serve).model_dump(exclude_none=True)
        doc = {**base, **({"max_oversubscription": doc["max_oversubscription"]} if "max_oversubscription" in doc else {})}
    space = validate_space(doc, "--space" if space_file else "the axes")
    check_values(space, [b for b in backend_names() if b != "null"])
    return space


def _build_variants(model: str, names: list[str], output: Path | None, shape: list[str] | None) -> Path:
    """Build ``names`` with ``optimize`` (accuracy checked against fp32, no speed measurement) into OUTPUT/variants."""
    from ..optimize import optimize
    from ..optimize.spec import OptimizeOptions

    folder = (output or Path(f"inferperf-tune-{Path(model.removeprefix('zoo:')).stem}")) / "variants"
    shapes = {}
    for text in shape or []:
        from ..workload.shapes import parse_shape

        name, dims = parse_shape(text)
        shapes[name] = dims
    bench = {"workload": {"shapes": shapes}} if shapes else {}
    print(f"building variants {', '.join(names)} into {folder}/ (accuracy against fp32; no speed measurement)", flush=True)
    optimize(model, OptimizeOptions.model_validate({"variants": names, "measure": False, "bench": bench}), output=folder)
    return folder


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
    from ..tune.objective import Goal, samples_for_percentile
    from ..tune.run import TuneSpec, tune
    from ..tune.space import load_variants
    from ..tune.trial import IsolatedEvaluator, TrialPlan
    from .options import build_config

    info = collect_system()
    goal = Goal("multi" if multi_objective else objective, slo_p99_ms, min_throughput, info.effective_cpus)  # type: ignore[arg-type]
    if build_variants is not None and variants is not None:
        raise UsageError("pass --variants DIR (variants already built) or --build-variants LIST, not both")
    axes = {
        "backend": words(backend),
        "intra_op_num_threads": ints(intra_op_num_threads, "--intra-op-num-threads"),
        "inter_op_num_threads": ints(inter_op_num_threads, "--inter-op-num-threads"),
        "execution_mode": words(execution_mode), "graph_optimization_level": words(graph_optimization_level),
        "enable_mem_pattern": bools(enable_mem_pattern, "--enable-mem-pattern"),
        "enable_cpu_mem_arena": bools(enable_cpu_mem_arena, "--enable-cpu-mem-arena"),
        "session_config": session_config_axis(session_config), "batch_size": ints(batch_size, "--batch-size"),
        "concurrency": ints(concurrency, "--concurrency"), "session_mode": words(session_mode),
        "allocator": words(allocator), "max_batch_size": ints(max_batch_size, "--max-batch-size"),
        "max_queue_delay_us": ints(max_queue_delay_us, "--max-queue-delay-us"),
        "instance_count": ints(instance_count, "--instance-count"),
    }  # fmt: skip
    base = build_config({"workload.shapes": shape, "workload.dims": dim, "warmup.iterations": warmup}, config)
    need = min_samples or (samples_for_percentile(99.0) if (slo_p99_ms is not None or objective == "p99"
                                                           or multi_objective) else 100)
    plan = TrialPlan(min_samples=need, duration_s=trial_duration_s, max_duration_s=base.stop.max_duration_s)
    output = output or Path(f"inferperf-tune-{Path(model.removeprefix('zoo:')).stem}")

    def make_spec(found: dict[str, str]) -> TuneSpec:
        """The spec (it checks itself: budget, serving axes, precision ...) with ``found`` as the variants."""
        wanted = words(precision) or (sorted(found) if found else None)
        return TuneSpec(model=model, base=base, space=_space({**axes, "precision": wanted}, space, serve,
                                                             max_oversubscription),
                        goal=goal, plan=plan, n_trials=n_trials, output=output, sampler=sampler, seed=seed,
                        storage=storage, study_name=study_name, timeout_s=timeout_s, validate=not no_validate,
                        validate_top=validate_top, validation_rounds=validation_rounds, served=serve,
                        from_sweep=from_sweep, variants=found)

    if build_variants is not None:  # every other flag is checked before the build (minutes), with stand-in files
        make_spec({name: model for name in ["fp32", *(words(build_variants) or [])]})
        variants = _build_variants(model, words(build_variants) or [], output, shape)
    spec = make_spec(load_variants(variants) if variants is not None else {})
    the_space = spec.space
    command = ["inferperf", *sys.argv[1:]]
    if serve:
        from ..tune.served import ServedEvaluator

        evaluator: Any = ServedEvaluator(command=command)
    else:
        evaluator = IsolatedEvaluator(command=command)
    from .tune_view import TuneView, params_text

    view = TuneView(spec, the_space, info)
    try:  # the header once every input is checked: a bad budget, space, storage or model is the only line
        outcome = tune(spec, evaluator, info=info, on_trial=view.on_trial, on_validation=view.on_validation,
                       on_start=view.header)
    except KeyboardInterrupt:
        from ..errors import Interrupted
        from ..interrupt import STOP

        raise Interrupted(f"interrupted by {STOP.signal_name}: every finished trial is kept in the study ({output});"
                          " rerun the same command to continue", STOP.exit_code) from None
    view.summary(outcome.summary)
    s = outcome.summary
    if history and (output / "best.json").exists():
        from ..results.io import load as load_result

        record(history, [(str(output / "best.json"), load_result(output / "best.json"))])
    if s["best"] is None and s.get("closest") is None and s["this_pass"]["failed"]:
        from ..errors import MeasurementError

        first = next((r["note"] for r in _failed_rows(outcome.study)), "")
        raise MeasurementError(f"every trial failed (first: {first}); see {output}/trials.csv")
    if s["best"] is None:
        c = s.get("closest")
        near = (f": closest was trial {c['trial']} ({params_text(c['config'])}) with p99 {sig(c['p99_ms'])} ms at"
                f" {sig(c['throughput'])} samples/s") if c else ""
        raise GateFailed(f"no configuration met {goal.describe().split(' subject to ')[-1]}{near}; relax the SLO or widen"
                         " the space")
    return 0



def _failed_rows(study: Any) -> list[dict[str, Any]]:
    """The trials that failed to run, in order (for the one-line error when every trial failed)."""
    from ..tune.output import trial_rows

    return [r for r in trial_rows(study) if r["state"] == "fail"]
