"""``inferperf serve``: a KServe v2 REST server (Triton's binary, config and statistics extensions) for one model
(or a model repository). The flags map onto :class:`~inferperf.serve.spec.ServeSpec` (which refuses
contradictions), :func:`~inferperf.serve.spec.run_serve` serves, and this module prints."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from pydantic import ValidationError

from ..errors import UsageError, first_error
from ..results.io import save
from . import app
from .outputs import check_writable, output_path
from .options import SESSION_FLAGS, Backend, Debug, Dim, Shape, build_config, config_flags, with_session_flags

if TYPE_CHECKING:
    from ..config import BenchConfig
    from ..serve.options import ServeOptions

Opt = typer.Option

#: the parameters of :func:`serve_command` that set up one model, declared once: refused with --model-repository
#: (each of its models has its own model.yaml or config.pbtxt) and with --mock-generate (no model at all); given
#: means not None, False, 0 or [].
MODEL_PARAMS = ("model", "model_name", "max_batch_size", "dynamic_batching", "max_queue_delay_us",
                "preferred_batch_size", "max_queue_size", "instance_count", "cpus", "backend", *SESSION_FLAGS,
                "shape", "dim", "config", "output", "json_nonfinite", "request_timeout_ms", "input_data")


def serve_options(flags: dict[str, Any], section: dict[str, Any], config_file: Path | None) -> Any:
    """ServeOptions from the settings file's ``serve:`` section overlaid with the flags given (None = not given).

    Raises:
        UsageError: an unknown or out-of-range setting (names the flag or the file).
    """
    from ..serve.options import ServeOptions

    doc = {**section, **{k: v for k, v in flags.items() if v is not None}}
    try:
        return ServeOptions.model_validate(doc)
    except ValidationError as e:
        kind, where, msg, _ = first_error(e)
        if kind == "extra_forbidden":
            raise UsageError(f"--config {config_file}: unknown serve setting '{where}': see inferperf serve --help") from None
        flag = f"--{where.replace('_', '-')}" if where in flags and flags[where] is not None else f"serve.{where}"
        raise UsageError(f"{flag}: {msg}" if where else msg) from None


@app.command("serve")
@with_session_flags
def serve_command(
    model: Annotated[Optional[str], typer.Argument(help="ONNX file or zoo:NAME (or --model-repository)")] = None,
    model_repository: Annotated[Optional[Path], Opt(help="serve every model of this folder: NAME/model.yaml + an ONNX"
                                                          " file, or Triton's NAME/config.pbtxt + NAME/<version>/model.onnx")] = None,
    model_control_mode: Annotated[str, Opt(help="with --model-repository: none (load every model, API refuses) |"
                                                " explicit (only --load-model; POST /v2/repository/... loads/unloads)")] = "none",
    load_model: Annotated[Optional[list[str]], Opt(help="explicit mode: a model to load at start (repeatable)")] = None,
    max_concurrent_loads: Annotated[int, Opt(help="model loads running at once (default 1)")] = 1,
    max_loaded_models: Annotated[int, Opt(help="explicit mode: a load past this many models first unloads the"
                                               " least recently used (default 0 = no limit)")] = 0,
    exit_on_error: Annotated[bool, Opt("--exit-on-error", help="with --model-repository: a model that cannot be"
                                                                " served stops the server (Triton's flag); default:"
                                                                " it is UNAVAILABLE with its reason in the repository"
                                                                " index and the others are served")] = False,
    host: Annotated[str, Opt(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, Opt(help="TCP port (0 = any free port)")] = 8000,
    grpc_port: Annotated[Optional[int], Opt(help="KServe v2 / Triton gRPC port (default: --port + 1, i.e. 8001"
                                                 " beside 8000; any free port with --port 0)")] = None,
    no_grpc: Annotated[bool, Opt("--no-grpc", help="serve HTTP only")] = False,
    grpc_max_message_bytes: Annotated[int, Opt(help="largest gRPC request message (default 0: --max-body-bytes +"
                                                    " 64 KiB; gRPC's own default is 4 MiB)")] = 0,
    model_name: Annotated[Optional[str], Opt(help="name in the URLs (default: file stem or zoo name)")] = None,
    max_batch_size: Annotated[Optional[int], Opt(help="most rows one model call takes (Triton's meaning); 0 = no batch"
                                                      " dim; default: 4 when the leading dim is free, else 0")] = None,
    dynamic_batching: Annotated[bool, Opt("--dynamic-batching", help="Triton's dynamic_batching {}: off unless given"
                                                                      " or implied by the next three flags")] = False,
    max_queue_delay_us: Annotated[Optional[int], Opt(help="most us the oldest request waits for more rows (default 0)")] = None,
    preferred_batch_size: Annotated[Optional[list[int]], Opt(help="rows that dispatch at once; repeatable")] = None,
    max_queue_size: Annotated[Optional[int], Opt(help="waiting requests beyond which 503 (default 0 = unbounded)")] = None,
    instance_count: Annotated[Optional[int], Opt(help="model instances running batches in parallel (default 1; Triton's ORT default on CPU is 2,"
                                                        " but here each instance gets CPUs / instances threads)")] = None,
    request_timeout_ms: Annotated[Optional[int], Opt(help="a request still queued this long gets 504 at that moment,"
                                                          " never run (default 0 = no deadline)")] = None,
    max_body_bytes: Annotated[Optional[int], Opt(help="request bodies over this get 413 (default 64 MiB)")] = None,
    cpus: Annotated[Optional[str], Opt(help="pin the instances to these CPUs, e.g. 0-3")] = None,
    no_metrics: Annotated[bool, Opt("--no-metrics", help="turn Prometheus metrics off: no per-request hooks, GET /metrics answers 404")] = False,
    latency_buckets: Annotated[Optional[str], Opt(help="the duration histograms' edges in seconds, comma-separated"
                                                      " (default 0.00005 .. 10); a histogram p99 is only known to"
                                                      " its bucket")] = None,
    allow_client_shm: Annotated[bool, Opt("--allow-client-shm", help="serve Triton's system shared memory: clients on this machine pass tensors in /dev/shm")] = False,
    slo_ms: Annotated[Optional[float], Opt(help="latency SLO in ms, added as a histogram edge so the share within it"
                                                " and an alert on it are exact")] = None,
    json_nonfinite: Annotated[Optional[str], Opt(help="NaN/Inf in a JSON answer: error (default: 500, strict JSON) | literal (NaN/Infinity tokens, as Triton writes them)")] = None,
    backend: Backend = None,
    shape: Shape = None,
    dim: Dim = None,
    seed: Annotated[Optional[int], Opt(help="seed of the warm-up inputs (default 0)")] = None,
    warmup: Annotated[Optional[int], Opt(help="warm-up runs per shape and instance (default 10; 0 = ready without"
                                              " warm-up)")] = None,
    input_data: Annotated[Optional[Path], Opt(help="warm-up inputs: .npz keyed by input name (.npy for one input);"
                                                   " needed for string (BYTES) inputs")] = None,
    api_key: Annotated[Optional[str], Opt(envvar="INFERPERF_API_KEY", show_envvar=True,
                                          help="require Authorization: Bearer KEY on every route but /v2/health/*"
                                               " (and /metrics unless --metrics-auth)")] = None,
    request_receipt_timeout_s: Annotated[float, Opt(help="a request's bytes must all arrive within this many s of its"
                                                         " first byte, else 408 and close (slow clients; 0 = off)")] = 30.0,
    timeout_keep_alive_s: Annotated[int, Opt(help="close idle keep-alive connections after this many s")] = 30,
    limit_concurrency: Annotated[int, Opt(help="connections + requests in progress beyond which 503 (0 = no limit)")] = 0,
    access_log: Annotated[Optional[str], Opt(help="write one JSON line per request here (- = stderr)")] = None,
    metrics_auth: Annotated[bool, Opt("--metrics-auth", help="with --api-key: /metrics needs the key too")] = False,
    loop: Annotated[str, Opt(help="event loop: auto (uvloop when installed) | uvloop | asyncio")] = "auto",
    http: Annotated[str, Opt(help="HTTP parser: auto (httptools when installed) | httptools | h11")] = "auto",
    grace_s: Annotated[float, Opt(help="on SIGTERM/SIGINT, seconds readiness is 503 before the server stops"
                                       " accepting (then every accepted request is answered)")] = 0.0,
    config: Annotated[Optional[Path], Opt(help="settings file (.yaml/.json/.toml): BenchConfig fields + serve:")] = None,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="write a Result (kind serve) here when the server stops")] = None,
    allocator: Annotated[Optional[str], Opt(help="system | jemalloc | tcmalloc: the server re-executes itself (same"
                                                 " PID) with Debian's libjemalloc2 / libtcmalloc-minimal4 LD_PRELOAD-ed")] = None,
    mock_generate: Annotated[bool, Opt("--mock-generate", help="serve a MOCK OpenAI-compatible token server"
                                                                " (tests and demos; see docs/generate.md) instead of a model")] = False,
    mock_profile: Annotated[Optional[Path], Opt(help="--mock-generate: its latency model (YAML/JSON of MockProfile keys)")] = None,
    mock_log: Annotated[Optional[Path], Opt(help="--mock-generate: append the mock's true send times here (JSON lines)")] = None,
    debug: Debug = False,
    **session: Any,
) -> int:
    """Serve MODEL (or every model of --model-repository) over KServe v2 REST and gRPC (Triton's
    GRPCInferenceService, on --grpc-port) with Triton's extensions, dynamic batching, model instances and Prometheus metrics at /metrics. Stops
    gracefully on SIGTERM/SIGINT."""
    from ..serve.options import ListenOptions
    from ..serve.spec import RepositoryControl, ServeSpec, run_serve

    params = {**locals(), **session}
    given = [_flag(name) for name in MODEL_PARAMS if params[name] not in (None, False, [])]
    if mock_generate or mock_profile is not None or mock_log is not None:
        from .serve_mock import serve_mock

        ListenOptions(host=host, port=port, grace_s=grace_s)  # the real server's checks (--port 99999: exit 2)
        return serve_mock(mock_generate, given, model_repository, mock_profile, mock_log, host, port, loop, http)
    spec = ServeSpec(
        model, model_repository, RepositoryControl(model_control_mode, load_model or [], max_concurrent_loads,
                                                   max_loaded_models, exit_on_error),
        host=host, port=port, grace_s=grace_s, request_receipt_timeout_s=request_receipt_timeout_s,
        timeout_keep_alive_s=timeout_keep_alive_s, limit_concurrency=limit_concurrency, api_key=api_key,
        metrics_auth=metrics_auth, access_log=access_log, loop=loop, http=http, metrics=not no_metrics,
        model_name=model_name, warmup=warmup, result=output is not None, model_flags=given, grpc=not no_grpc,
        grpc_port=grpc_port, grpc_max_message_bytes=grpc_max_message_bytes, latency_buckets=latency_buckets,
        slo_ms=slo_ms, allow_client_shm=allow_client_shm,
    ).check(warn=_warn)  # the refusals, before any file is read or model loaded
    if model_repository is None:
        spec.cfg, spec.opts = _settings(params, config)
        if output is not None:
            check_writable(output)
    result = run_serve(spec, on_started=lambda line: print(line, flush=True), warn=_warn,
                       command=["inferperf", *sys.argv[1:]])
    if result is not None and output is not None:
        print(f"result written to {save(result, output_path(output, result))}", file=sys.stderr)
    return 0


def _flag(param: str) -> str:
    """A parameter of :func:`serve_command` as the command line names it (``MODEL``, ``--max-batch-size``)."""
    return "MODEL" if param == "model" else "--" + param.replace("_", "-")


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr)


def _settings(params: dict[str, Any], config: Path | None) -> tuple[BenchConfig, ServeOptions]:
    """One model's (BenchConfig, ServeOptions) from the command's parameters over the settings file (and its
    ``serve:`` section); ``--warmup 0`` leaves the file's count.

    Raises:
        UsageError: a malformed or out-of-range flag or setting (names the flag or the file).
    """
    from ..serve.options import ServeOptions

    section: dict[str, Any] = {}
    cfg = build_config(config_flags(params, **{"warmup.iterations": params["warmup"] or None}), config,
                       serve_section=section)
    flags = {name: params.get(name) for name in ServeOptions.model_fields}  # a flag per field, of the same name
    flags.update(dynamic_batching=True if params["dynamic_batching"] else None,
                 preferred_batch_size=params["preferred_batch_size"] or None,
                 metrics=False if params["no_metrics"] else None)
    if params["cpus"] is not None:
        from ..measure.placement import parse_cpus

        flags["cpus"] = parse_cpus(params["cpus"])
    return cfg, serve_options(flags, section, config)
