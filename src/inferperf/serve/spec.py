"""What ``inferperf serve`` is asked to do, as one validated spec: one model (its BenchConfig and ServeOptions) or
a model repository, where to listen, the connection limits, the API key and the access log.

:meth:`ServeSpec.check` refuses contradictions itself, so :func:`run_serve` (the library call behind the command)
gets the same one-line refusals as the CLI; the command only maps its flags onto the spec and renders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..config import BenchConfig
from ..errors import UsageError
from ..results.model import Result
from .options import ConnectionLimits, ListenOptions, ServeOptions

#: hosts that listen on every address: without an API key anyone who reaches the port may use the server
ALL_ADDRESSES = ("0.0.0.0", "::", "")


@dataclass
class RepositoryControl:
    """How a model repository's models are loaded (Triton's flags): ``mode`` none (every model at start, the API
    refuses loads) | explicit (only ``load_models`` at start; the API loads and unloads); ``max_concurrent_loads``
    loads at once; ``max_loaded_models`` (0 = no limit) past which a load first unloads the least recently used;
    ``exit_on_error``: a model that cannot be served stops the server (else it is UNAVAILABLE with its reason)."""

    mode: str = "none"
    load_models: list[str] = field(default_factory=list)
    max_concurrent_loads: int = 1
    max_loaded_models: int = 0
    exit_on_error: bool = False

    @property
    def given(self) -> bool:
        """A setting that means something only with a repository (mode, models to load, exit on error)."""
        return bool(self.load_models) or self.mode != "none" or self.exit_on_error


@dataclass
class ServeSpec:
    """One server to run.

    Attributes:
        model: ONNX path or ``zoo:NAME`` (one model), or None with ``model_repository`` (every model of that
        folder, each with its own settings). control: the repository's model control. host / port (0 = any free
        port) / grace_s: where to listen and how many s readiness is 503 on SIGTERM/SIGINT before the server stops
        accepting. request_receipt_timeout_s / timeout_keep_alive_s / limit_concurrency: the
        :class:`~inferperf.serve.options.ConnectionLimits`. api_key / metrics_auth: the key every route but
        ``/v2/health/*`` needs (and ``/metrics`` with ``metrics_auth``). access_log: a file for one JSON line per
        request (``-``: stderr). loop / http: the uvicorn stack (:func:`.server.uvicorn_stack`). metrics: False
        turns Prometheus metrics off (a repository; one model's is ``opts.metrics``). model_name: the name in the
        URLs. warmup: warm-up runs as ``--warmup`` gives them (0: ready without warm-up; the count itself is
        ``cfg.warmup.iterations``). cfg / opts: one model's settings (None: the defaults). result: build the
        kind-``serve`` Result when the server stops. model_flags: the flags setting up one model that the caller
        gave (``MODEL``, ``--max-batch-size``, ...): refused with a repository, whose models carry their own.
        grpc / grpc_port / grpc_max_message_bytes: KServe v2 / Triton gRPC beside HTTP (on by default; the port
        :meth:`resolved_grpc_port` gives; request messages up to that many bytes, 0 = sized from the models' body
        limit; :class:`~inferperf.serve.grpc_front.GrpcFront`). latency_buckets / slo_ms: the duration
        histograms' edges (s; a comma list as ``--latency-buckets`` gives it, or numbers) and an SLO (ms) added
        as an edge (:func:`~inferperf.serve.metrics.duration_buckets`); None: the defaults. allow_client_shm: serve
        Triton's system shared memory (:mod:`.shm`).
    """

    model: str | None = None
    model_repository: Path | None = None
    control: RepositoryControl = field(default_factory=RepositoryControl)
    host: str = "127.0.0.1"
    port: int = 8000
    grace_s: float = 0.0
    request_receipt_timeout_s: float = 30.0
    timeout_keep_alive_s: int = 30
    limit_concurrency: int = 0
    api_key: str | None = None
    metrics_auth: bool = False
    access_log: str | None = None
    loop: str = "auto"
    http: str = "auto"
    metrics: bool = True
    model_name: str | None = None
    warmup: int | None = None
    cfg: BenchConfig | None = None
    opts: ServeOptions | None = None
    result: bool = False
    model_flags: list[str] = field(default_factory=list)
    grpc: bool = True
    grpc_port: int | None = None
    grpc_max_message_bytes: int = 0
    allow_client_shm: bool = False
    latency_buckets: str | Sequence[float] | None = None
    slo_ms: float | None = None

    def duration_edges(self) -> tuple[float, ...] | None:
        """The duration histograms' edges (s) that ``latency_buckets`` and ``slo_ms`` ask for; None: defaults.

        Raises:
            UsageError: edges that are not numbers (names ``--latency-buckets``), or as
                :func:`~inferperf.serve.metrics.duration_buckets`.
        """
        from .metrics import duration_buckets

        if self.latency_buckets is None and self.slo_ms is None:
            return None
        edges = self.latency_buckets
        if isinstance(edges, str):
            try:
                edges = [float(x) for x in edges.split(",") if x.strip()]
            except ValueError:
                raise UsageError(f"--latency-buckets {self.latency_buckets!r}: give comma-separated seconds, e.g. "
                                 "0.005,0.01,0.025,0.05,0.1") from None
        return duration_buckets(edges, self.slo_ms)

    def resolved_grpc_port(self) -> int | None:
        """gRPC's port: ``grpc_port`` when given, else ``port`` + 1 (8001 beside 8000, Triton's convention; 0
        beside port 0: any free port); None with ``grpc`` off.

        Raises:
            UsageError: ``grpc_port`` with ``grpc`` off, or ``port`` + 1 past 65535 (names the flag to give).
        """
        if not self.grpc:
            if self.grpc_port is not None:
                raise UsageError("--grpc-port with --no-grpc: give one or the other")
            return None
        if self.grpc_port is not None:
            return self.grpc_port
        if self.port == 0:
            return 0
        if self.port == 65535:  # (a port past 65535 is refused as --port's own error)
            raise UsageError(f"--port {self.port}: gRPC's default port {self.port + 1} is past 65535: pass "
                             "--grpc-port N or --no-grpc")
        return self.port + 1

    def connection_limits(self) -> ConnectionLimits:
        """The connection settings, checked.

        Raises:
            pydantic.ValidationError: a value out of range (the message names the flag).
        """
        return ConnectionLimits(request_receipt_timeout_s=self.request_receipt_timeout_s,
                                timeout_keep_alive_s=self.timeout_keep_alive_s, limit_concurrency=self.limit_concurrency)

    def check(self, warn: Callable[[str], None] | None = None) -> ServeSpec:
        """Refuse what cannot be served, before any model loads; returns self. ``warn`` gets the line about
        listening on every address without an API key.

        Raises:
            UsageError: an empty API key, ``metrics_auth`` without a key, bad latency buckets or SLO, a gRPC port
                that cannot be
                (:meth:`resolved_grpc_port`), an access log that cannot be appended
                to, one model's settings with a repository, neither a model nor a repository, repository control
                without a repository, a negative warm-up.
            pydantic.ValidationError: a port outside 0..65535, a negative grace or connection limit out of range
                (the message names the flag).
        """
        self._check_auth(warn)
        ListenOptions(host=self.host, port=self.port, grace_s=self.grace_s, grpc_port=self.resolved_grpc_port(),
                      grpc_max_message_bytes=self.grpc_max_message_bytes)
        self.connection_limits()
        self.duration_edges()
        if self.access_log not in (None, "-"):
            from .access_log import AccessLog

            AccessLog(self.access_log).close()  # appendable now, before the models load
        if self.model_repository is not None:
            given = self._model_given()
            if given:
                raise UsageError(f"{', '.join(given)} with --model-repository: set them per model in its model.yaml"
                                 " (or config.pbtxt), or serve one model without --model-repository")
            return self
        if self.model is None:
            raise UsageError("give a MODEL (ONNX file or zoo:NAME) or --model-repository DIR")
        if self.control.given:
            raise UsageError("--model-control-mode / --load-model / --exit-on-error need --model-repository DIR")
        if self.warmup is not None and self.warmup < 0:
            raise UsageError(f"--warmup {self.warmup}: use 0 (ready without warm-up) or more runs")
        return self

    def _check_auth(self, warn: Callable[[str], None] | None) -> None:
        from .auth import check_api_key

        if self.api_key is not None:
            check_api_key(self.api_key)
        elif self.metrics_auth:
            raise UsageError("--metrics-auth needs --api-key KEY (or INFERPERF_API_KEY)")
        elif self.host in ALL_ADDRESSES and warn is not None:
            warn(f"--host {self.host or '(all)'} without --api-key: anyone who can reach this port can use the"
                 " server; pass --api-key KEY (or INFERPERF_API_KEY)")

    def _model_given(self) -> list[str]:
        """``model_flags`` and whatever else of one model is set, each named once."""
        own = (("MODEL", self.model), ("--model-name", self.model_name), ("--output", self.result or None),
               ("cfg", self.cfg), ("opts", self.opts))
        return list(dict.fromkeys([*self.model_flags, *(name for name, v in own if v is not None)]))


def run_serve(spec: ServeSpec, *, on_started: Callable[[str], None] | None = None,
              warn: Callable[[str], None] | None = None, command: list[str] | None = None) -> Result | None:
    """Check ``spec``, load its model (or its repository's models), then serve in this thread until SIGTERM/SIGINT
    and shut down gracefully. A model's ``cfg.allocator`` other than system re-executes this process with it
    preloaded first (:func:`inferperf.measure.allocator.reexec_with_allocator`).

    Args:
        spec: what to serve (:class:`ServeSpec`).
        on_started: gets the one-line banner (URL, stack, each model's batching and instances) once the server
            accepts connections.
        warn: gets each warning line of a repository's models (the exposure warning is :meth:`ServeSpec.check`'s).
        command: argv recorded in the Result.

    Returns:
        The kind-``serve`` Result over the serving window when ``spec.result`` (one model), else None.

    Raises:
        UsageError / ModelError: as :meth:`ServeSpec.check`, :func:`.server.uvicorn_stack`, :func:`.server.prepare`,
            :func:`.server.prepare_repository` and :func:`.server.run_server` (a port in use); nothing is bound
            before the models load.
        pydantic.ValidationError: as :meth:`ServeSpec.check`.
    """
    from .server import banner, prepare, prepare_repository, run_server, uvicorn_stack

    spec.check()
    if spec.model_repository is None:
        spec.cfg = spec.cfg or BenchConfig()
        spec.opts = spec.opts or ServeOptions(metrics=spec.metrics)
        if spec.cfg.allocator != "system":
            from ..measure.allocator import reexec_with_allocator

            reexec_with_allocator(spec.cfg.allocator)  # before any model loads
    stack = uvicorn_stack(spec.loop, spec.http)  # a bad or missing one: one line, before the models load
    if on_started is not None:  # a command line: the server's log lines (/v2/logging switches them) to stderr
        from .log_settings import log_to_stderr

        log_to_stderr()
    if spec.model_repository is None:
        served = prepare(spec.model, spec.cfg, spec.opts, name=spec.model_name, warmup=spec.warmup != 0)
    else:
        c = spec.control
        served = prepare_repository(spec.model_repository, metrics=spec.metrics, warn=warn, mode=c.mode,
                                    load_models=c.load_models, max_concurrent_loads=c.max_concurrent_loads,
                                    max_loaded_models=c.max_loaded_models, exit_on_error=c.exit_on_error)
    served.limits = spec.connection_limits()
    if spec.allow_client_shm:
        served.allow_client_shm()
    edges = spec.duration_edges()
    if edges is not None:
        served.metrics.set_duration_buckets(edges)
    if spec.api_key is not None:
        served.require_api_key(spec.api_key, spec.metrics_auth)
    if spec.access_log is not None:
        served.log_access(spec.access_log)
    host_url = f"[{spec.host}]" if ":" in spec.host else spec.host

    def started(port: int, grpc_port: int | None) -> None:
        if on_started is not None:
            grpc = f"{host_url}:{grpc_port}" if grpc_port is not None else None
            on_started(banner(served, f"http://{host_url}:{port}", stack, grpc))

    run_server(served, spec.host, spec.port, grace_s=spec.grace_s, on_started=started, loop=stack[0], http=stack[1],
               grpc_port=spec.resolved_grpc_port(), grpc_max_message_bytes=spec.grpc_max_message_bytes)
    if not spec.result or spec.model_repository is not None:
        return None
    from .result import serve_result

    return serve_result(served, spec.model, spec.cfg, command=command)


__all__ = ["ALL_ADDRESSES", "RepositoryControl", "ServeSpec", "run_serve"]
