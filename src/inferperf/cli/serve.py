"""``inferperf serve``: a KServe v2 REST server (Triton's binary, config and statistics extensions) for one model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError

from ..errors import UsageError
from . import app
from .outputs import check_writable
from .options import (Backend, Dim, ExecutionMode, GraphOptimizationLevel, InterOpThreads, IntraOpThreads, Providers,
    SessionConfig, Shape, build_config)

Opt = typer.Option


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
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].replace("Value error, ", "")
        if err["type"] == "extra_forbidden":
            raise UsageError(f"--config {config_file}: unknown serve setting '{where}': see inferperf serve --help") from None
        flag = f"--{where.replace('_', '-')}" if where in flags and flags[where] is not None else f"serve.{where}"
        raise UsageError(f"{flag}: {msg}" if where else msg) from None


@app.command("serve")
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
    json_nonfinite: Annotated[Optional[str], Opt(help="NaN/Inf in a JSON answer: error (default: 500, strict JSON)"
                                                       " | literal (NaN/Infinity tokens, as Triton writes them)")] = None,
    backend: Backend = None,
    intra_op_num_threads: IntraOpThreads = None,
    inter_op_num_threads: InterOpThreads = None,
    execution_mode: ExecutionMode = None,
    graph_optimization_level: GraphOptimizationLevel = None,
    providers: Providers = None,
    session_config: SessionConfig = None,
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
    debug: Annotated[bool, Opt("--debug", help="show tracebacks")] = False,
) -> int:
    """Serve MODEL (or every model of --model-repository) over KServe v2 REST (gRPC is out of scope) with
    Triton's extensions, dynamic batching, model instances and Prometheus metrics at /metrics. Stops
    gracefully on SIGTERM/SIGINT."""
    from ..serve.options import ConnectionLimits, ListenOptions

    per_model = {"MODEL": model, "--model-name": model_name, "--max-batch-size": max_batch_size,
                 "--dynamic-batching": dynamic_batching or None, "--max-queue-delay-us": max_queue_delay_us,
                 "--preferred-batch-size": preferred_batch_size, "--max-queue-size": max_queue_size,
                 "--instance-count": instance_count, "--cpus": cpus, "--backend": backend,
                 "--intra-op-num-threads": intra_op_num_threads, "--shape": shape, "--dim": dim,
                 "--config": config, "--output": output, "--json-nonfinite": json_nonfinite,
                 "--request-timeout-ms": request_timeout_ms, "--input-data": input_data}
    given = [k for k, v in per_model.items() if v not in (None, False, [])]
    if mock_generate or mock_profile is not None or mock_log is not None:
        from .serve_mock import serve_mock

        ListenOptions(host=host, port=port, grace_s=grace_s)  # the real server's checks (--port 99999: exit 2)
        return serve_mock(mock_generate, given, model_repository, mock_profile, mock_log, host, port, loop, http)
    _check_auth(api_key, metrics_auth, host)
    ListenOptions(host=host, port=port, grace_s=grace_s)  # the library's checks, before any model loads
    conn = ConnectionLimits(request_receipt_timeout_s=request_receipt_timeout_s,
                            timeout_keep_alive_s=timeout_keep_alive_s, limit_concurrency=limit_concurrency)
    if access_log not in (None, "-"):
        from ..serve.access_log import AccessLog

        AccessLog(access_log).close()  # appendable now (the library's check), before the models load
    if model_repository is not None:
        if given:
            raise UsageError(f"{', '.join(given)} with --model-repository: set them per model in its model.yaml"
                             " (or config.pbtxt), or serve one model without --model-repository")
        return _serve_repository(model_repository, host, port, loop, http, grace_s, not no_metrics,
                                 model_control_mode, load_model or [],
                                 (max_concurrent_loads, max_loaded_models, exit_on_error),
                                 (api_key, metrics_auth, access_log), conn)
    if model is None:
        raise UsageError("give a MODEL (ONNX file or zoo:NAME) or --model-repository DIR")
    if load_model or model_control_mode != "none" or exit_on_error:
        raise UsageError("--model-control-mode / --load-model / --exit-on-error need --model-repository DIR")
    flags = {
        "backend": backend,
        "session.intra_op_num_threads": intra_op_num_threads,
        "session.inter_op_num_threads": inter_op_num_threads,
        "session.execution_mode": execution_mode,
        "session.graph_optimization_level": graph_optimization_level,
        "session.providers": providers,
        "session.session_config": session_config,
        "workload.shapes": shape,
        "workload.dims": dim,
        "workload.seed": seed,
        "workload.input_data": str(input_data) if input_data else None,
        "warmup.iterations": warmup or None,
        "allocator": allocator,
    }
    if warmup is not None and warmup < 0:
        raise UsageError(f"--warmup {warmup}: use 0 (ready without warm-up) or more runs")
    section: dict[str, Any] = {}
    cfg = build_config(flags, config, serve_section=section)
    if cfg.allocator != "system":
        from ..measure.allocator import reexec_with_allocator

        reexec_with_allocator(cfg.allocator)  # before any model loads
    serve_flags: dict[str, Any] = {
        "max_batch_size": max_batch_size,
        "dynamic_batching": True if dynamic_batching else None,
        "max_queue_delay_us": max_queue_delay_us,
        "preferred_batch_size": preferred_batch_size or None,
        "max_queue_size": max_queue_size,
        "instance_count": instance_count,
        "max_body_bytes": max_body_bytes,
        "metrics": False if no_metrics else None,
        "json_nonfinite": json_nonfinite,
        "request_timeout_ms": request_timeout_ms,
    }
    if cpus is not None:
        from ..measure.placement import parse_cpus

        serve_flags["cpus"] = parse_cpus(cpus)
    opts = serve_options(serve_flags, section, config)
    if output is not None:
        check_writable(output)
    from ..serve.server import prepare, uvicorn_stack

    stack = uvicorn_stack(loop, http)  # a bad or missing one: one line, before the model loads
    served = prepare(model, cfg, opts, name=model_name, warmup=warmup != 0)  # loads, warms up, then binds
    _run(served, host, port, stack, grace_s, (api_key, metrics_auth, access_log), conn)
    if output is not None:
        from ..results.io import save
        from ..serve.result import serve_result
        from .outputs import output_path

        result = serve_result(served, model, cfg, command=["inferperf", *sys.argv[1:]])
        print(f"result written to {save(result, output_path(output, result))}", file=sys.stderr)
    return 0


def _serve_repository(root: Path, host: str, port: int, loop: str, http: str, grace_s: float, metrics: bool,
                      mode: str, load_models: list[str], limits: tuple[int, int, bool],
                      auth: tuple[str | None, bool, str | None], conn: Any) -> int:  # fmt: skip
    """``inferperf serve --model-repository DIR``: load the models, then serve until SIGTERM/SIGINT."""
    from ..serve.server import prepare_repository, uvicorn_stack

    stack = uvicorn_stack(loop, http)
    served = prepare_repository(root, metrics=metrics, warn=lambda line: print(f"warning: {line}", file=sys.stderr),
                                mode=mode, load_models=load_models, max_concurrent_loads=limits[0],
                                max_loaded_models=limits[1], exit_on_error=limits[2])
    _run(served, host, port, stack, grace_s, auth, conn)
    return 0


def _check_auth(key: str | None, metrics_auth: bool, host: str) -> None:
    """Refuse an empty key (the library's check) or --metrics-auth alone; warn when listening on every address
    without a key.

    Raises:
        UsageError: the bad combination (one line naming the fix).
    """
    if key is not None:
        from ..serve.auth import check_api_key

        check_api_key(key)
    if key is None and metrics_auth:
        raise UsageError("--metrics-auth needs --api-key KEY (or INFERPERF_API_KEY)")
    if key is None and host in ("0.0.0.0", "::", ""):
        print(f"warning: --host {host or '(all)'} without --api-key: anyone who can reach this port can use"
              " the server; pass --api-key KEY (or INFERPERF_API_KEY)", file=sys.stderr)


def _run(served: Any, host: str, port: int, stack: tuple[str, str], grace_s: float,
         auth: tuple[str | None, bool, str | None], conn: Any) -> None:  # fmt: skip
    """Bind, print the banner once serving, and serve in this thread until SIGTERM/SIGINT (graceful);
    ``auth`` = (API key or None, whether /metrics needs it, access log target or None); ``conn`` = the
    :class:`~inferperf.serve.options.ConnectionLimits`."""
    from ..serve.server import banner, run_server

    served.limits = conn

    key, metrics_auth, access_log = auth
    if key is not None:
        served.require_api_key(key, metrics_auth)
    if access_log is not None:
        served.log_access(access_log)

    host_url = f"[{host}]" if ":" in host else host

    def on_started(port_bound: int) -> None:
        print(banner(served, f"http://{host_url}:{port_bound}", stack), flush=True)

    run_server(served, host, port, grace_s=grace_s, on_started=on_started, loop=stack[0], http=stack[1])
