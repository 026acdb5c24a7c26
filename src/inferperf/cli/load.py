"""``inferperf load``: HTTP load at a KServe v2 server (or any URL), closed or open loop, one Result per step.

``inferperf load URL --model NAME`` drives a running server. ``inferperf load
MODEL`` (an ONNX file or ``zoo:NAME``) first starts ``inferperf serve`` itself
(:func:`inferperf.serve.child.own_server`: a child process, so server and
generator share no interpreter lock) on a free 127.0.0.1 port,
pinned to CPUs disjoint from the generator's (both recorded), waits until it
is ready, runs the steps, stops it gracefully and writes the server-side
Result (kind ``serve``) beside the client's. Composed in ``tune/`` because
``loadgen`` never imports ``serve``.

The command maps its flags onto a :class:`~inferperf.loadgen.spec.LoadSpec` (a flag named as its LoadConfig
field needs no mapping: :func:`load_flags`), makes one library call
(:func:`inferperf.tune.served.run_load_spec`) and renders (:class:`~.load_lines.LoadConsole`); the spec refuses
contradictions and :func:`~inferperf.loadgen.spec.outcome_error` decides the exit code. Adding a mode: a
LoadConfig field, its flag here under the field's name, and its library function in
:func:`inferperf.loadgen.spec.runner_for`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..errors import Interrupted, UsageError
from ..interrupt import STOP
from ..loadgen.spec import load_config
from . import app
from .history import HistoryOpt, record_written, stamps
from .load_lines import LoadConsole, hard_stop_line, kept_line
from .options import Debug
from .outputs import check_writable, output_path

Opt = typer.Option

#: load's parameters named otherwise in LoadConfig (every other parameter named as a LoadConfig field sets it).
_FIELD_OF = {"shape": "shapes", "header": "headers"}
#: comma lists of numbers: parameter -> the number type.
_LISTS: dict[str, Callable[[str], Any]] = {"concurrency": int, "request_rate": float, "shape_weights": float}


def _numbers(text: str | None, flag: str, cast: Callable[[str], Any]) -> list[Any]:
    if text is None:
        return []
    try:
        return [cast(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: give comma-separated numbers, e.g. {flag} 1,4,16") from None


def load_flags(params: dict[str, Any]) -> dict[str, Any]:
    """The LoadConfig settings ``load``'s parameters (its ``locals()``) set: a parameter named as a field (or
    through :data:`_FIELD_OF`) sets it unless None or off; comma lists parsed; ``--no-stream`` is ``stream`` off.

    Raises:
        UsageError: a comma list that is not numbers (names its flag).
    """
    from ..loadgen.options import LoadConfig

    flags: dict[str, Any] = {"stream": False} if params.get("no_stream") else {}
    for name, value in params.items():
        field = _FIELD_OF.get(name, name)
        if field not in LoadConfig.model_fields or value is None or value is False:
            continue
        flags[field] = _numbers(value, f"--{name.replace('_', '-')}", _LISTS[name]) or None if name in _LISTS else value
    return flags


@app.command("load")
def load_command(
    target: Annotated[Optional[str], typer.Argument(help="http://HOST:PORT of a KServe v2 server (with --model), grpc://HOST:PORT"
                                                         " of its gRPC service, any URL (with --body), or an ONNX"
                                                         " file / zoo:NAME to serve and load")] = None,
    model: Annotated[Optional[str], Opt(help="model name on the server")] = None,
    concurrency: Annotated[Optional[str], Opt(help="closed loop: streams per step, e.g. 1,4,16 (default 1)")] = None,
    request_rate: Annotated[Optional[str], Opt(help="open loop: requests/s per step, e.g. 50,100,200")] = None,
    arrival: Annotated[str, Opt(help="open loop: constant | poisson | mmpp (bursty: 1 s spells at 2/3 and 4/3 of the rate) | trace:FILE (one offset per line)")] = "constant",
    trace_speed: Annotated[Optional[float], Opt(help="replay a trace this many times faster (default 1)")] = None,
    protocol: Annotated[str, Opt(help="json | binary (Triton's binary tensors); a grpc:// target sends raw contents")] = "json",
    streaming: Annotated[bool, Opt("--streaming", help="grpc:// only: ModelStreamInfer, one stream per connection"
                                                       " (perf_analyzer's --streaming)")] = False,
    shared_memory: Annotated[str, Opt(help="none | system: inputs and outputs through Triton's system shared memory"
                                          " (a server on this machine; perf_analyzer's flag)")] = "none",
    output_shared_memory_size: Annotated[Optional[int], Opt(help="--shared-memory system: bytes per output"
                                                                 " region (default 102400)")] = None,
    sequence_length: Annotated[Optional[int], Opt(help="sequence models: mean requests per sequence (default 20;"
                                                       " perf_analyzer's flag)")] = None,
    sequence_length_variation: Annotated[Optional[float], Opt(help="sequence models: length spread, percent"
                                                                   " (default 20)")] = None,
    sequence_id_range: Annotated[Optional[str], Opt(help="sequence models: ids START:END (default 1 upwards)")] = None,
    shape: Annotated[Optional[list[str]], Opt(help="input shape NAME:1x3x224x224; several make a mix; repeatable")] = None,
    shape_weights: Annotated[Optional[str], Opt(help="weights of the --shape values, e.g. 3,1")] = None,
    input_data: Annotated[Optional[str], Opt(help=".npz of inputs by name (leading axis = samples)")] = None,
    body: Annotated[Optional[str], Opt(help="plain URL: POST this file as the body")] = None,
    header: Annotated[Optional[list[str]], Opt(help="extra header K:V; repeatable")] = None,
    warmup_s: Annotated[Optional[float], Opt(help="seconds of each step never counted (default 2)")] = None,
    duration_s: Annotated[Optional[float], Opt(help="measured seconds per step (default: windows until stable)")] = None,
    requests: Annotated[Optional[int], Opt(help="stop each step after N measured requests")] = None,
    measurement_interval_ms: Annotated[Optional[int], Opt(help="window length, ms (default 5000)")] = None,
    stability_percentage: Annotated[Optional[float], Opt(help="throughput and p99 within this % over 3 windows"
                                                              " (default 10)")] = None,
    max_trials: Annotated[Optional[int], Opt(help="most windows per step (default 10)")] = None,
    max_connections: Annotated[Optional[int], Opt(help="open loop: most connections (default 256)")] = None,
    workers: Annotated[Optional[int], Opt(help="generator processes; samples pool exactly (default 1)")] = None,
    timeout_ms: Annotated[Optional[int], Opt(help="per-request deadline, ms (default 30000)")] = None,
    strict_rate: Annotated[bool, Opt("--strict-rate", help="exit 3 when an achieved rate is under 95 % of"
                                                           " its target")] = False,
    fail_on_invalid: Annotated[bool, Opt("--fail-on-invalid", help="exit 3 when a step is INVALID, after every step"
                                         " ran (an OVERLOADED step is a valid measurement and does not count)")] = False,
    seed: Annotated[Optional[int], Opt(help="seed of inputs and Poisson arrivals (default 0)")] = None,
    input_pool_size: Annotated[Optional[int], Opt(help="distinct payloads (default 16)")] = None,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="folder (or .json for one step) for the Results")] = None,
    csv_path: Annotated[Optional[Path], Opt("--csv", help="also write perf_analyzer-style CSV rows here")] = None,
    soak_s: Annotated[Optional[float], Opt(help="soak: hold ONE load this many seconds; per-interval figures,"
                                                " server RSS leak verdict and p99 drift")] = None,
    soak_interval_s: Annotated[Optional[float], Opt(help="soak: seconds per interval (default 10)")] = None,
    server_pid: Annotated[Optional[int], Opt(help="soak: read the server's RSS with psutil (default: its /metrics)")] = None,
    fail_on_leak: Annotated[bool, Opt("--fail-on-leak", help="soak: exit 3 when RSS growth is significant (95 %"
                                      " Newey-West CI) AND above 1 MiB/h and 1 KiB per 1,000 requests")] = False,
    from_locust_csv: Annotated[Optional[str], Opt("--from-locust-csv", help="import `locust --csv PREFIX` files as"
                                                  " summary-only Results (no TARGET)")] = None,
    stress: Annotated[bool, Opt("--stress", help="ramp the load (doubling) until throughput gains < --stress-gain-percent"
                                " over two steps, p99 > --slo-p99-ms or errors > --max-error-rate")] = False,
    find_max_rate: Annotated[bool, Opt("--find-max-rate", help="bracket then bisect open-loop rates: highest rate"
                                       " meeting --slo-p99-ms (goodput)")] = False,
    slo_p99_ms: Annotated[Optional[float], Opt(help="stress/capacity: p99 latency SLO, ms")] = None,
    max_error_rate: Annotated[Optional[float], Opt(help="stress/capacity: most errors per request (0..1)")] = None,
    stress_gain_percent: Annotated[Optional[float], Opt(help="stress: saturation when gains stay below this"
                                                        " (default 5)")] = None,
    api: Annotated[str, Opt(help="kserve (KServe v2 infer) | openai-chat (/v1/chat/completions) | openai-completions"
                                 " (/v1/completions) | triton-generate (/v2/models/M/generate_stream): token streams over SSE,"
                                 " docs/generate.md")] = "kserve",
    no_stream: Annotated[bool, Opt("--no-stream", help="openai-*: ask one JSON answer (end-to-end latency only)")] = False,
    max_tokens: Annotated[Optional[int], Opt(help="openai-*: max_tokens of each request (default: the server's)")] = None,
    ignore_eos: Annotated[bool, Opt("--ignore-eos", help="openai-*: send ignore_eos (vLLM, SGLang): always max_tokens")] = False,
    input_tokens: Annotated[Optional[int], Opt(help="openai-*: prompt length in tokens (mean; default 128)")] = None,
    input_tokens_std: Annotated[Optional[float], Opt(help="openai-*: --input-distribution normal: std, tokens")] = None,
    input_tokens_min: Annotated[Optional[int], Opt(help="openai-*: shortest prompt, tokens (default 1)")] = None,
    input_tokens_max: Annotated[Optional[int], Opt(help="openai-*: longest prompt, tokens (default 4 x mean)")] = None,
    input_distribution: Annotated[Optional[str], Opt(help="openai-*: prompt lengths fixed | normal | uniform"
                                                          " (default fixed; seeded by --seed)")] = None,
    tokenizer: Annotated[Optional[str], Opt(help="openai-*: a local tokenizer.json to count tokens (needs the"
                                                 " tokenizers library); default whitespace words, approximate")] = None,
    dataset: Annotated[Optional[str], Opt(help="openai-*: JSONL of {prompt, output_tokens?, timestamp_ms?} sent in"
                                               " order (replay the timestamps: --arrival trace:FILE)")] = None,
    slo_ttft_ms: Annotated[Optional[float], Opt(help="openai-*: goodput SLO on time to first token, ms")] = None,
    slo_tpot_ms: Annotated[Optional[float], Opt(help="openai-*: goodput SLO on time per output token, ms")] = None,
    history: HistoryOpt = None,
    debug: Debug = False,
) -> int:
    """Drive load at a served model and write one Result (kind load) per step: closed loop (--concurrency) or
    open loop (--request-rate, latency from the scheduled send time). Each step is VALID, INVALID (the measurement
    cannot be trusted) or OVERLOADED (open loop: the server fell behind the offered rate). Exit 1 if the target
    stopped answering (the step ends then, later steps are skipped), 3 with --strict-rate when a rate fell short
    or with --fail-on-invalid when a step is INVALID."""
    from ..loadgen.spec import LoadSpec

    spec = LoadSpec(target, load_flags(locals()), from_locust_csv, output, bool(history)).check()
    if output is not None:
        check_writable(output)
    command = ["inferperf", *sys.argv[1:]]
    if spec.from_locust_csv is not None:
        return _import_locust(spec.from_locust_csv, output, command)
    before = stamps(output)
    code = _run(spec, command, csv_path)
    if history and output is not None:
        record_written(history, output, before)
    return code


def _import_locust(prefix: str, output: Path | None, command: list[str]) -> int:
    """``--from-locust-csv``: Locust CSVs -> summary-only Results, written like other load Results."""
    from ..loadgen.locust_import import describe, locust_results
    from ..results.io import save

    results = locust_results(prefix, command=command)
    print(f"{'name':<28} {'users':>5} {'requests':>8} {'failures':>8} {'req/s':>9} {'p50 ms':>9} {'p99 ms':>9}")
    for row in describe(results):
        print(f"{row['name']:<28} {row['users']:>5d} {row['requests']:>8d} {row['failures']:>8d}"
              f" {row['queries_per_s']:>9.1f} {row['p50_ms']:>9.2f} {row['p99_ms']:>9.2f}")  # fmt: skip
    for r in results:
        if output is not None:
            print(f"  result written to {save(r, output_path(output, r))}", file=sys.stderr)
    return 0


def _run(spec: Any, command: list[str], csv_path: Path | None) -> int:
    """Run the checked ``spec`` (:func:`inferperf.tune.served.run_load_spec`) printing as it goes; then say what
    an interrupted run kept, or raise what :func:`inferperf.loadgen.spec.outcome_error` decided."""
    from ..loadgen.spec import outcome_error
    from ..tune.served import run_load_spec

    view = LoadConsole(spec.output, command)
    try:
        outcome = run_load_spec(spec, command=command, on_start=view.start, on_step=view.step,
                                on_interval=view.interval, on_progress=view.progress, on_end=view.end)
    except KeyboardInterrupt:  # a second signal: the hard stop; say what the finished steps left on disk
        if not view.running:
            raise  # a server starting or stopping: no step in progress
        raise Interrupted(hard_stop_line(view.cfg, view.shown, view.written, STOP.signal_name, view.log),
                          STOP.exit_code) from None
    view.finish(outcome, csv_path)
    if STOP.requested:
        raise Interrupted(kept_line(outcome.cfg, outcome.results, view.written, STOP.signal_name), STOP.exit_code)
    error = outcome_error(outcome)
    if error is not None:
        raise error
    return 0


__all__ = ["load_command", "load_config", "load_flags"]
