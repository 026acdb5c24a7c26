"""``inferperf profile MODEL``: per-operator time from ONNX Runtime's profiler; ``--diff A B`` compares two."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from . import app
from .options import Backend, Debug, GraphOptimizationLevel, IntraOpThreads, Shape, build_config

Opt = typer.Option


def _diff(a: str, b: str, basis: str, min_change: float, by: str = "op") -> int:
    from ..analysis.profile import diff_profiles, diff_table
    from ..results.io import load

    profs = []
    for path in (a, b):
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"--diff: {path} is not a file: pass two profile Result JSON files")
        r = load(p)
        if r.kind != "profile" or not r.metrics.profile:
            raise UsageError(f"--diff: {path} is a {r.kind} Result, not a profile: make one with `inferperf profile`")
        profs.append(r.metrics.profile)
    typer.echo(diff_table(diff_profiles(profs[0], profs[1], min_change_percent=min_change, basis=basis, by=by)))
    return 0


@app.command("profile")
def profile_command(
    model: Annotated[Optional[str], typer.Argument(help="ONNX file or zoo:NAME")] = None,
    diff: Annotated[Optional[list[str]], Opt(help="two profile Result files: --diff A B (or --diff A --diff B)")] = None,
    runs: Annotated[int, Opt(help="profiled runs after warm-up (capped to fit ORT's 1M events)")] = 20,
    warmup_runs: Annotated[int, Opt(help="runs set apart at the start of the trace (kernel search)")] = 3,
    top: Annotated[int, Opt(help="nodes listed")] = 10,
    shape: Shape = None,
    backend: Backend = None,
    intra_op_num_threads: IntraOpThreads = None,
    graph_optimization_level: GraphOptimizationLevel = None,
    duration_s: Annotated[Optional[float], Opt(help="unprofiled reference: minimum seconds (default 2)")] = 2.0,
    trace_dir: Annotated[Optional[Path], Opt(help="folder for the Chrome trace (default: temp dir)")] = None,
    basis: Annotated[str, Opt(help="--diff: share (of kernel time, drift-robust) | ms")] = "share",
    by: Annotated[str, Opt(help="--diff: op (type names as recorded) | family (Conv = Conv, FusedConv, OpenVINO "
                                "Convolution, aten::conv2d ...: pairs runtimes)")] = "op",
    min_change_percent: Annotated[float, Opt(help="--diff: smallest change (%) called; sequential profiles drift 10-30 % here")] = 20.0,
    config: Annotated[Optional[Path], Opt(help="settings file under BenchConfig's field names")] = None,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="profile Result file (.json)")] = None,
    debug: Debug = False,
) -> int:
    """Where the time goes per operator type and node, with Amdahl ceilings: ONNX Runtime's profiler (default),
    OpenVINO's PERF_COUNT counters (--backend openvino) or torch.profiler (--backend torch)."""
    if diff and len(diff) == 1 and model:  # `--diff A B`: B lands in MODEL's place
        diff, model = [diff[0], model], None
    if diff:
        if len(diff) != 2 or model:
            raise UsageError("profile --diff takes exactly two Result files: --diff A.json --diff B.json")
        if basis not in ("share", "ms"):
            raise UsageError(f"--basis {basis}: use share or ms")
        if by not in ("op", "family"):
            raise UsageError(f"--by {by}: use op or family")
        return _diff(diff[0], diff[1], basis, min_change_percent, by)
    if not model:
        raise UsageError("profile needs MODEL (an ONNX file or zoo:NAME), or --diff A --diff B")
    from ..analysis.profile import profile_table, summarize_profile
    from ..measure.profile import profile
    from ..results.io import save

    flags = {"backend": backend, "workload.shapes": shape, "session.intra_op_num_threads": intra_op_num_threads,
             "session.graph_optimization_level": graph_optimization_level,
             "stop.min_duration_s": duration_s, "stop.max_duration_s": max(10.0, (duration_s or 0) * 2)}
    cfg = build_config(flags, config)
    result = summarize_profile(profile(model, cfg, runs=runs, warmup=warmup_runs, trace_dir=trace_dir), top=top)
    typer.echo(profile_table(result.metrics.profile))
    for note in result.notes:
        typer.echo(f"note: {note}")
    if output is not None:
        typer.echo(f"saved {save(result, output)}")
    return 0
