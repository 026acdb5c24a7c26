"""``inferperf load``: HTTP load at a KServe v2 server (or any URL), closed or open loop, one Result per step.

``inferperf load URL --model NAME`` drives a running server. ``inferperf load
MODEL`` (an ONNX file or ``zoo:NAME``) first starts ``inferperf serve`` itself
(:func:`inferperf.serve.child.own_server`: a child process, so server and
generator share no interpreter lock) on a free 127.0.0.1 port,
pinned to CPUs disjoint from the generator's (both recorded), waits until it
is ready, runs the steps, stops it gracefully and writes the server-side
Result (kind ``serve``) beside the client's. Composed in ``tune/`` because
``loadgen`` never imports ``serve``.

Adding a mode (stress, soak, Locust import): add its flags to
:func:`load_command`, put them in the ``flags`` dict (LoadConfig fields) and
route to its library function in :func:`_runner`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError

from ..errors import GateFailed, Interrupted, MeasurementError, UsageError
from ..interrupt import STOP, cooperative
from ..serve.child import own_server, split_cpus
from . import app
from .history import HistoryOpt, record_written, stamps
from .load_lines import (IntervalLog, findings_line, hard_stop_line, interval_line, kept_line, lost_line, refused_line,
                         soak_intervals, step_label, table_header, table_row)
from .outputs import check_writable, output_path

Opt = typer.Option


def _numbers(text: str | None, flag: str, cast: Callable[[str], Any]) -> list[Any]:
    if text is None:
        return []
    try:
        return [cast(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: give comma-separated numbers, e.g. {flag} 1,4,16") from None


def load_config(flags: dict[str, Any]) -> Any:
    """LoadConfig from the flags given (None = default); a refused value is one UsageError line naming its flag."""
    from ..loadgen.options import LoadConfig

    try:
        return LoadConfig.model_validate({k: v for k, v in flags.items() if v is not None})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"] if not isinstance(x, int))
        msg = err["msg"].replace("Value error, ", "")
        flag = f"--{where.replace('_', '-')}: " if where and not msg.startswith("--") else ""
        raise UsageError(f"{flag}{msg}") from None


def _runner(cfg: Any) -> Callable[..., list[Any]]:
    """The library function a run dispatches to (stress, soak add their branches here)."""
    from ..loadgen.run import load

    if getattr(cfg, "soak_s", None) is not None:
        from ..loadgen.soak import soak

        return soak
    if getattr(cfg, "stress", False) or getattr(cfg, "find_max_rate", False):
        from ..loadgen.stress import stress

        return stress
    return load


@app.command("load")
def load_command(
    target: Annotated[Optional[str], typer.Argument(help="http://HOST:PORT of a KServe v2 server (with --model), any URL"
                                                         " (with --body), or an ONNX file / zoo:NAME to serve and load")] = None,
    model: Annotated[Optional[str], Opt(help="model name on the server")] = None,
    concurrency: Annotated[Optional[str], Opt(help="closed loop: streams per step, e.g. 1,4,16 (default 1)")] = None,
    request_rate: Annotated[Optional[str], Opt(help="open loop: requests/s per step, e.g. 50,100,200")] = None,
    arrival: Annotated[str, Opt(help="open loop: constant | poisson | mmpp (bursty: 1 s spells at 2/3 and 4/3 of the rate) | trace:FILE (one offset per line)")] = "constant",
    trace_speed: Annotated[Optional[float], Opt(help="replay a trace this many times faster (default 1)")] = None,
    protocol: Annotated[str, Opt(help="json | binary (Triton's binary tensors)")] = "json",
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
    debug: Annotated[bool, Opt("--debug", help="show tracebacks")] = False,
) -> int:
    """Drive load at a served model and write one Result (kind load) per step: closed loop (--concurrency) or
    open loop (--request-rate, latency from the scheduled send time). Each step is VALID, INVALID (the measurement
    cannot be trusted) or OVERLOADED (open loop: the server fell behind the offered rate). Exit 1 if the target
    stopped answering (the step ends then, later steps are skipped), 3 with --strict-rate when a rate fell short
    or with --fail-on-invalid when a step is INVALID."""
    flags: dict[str, Any] = {
        "model": model, "concurrency": _numbers(concurrency, "--concurrency", int) or None,
        "request_rate": _numbers(request_rate, "--request-rate", float) or None, "arrival": arrival,
        "trace_speed": trace_speed, "protocol": protocol, "shapes": shape, "input_data": input_data, "body": body,
        "shape_weights": _numbers(shape_weights, "--shape-weights", float) or None, "headers": header,
        "warmup_s": warmup_s, "duration_s": duration_s, "requests": requests,
        "measurement_interval_ms": measurement_interval_ms, "stability_percentage": stability_percentage,
        "max_trials": max_trials, "max_connections": max_connections, "workers": workers, "timeout_ms": timeout_ms,
        "strict_rate": strict_rate or None, "fail_on_invalid": fail_on_invalid or None, "seed": seed,
        "input_pool_size": input_pool_size,
        "soak_s": soak_s, "soak_interval_s": soak_interval_s, "server_pid": server_pid,
        "fail_on_leak": fail_on_leak or None,
        "stress": stress or None, "find_max_rate": find_max_rate or None, "slo_p99_ms": slo_p99_ms,
        "max_error_rate": max_error_rate, "stress_gain_percent": stress_gain_percent,
        "api": api, "stream": False if no_stream else None, "max_tokens": max_tokens, "ignore_eos": ignore_eos or None,
        "input_tokens": input_tokens, "input_tokens_std": input_tokens_std, "input_tokens_min": input_tokens_min,
        "input_tokens_max": input_tokens_max, "input_distribution": input_distribution, "tokenizer": tokenizer,
        "dataset": dataset, "slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms,
    }  # fmt: skip
    if from_locust_csv is not None:
        return _import_locust(from_locust_csv, target, output)
    if target is None:
        raise UsageError("give a TARGET (URL, ONNX file or zoo:NAME) or --from-locust-csv PREFIX")
    is_url = "://" in target
    cfg = load_config({**flags, "url": target if is_url else None})
    if cfg.api != "kserve" and not is_url:
        raise UsageError(f"--api {cfg.api} loads a running server: give its URL (e.g. http://127.0.0.1:8000; a mock:"
                         " inferperf serve --mock-generate)")
    if output is not None:
        check_writable(output)
    elif history:
        raise UsageError("--history adds the step Results load writes: pass --output DIR")
    if cfg.arrival.startswith("trace:"):
        from ..measure.arrivals import load_trace

        load_trace(cfg.arrival[len("trace:"):])
    command = ["inferperf", *sys.argv[1:]]
    before = stamps(output)
    if is_url:
        code = _run(cfg, command, output, csv_path, placement=None)
    else:
        code = _run_own_server(target, cfg, command, output, csv_path)
    if history and output is not None:
        record_written(history, output, before)
    return code


def _import_locust(prefix: str, target: str | None, output: Path | None) -> int:
    """``--from-locust-csv``: Locust CSVs -> summary-only Results, written like other load Results."""
    from ..loadgen.locust_import import describe, locust_results
    from ..results.io import save

    if target is not None:
        raise UsageError("--from-locust-csv takes no TARGET: drop it")
    if output is not None:
        check_writable(output)
    results = locust_results(prefix, command=["inferperf", *sys.argv[1:]])
    print(f"{'name':<28} {'users':>5} {'requests':>8} {'failures':>8} {'req/s':>9} {'p50 ms':>9} {'p99 ms':>9}")
    for row in describe(results):
        print(f"{row['name']:<28} {row['users']:>5d} {row['requests']:>8d} {row['failures']:>8d}"
              f" {row['queries_per_s']:>9.1f} {row['p50_ms']:>9.2f} {row['p99_ms']:>9.2f}")  # fmt: skip
    for r in results:
        if output is not None:
            print(f"  result written to {save(r, output_path(output, r))}", file=sys.stderr)
    return 0


def _run_own_server(model_arg: str, cfg: Any, command: list[str], output: Path | None, csv_path: Path | None) -> int:
    cpus = sorted(os.sched_getaffinity(0))
    gen, srv = split_cpus(cpus)
    placement = {"generator_cpus": gen, "server_cpus": srv, "disjoint": not set(gen) & set(srv)}
    with own_server(model_arg, srv) as (url, name, stop):
        cfg = cfg.model_copy(update={"url": url, "model": cfg.model or name, "shapes": _zoo_shapes(model_arg, cfg)})
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, gen)
        try:
            code = _run(cfg, command, output, csv_path, placement=placement, after=stop)
        finally:
            os.sched_setaffinity(0, before)
    return code


def _zoo_shapes(model_arg: str, cfg: Any) -> list[str]:
    """``--shape`` values of a run on its own server: the given ones, else the zoo model's default shapes (as
    ``bench`` measures it: ``load zoo:ppocr-cls`` sends x:1x3x48x192), none with ``--input-data``."""
    from ..zoo import default_shapes

    if cfg.shapes or cfg.input_data is not None:
        return list(cfg.shapes)
    return [f"{k}:{'x'.join(map(str, dims))}" for k, dims in default_shapes(model_arg).items()]


def _run(cfg: Any, command: list[str], output: Path | None, csv_path: Path | None,
         placement: dict | None, after: Callable[[], Any] | None = None) -> int:  # fmt: skip
    from ..loadgen.gen_target import read_load_target as read_target
    from ..results.io import save

    try:
        target = read_target(cfg)  # an unreachable target or a shape the model refuses: one line, no table
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM before the steps' cooperative section: say nothing was kept
        raise Interrupted(kept_line(cfg, [], [], STOP.signal_name), STOP.exit_code) from None
    header = [table_header(cfg.mode)]  # printed with the first step: an input error comes before any table
    written: list[Path] = []
    shown: list[Any] = []  # the Results handed to the console (what a hard stop keeps)

    def on_step(r: Any) -> None:
        shown.append(r)
        if header:
            print(header.pop(), flush=True)
        if placement is not None:
            r.run["placement"] = placement
            r.config.placement.cpus = placement["generator_cpus"]
            if not placement["disjoint"]:
                r.notes.append("one CPU: the generator and the server share it")
        print(table_row(r), flush=True)
        if r.metrics.generation is not None:
            from .gen_lines import generation_line

            print(generation_line(r.metrics.generation), flush=True)
        for note in r.notes:
            print(f"  note: {note}", flush=True)
        if output is not None:
            written.append(save(r, output_path(output, r)))
            print(f"  result written to {written[-1]}", file=sys.stderr)

    extra: dict[str, Any] = {}
    if cfg.stress or cfg.find_max_rate:  # the plan, then a line before each step (stderr: the table stays clean)
        extra["on_progress"] = lambda line: print(line, file=sys.stderr, flush=True)
    log = None
    if cfg.soak_s is not None:  # a line per interval as it ends, and on disk with -o
        total = soak_intervals(cfg)
        log = IntervalLog(output, cfg, command) if output is not None else None

        def on_interval(iv: dict) -> None:
            print(interval_line(iv, total), flush=True)
            if log is not None:
                log(iv)

        extra["on_interval"] = on_interval
    try:
        with cooperative():  # Ctrl-C / SIGTERM end the step in progress, kept and marked (inferperf.interrupt)
            results = _runner(cfg)(cfg, command=command, on_step=on_step, target=target, **extra)
    except KeyboardInterrupt:  # a second signal: the hard stop; say what the finished steps left on disk
        raise Interrupted(hard_stop_line(cfg, shown, written, STOP.signal_name, log), STOP.exit_code) from None
    found = (results[-1].metrics.client or {}).get("stress") if results else None
    if found:
        print(findings_line(found), flush=True)
    server = after() if after is not None else None
    if server is not None and output is not None:
        server.run["placement"] = placement
        print(f"server result written to {save(server, output_path(output, server))}", file=sys.stderr)
    if csv_path is not None:
        from ..loadgen.csv import write_csv

        print(f"csv written to {write_csv(results, csv_path)}", file=sys.stderr)
    if STOP.requested:
        raise Interrupted(kept_line(cfg, results, written, STOP.signal_name), STOP.exit_code)
    refused = next(((r.metrics.client or {})["rejected"] for r in results if (r.metrics.client or {}).get("rejected")),
                   None)  # fmt: skip
    if refused:
        raise UsageError(refused_line(cfg, refused))
    lost = [r for r in results if (r.metrics.client or {}).get("target_lost")]
    if lost:
        raise MeasurementError(lost_line(lost[0], results, cfg))
    if cfg.fail_on_invalid:
        bad = [r for r in results if not r.validity.valid]
        if bad:
            raise GateFailed(f"--fail-on-invalid: {len(bad)} of {len(results)} step(s) INVALID (first, at"
                             f" {step_label(bad[0])}: {'; '.join(bad[0].validity.reasons)})")
    if cfg.strict_rate:
        from ..loadgen.run import rate_short

        short = [r for r in results if rate_short(r)]
        if short:
            c = short[0].metrics.client or {}
            raise GateFailed(f"--strict-rate: achieved {c['achieved_rate']:.1f} req/s of the {c['scheduled_rate']:.1f}"
                             f" scheduled (target {c['target_rate']:g})")
    return 0
