"""``inferperf bench``: latency percentiles, throughput and cold start of one model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from ..errors import GateFailed, UsageError
from ..measure.loop import LiveState
from ..measure.spec import DEFAULT_MODEL
from ..results.io import save
from ..results.model import Result
from . import app
from .history import HistoryOpt, record
from .outputs import check_writable, output_path
from .options import (BatchSize, Debug, Dim, DurationS, FailOnInvalid, InputData, Iterations, JsonOut, MaxDurationS,
    Shape, Warmup, build_config, config_flags, with_session_flags)
from .render import live_progress, print_result

Opt = typer.Option


@app.command("bench")
@with_session_flags
def bench_command(
    model: Annotated[Optional[str], typer.Argument(help="ONNX file or zoo:NAME (default zoo:resnet50)")] = None,
    backend: Annotated[Optional[str], Opt(help="onnxruntime | openvino | torch | null (scripted latency, runs no model);"
                                              " a comma list compares runtimes (NAME=MODEL gives one its own model)")] = None,
    shape: Shape = None,
    dim: Dim = None,
    batch_size: BatchSize = None,
    input_pool_size: Annotated[Optional[int], Opt(help="distinct seeded inputs cycled through (default 16)")] = None,
    seed: Annotated[Optional[int], Opt(help="seed of the input generator (default 0)")] = None,
    int_range: Annotated[Optional[list[str]], Opt(help="NAME=LO:HI inclusive range of an integer input")] = None,
    value: Annotated[Optional[list[str]], Opt(help="NAME=V: fill an input with a constant")] = None,
    input_data: InputData = None,
    force: Annotated[bool, Opt("--force", help="allow an input pool over 25 % of RAM")] = False,
    warmup: Warmup = None,
    warmup_s: Annotated[Optional[float], Opt(help="minimum warm-up seconds (default 0)")] = None,
    iterations: Iterations = None,
    duration_s: DurationS = None,
    max_duration_s: MaxDurationS = None,
    percentile_method: Annotated[Optional[str], Opt(help="linear | nearest-rank")] = None,
    scenario: Annotated[Optional[str], Opt(help="single-stream | concurrent | offline (open-loop arrivals over HTTP:"
                                               " `inferperf load --request-rate`)")] = None,
    concurrency: Annotated[Optional[int], Opt(help="closed-loop streams (threads); > 1 implies concurrent")] = None,
    session_mode: Annotated[Optional[str], Opt(help="shared (one session) | per-stream (one each)")] = None,
    cpus: Annotated[Optional[str], Opt(help="pin the measuring process to these CPUs, e.g. 0-1")] = None,
    numa_node: Annotated[Optional[int], Opt(help="bind CPUs and memory to this NUMA node (numactl)")] = None,
    repeat: Annotated[Optional[int], Opt(help="runs, each in a fresh worker process (CIs over runs)")] = None,
    ab: Annotated[Optional[tuple[str, str]], Opt("--ab", help="BASE CURRENT: two models in ABBA rounds (--repeat, even,"
                                                             " default 4) -> OUTPUT/base and OUTPUT/current")] = None,
    no_sampler: Annotated[bool, Opt("--no-sampler", help="turn the 10 Hz resource sampler off")] = False,
    allocator: Annotated[Optional[str], Opt(help="system | jemalloc | tcmalloc (LD_PRELOAD of Debian's libjemalloc2 /"
                                                 " libtcmalloc-minimal4 in a worker process)")] = None,
    null_latency_ms: Annotated[Optional[str], Opt(help="null backend: comma list of latencies (ms) to replay")] = None,
    config: Annotated[Optional[Path], Opt(help="settings file (.yaml/.json/.toml) under BenchConfig's field names")] = None,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="result file (.json) or folder")] = None,
    json_out: JsonOut = False,
    fail_on_invalid: FailOnInvalid = False,
    soak_s: Annotated[Optional[float], Opt(help="soak: run exactly N measured seconds and give an RSS leak verdict"
                                                " (significant AND above 1 MiB/h and 1 KiB per 1,000 requests)")] = None,
    fail_on_leak: Annotated[bool, Opt("--fail-on-leak", help="with --soak-s: exit 3 on a leak")] = False,
    pre: Annotated[Optional[str], Opt(help="module:function: raw item -> the model's feeds, timed as its own stage"
                                           " (needs --pre-input)")] = None,
    post: Annotated[Optional[str], Opt(help="module:function: the model's outputs -> anything, timed as its own stage")] = None,
    pre_input: Annotated[Optional[str], Opt(help="raw items for --pre: a folder (each file's bytes) or module:function"
                                                 " (a generator)")] = None,
    history: HistoryOpt = None,
    debug: Debug = False,
    **session: Any,
) -> int:
    """Measure latency percentiles, throughput and cold start of MODEL (SingleStream by default;
    Concurrent with --concurrency N; Offline with --scenario offline --batch-size N)."""
    from ..measure.spec import BenchSpec, gate_message

    compare = backend is not None and "," in backend  # each runtime of a comparison is set per case
    flags = config_flags({**locals(), **session}, **_parsed(cpus, null_latency_ms), **({"backend": None} if compare else {}))
    cfg = build_config(flags, config)
    spec = BenchSpec(DEFAULT_MODEL if model is None else model, cfg, soak_s, backend, ab, pre, post, pre_input,
                     bool(history), fail_on_leak, fail_on_invalid).check()
    if output is not None:
        check_writable(output)
    if ab:
        from .compare import ab_command

        return ab_command(ab, spec.cfg, output, repeat)
    if spec.compare:
        from .runtimes import compare_command

        return compare_command(spec.model, backend, spec.cfg, output, json_out, fail_on_invalid)
    result = _measure(spec, output)
    _report(result, output, json_out)
    if history:
        record(history, [(str(output or "bench"), result)])
    gate = gate_message(spec, result)
    if gate:
        raise GateFailed(gate)
    return 0


def _parsed(cpus: str | None, null_latency_ms: str | None) -> dict[str, Any]:
    """``--cpus`` and ``--null-latency-ms`` as settings (the settings check their own combinations: BenchConfig).

    Raises:
        UsageError: one line naming the flag and the fix.
    """
    flags: dict[str, Any] = {}
    if cpus is not None:
        from ..measure.placement import parse_cpus

        flags["placement.cpus"] = parse_cpus(cpus)
    if null_latency_ms:
        try:
            flags["null_latency_ms"] = [float(x) for x in null_latency_ms.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"malformed --null-latency-ms {null_latency_ms!r}: use numbers in ms, e.g. 1.5,2") from None
    return flags


def _measure(spec: Any, output: Path | None) -> Result:
    """Run :func:`inferperf.measure.spec.run_bench` with progress on stderr; with repeats each finished run is
    printed, and saved under ``OUTPUT/runs/`` when ``--output`` is a folder."""
    from ..measure.spec import run_bench

    cfg = spec.cfg
    err = Console(stderr=True)
    argv = ["inferperf", *sys.argv[1:]]
    run_dir = output if output is not None and output.suffix != ".json" else None

    def on_run(case: int, round_: int, run: Result) -> None:
        # each finished run is kept at once: an interrupted --repeat loses only the run in flight
        pid = run.run.get("pid")
        where = ""
        if run_dir is not None:
            where = f" -> {save(run, run_dir / 'runs' / f'{run.case_key}-run{round_}-pid{pid}.json')}"
        err.print(f"run {round_ + 1}/{cfg.repeat}: {run.metrics.throughput.queries_per_s:.1f} queries/s"
                  f" (pid {pid}){where}", highlight=False)

    if cfg.repeat > 1 or cfg.placement.numa_node is not None:
        return run_bench(spec, command=argv, on_run=on_run)
    live = LiveState()
    with live_progress(live, cfg.stop.min_iterations, cfg.stop.min_duration_s, err):
        return run_bench(spec, command=argv, live=live)


def _report(result: Result, output: Path | None, json_out: bool) -> None:
    """Save the Result to ``--output`` (if given), then print it as JSON (``--json``) or as the table."""
    written = None
    if output is not None:
        written = save(result, output_path(output, result))
    if json_out:
        sys.stdout.write(result.model_dump_json(indent=1) + "\n")
    else:
        print_result(result, Console(), str(written) if written else None)
