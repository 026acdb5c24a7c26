"""Run the serving app on uvicorn: the library entry point ``serving(...)`` and the CLI's blocking ``run_server``.

uvicorn uses uvloop and httptools when installed (they come with
``uvicorn[standard]``), else asyncio and h11; ``loop`` / ``http`` (``--loop``,
``--http``) choose explicitly, as uvicorn's own flags do. The socket is bound here, before
uvicorn starts, so a port in use is one :class:`~inferperf.errors.UsageError`
line and port 0 gives an ephemeral port. Shutdown is graceful: readiness turns
503 at once (liveness stays 200), for ``grace_s`` seconds the server keeps
serving (so a load balancer can stop sending), then it stops accepting
connections, answers every request already accepted, drains the batcher
(``ServedModel.close(drain=True)``) and returns. The app is built by :mod:`inferperf.serve.build`
(``prepare``, ``prepare_repository``, importable from here too).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import uvicorn

from ..clock import SYSTEM_CLOCK, Clock
from ..config import BenchConfig
from ..errors import UsageError
from ..measure.threads import LOOP_NAME, name_this_thread, native_id, rename_loop_children
from .app import ServeApp
from .build import close_models, prepare, prepare_repository  # noqa: F401 - prepare*: public here too
from .http_protocol import http_protocol
from .listen import HTTPS, LOOPS, bind_socket, check_grpc_port, uvicorn_stack  # noqa: F401 - public here too
from .metrics import ServerMetrics
from .options import ListenOptions, ServeOptions


#: how long running gRPC calls may go on once the server stops (then UNAVAILABLE); under ServerHandle.stop's 60 s
GRPC_DRAIN_S = 30.0


def _now_s() -> float:
    return SYSTEM_CLOCK.now_ns() / 1e9


def _grpc_front(app: ServeApp, host: str, grpc_port: int | None, max_message_bytes: int) -> Any:
    """A :class:`~inferperf.serve.grpc_front.GrpcFront` for ``app`` (its port checked), or None (``grpc_port``
    None: gRPC off)."""
    if grpc_port is None:
        return None
    check_grpc_port(host, grpc_port)
    from .grpc_front import GrpcFront

    return GrpcFront(app, host, grpc_port, max_message_bytes)


class _Server(uvicorn.Server):
    """uvicorn's server with inferperf's shutdown: readiness 503 first, a grace period, then uvicorn's drain.

    Signals (main thread only): the first SIGTERM/SIGINT begins the graceful shutdown; a second SIGINT
    forces exit. Unlike uvicorn's default, the signal is not re-raised afterwards, so the CLI exits 0.
    """

    def __init__(self, config: uvicorn.Config, app: ServeApp, grace_s: float,
                 on_started: Callable[[int], None] | None = None, grpc: Any = None) -> None:  # fmt: skip
        super().__init__(config)
        self.serve_app = app
        self.grace_s = grace_s
        self.on_started = on_started
        self.grpc = grpc  # a GrpcFront (serve/grpc_front.py) started on this loop after uvicorn, or None
        self.grpc_error: BaseException | None = None
        self.all_started = False  # uvicorn's ``started`` turns True inside its startup, before gRPC is up
        self._exit_at: float | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        name_this_thread(LOOP_NAME)  # the event loop's thread, by name (measure/threads.py's roles)
        self.serve_app.loop_tid = native_id()
        await super().startup(sockets)
        if self.grpc is not None and not self.should_exit:
            try:
                await self.grpc.start()  # on uvicorn's loop, after the lifespan warmed the models
            except RuntimeError as e:  # grpc could not bind (a port taken since the check in bind_free)
                self.grpc_error = e
                self.should_exit = True
                return
        rename_loop_children(self.serve_app.loop_tid)  # threads grpc started from this one inherited its name
        self.serve_app.metrics.start_window()
        self.all_started = True
        if self.on_started is not None and sockets and not self.should_exit:
            self.on_started(sockets[0].getsockname()[1])

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.grpc is not None:  # new RPCs refused at once, running ones answered, before the models drain
            await self.grpc.stop(grace_s=GRPC_DRAIN_S)
        await super().shutdown(sockets)

    def begin_shutdown(self) -> None:
        """Turn readiness 503 now; stop after ``grace_s`` (checked on uvicorn's 0.1 s tick)."""
        self.serve_app.shutting_down = True
        if self._exit_at is None:
            self._exit_at = _now_s() + self.grace_s
            if self.grace_s <= 0:
                self.should_exit = True

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._exit_at is not None and sig == signal.SIGINT:
            self.force_exit = True
        self.begin_shutdown()

    async def on_tick(self, counter: int) -> bool:
        if counter % 10 == 0 and self.serve_app.loop_tid is not None:  # once a second: threads started lazily
            rename_loop_children(self.serve_app.loop_tid)
        if self._exit_at is not None and _now_s() >= self._exit_at:
            self.should_exit = True
        return await super().on_tick(counter)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        sigs = (signal.SIGINT, signal.SIGTERM)
        original = {s: signal.signal(s, self.handle_exit) for s in sigs}
        try:
            yield
        finally:
            for s, handler in original.items():
                signal.signal(s, handler)


@dataclass
class ServerHandle:
    """A running server: ``url`` (``http://host:port``), ``port``, ``grpc_port``, ``app`` (:class:`ServeApp`),
    ``metrics``.

    ``stop()`` shuts down gracefully (idempotent); ``begin_shutdown()`` only turns readiness 503 and
    starts the grace period.
    """

    host: str
    port: int
    app: ServeApp
    server: _Server
    thread: threading.Thread | None = None
    errors: list[BaseException] = field(default_factory=list)

    @property
    def grpc_port(self) -> int | None:
        """The gRPC port bound (``inference.GRPCInferenceService``), None when gRPC is off."""
        return self.server.grpc.port if self.server.grpc is not None else None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8000``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def metrics(self) -> ServerMetrics:
        """This server's metrics."""
        return self.app.metrics

    def begin_shutdown(self) -> None:
        """Readiness 503 now; the server stops after its grace period."""
        self.server.begin_shutdown()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Graceful shutdown; waits up to ``timeout_s`` for every accepted request and the drain.

        Raises:
            RuntimeError: the server thread did not end within ``timeout_s``.
        """
        self.server.begin_shutdown()
        if self.thread is not None:
            self.thread.join(timeout_s)
            if self.thread.is_alive():
                self.server.force_exit = True
                self.thread.join(5.0)
                raise RuntimeError(f"server at {self.url} did not stop within {timeout_s} s")


def _uvicorn_config(app: ServeApp, loop: str = "auto", http: str = "auto") -> uvicorn.Config:
    """uvicorn's settings for ``app``: its connection limits (``app.limits``) and the measured stack."""
    loop, http = uvicorn_stack(loop, http)
    limits = app.limits
    protocol = http_protocol(http, limits.request_receipt_timeout_s, app.exchanged, app.clock)
    return uvicorn.Config(
        app.asgi, loop=loop, http=protocol, lifespan="on", log_level="warning", access_log=False,
        server_header=False, date_header=False, timeout_keep_alive=limits.timeout_keep_alive_s, backlog=2048,
        limit_concurrency=limits.limit_concurrency or None,
    )  # fmt: skip


def start(app: ServeApp, host: str = "127.0.0.1", port: int = 0, grace_s: float = 0.0,
          ready_timeout_s: float = 30.0, loop: str = "auto", http: str = "auto", grpc_port: int | None = None,
          grpc_max_message_bytes: int = 0) -> ServerHandle:  # fmt: skip
    """Bind, start uvicorn in a thread and wait until it serves (deadline ``ready_timeout_s``).

    ``loop`` / ``http``: uvicorn's event loop and HTTP parser (:func:`uvicorn_stack`). ``grpc_port``: also serve
    KServe v2 / Triton gRPC there (0 = any free port: ``handle.grpc_port``; None = off);
    ``grpc_max_message_bytes``: its request limit (0 = sized from the models' body limit;
    :class:`~inferperf.serve.grpc_front.GrpcFront`).

    Raises:
        UsageError: the port (or gRPC port) is in use, or an unknown / missing loop or HTTP implementation.
        pydantic.ValidationError: a port outside 0..65535 or a negative ``grace_s`` (:class:`ListenOptions`).
        RuntimeError: the server did not come up in time.
    """
    ListenOptions(host=host, port=port, grace_s=grace_s, grpc_port=grpc_port,
                  grpc_max_message_bytes=grpc_max_message_bytes)  # refuses a bad port or grace, as the CLI does
    config = _uvicorn_config(app, loop, http)
    sock = bind_socket(host, port)
    config.load()  # import uvicorn's protocol and loop modules here, not in the server thread while this one runs on
    try:
        front = _grpc_front(app, host, grpc_port, grpc_max_message_bytes)
    except UsageError:
        sock.close()
        raise
    server = _Server(config, app, grace_s, grpc=front)
    handle = ServerHandle(host=host, port=sock.getsockname()[1], app=app, server=server)

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as e:  # noqa: BLE001 - reported to the waiting thread
            handle.errors.append(e)
        finally:
            sock.close()

    handle.thread = threading.Thread(target=run, name=f"inferperf-serve-{handle.port}", daemon=True)
    handle.thread.start()
    deadline = _now_s() + ready_timeout_s
    while not server.all_started:
        if not handle.thread.is_alive() or server.grpc_error is not None or _now_s() > deadline:
            handle.stop(5.0)
            if server.grpc_error is not None:
                raise UsageError(f"gRPC could not listen on {host}:{grpc_port} ({server.grpc_error}): pass "
                                 "--grpc-port N (0 = any free port)")
            why = f": {handle.errors[0]!r}" if handle.errors else ""
            raise RuntimeError(f"server on {handle.url} did not start within {ready_timeout_s} s{why}")
        SYSTEM_CLOCK.sleep(0.01)
    return handle


@contextlib.contextmanager
def serving(
    model: Any,
    config: BenchConfig | None = None,
    serve: ServeOptions | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    name: str | None = None,
    grace_s: float = 0.0,
    clock: Clock = SYSTEM_CLOCK,
    ready_timeout_s: float = 60.0,
    loop: str = "auto",
    http: str = "auto",
    grpc_port: int | None = None,
) -> Iterator[ServerHandle]:
    """Serve ``model`` in this process for the duration of the ``with`` block.

    Args:
        model: ONNX path or ``zoo:NAME`` (loaded with ``ServedModel.load``), or a built ``ServedModel``.
        config: backend, session and workload settings (default BenchConfig()).
        serve: batching, instances and limits (default ServeOptions()).
        host, port: where to listen (port 0 = ephemeral; read ``handle.port``).
        name: model name (default: file stem or zoo name).
        grace_s: seconds readiness is 503 before the server stops accepting, on stop.
        clock: for metrics and the batcher.
        ready_timeout_s: deadline for the server to come up.
        loop, http: uvicorn's event loop and HTTP parser (:func:`uvicorn_stack`; default auto).
        grpc_port: also serve KServe v2 / Triton gRPC there (0 = any free port; None = off).

    Yields:
        ServerHandle with ``.url``, ``.port``, ``.stop()``; stopped gracefully on exit.

    Raises:
        UsageError / ModelError: bad settings, unloadable model or port in use (before serving).
    """
    app = prepare(model, config or BenchConfig(), serve or ServeOptions(), name=name, clock=clock)
    try:
        handle = start(app, host, port, grace_s=grace_s, ready_timeout_s=ready_timeout_s, loop=loop, http=http,
                       grpc_port=grpc_port)
    except BaseException:
        close_models(app.all_models())
        raise
    try:
        yield handle
    finally:
        handle.stop()


def run_server(app: ServeApp, host: str, port: int, grace_s: float = 0.0,
               on_started: Callable[[int, int | None], None] | None = None, loop: str = "auto", http: str = "auto",
               grpc_port: int | None = None, grpc_max_message_bytes: int = 0) -> None:  # fmt: skip
    """Serve in the calling (main) thread until SIGTERM/SIGINT, then shut down gracefully and return.

    ``on_started(port, grpc_port)`` is called once the server accepts connections (e.g. to print the banner;
    ``grpc_port`` None when gRPC is off); ``loop`` / ``http`` as in :func:`uvicorn_stack`; ``grpc_port`` /
    ``grpc_max_message_bytes`` as in :func:`start`.

    Raises:
        UsageError: the port (or gRPC port) is in use, or an unknown / missing loop or HTTP implementation.
        pydantic.ValidationError: a port outside 0..65535 or a negative ``grace_s`` (:class:`ListenOptions`).
    """
    ListenOptions(host=host, port=port, grace_s=grace_s, grpc_port=grpc_port, grpc_max_message_bytes=grpc_max_message_bytes)
    config = _uvicorn_config(app, loop, http)
    sock = bind_socket(host, port)
    try:
        front = _grpc_front(app, host, grpc_port, grpc_max_message_bytes)
    except UsageError:
        sock.close()
        raise

    def started(p: int) -> None:
        if on_started is not None:
            on_started(p, front.port if front is not None else None)

    server = _Server(config, app, grace_s, started, grpc=front)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if server.grpc_error is not None:
        raise UsageError(f"gRPC could not listen on {host}:{grpc_port} ({server.grpc_error}): pass --grpc-port N "
                         "(0 = any free port)")


def banner(app: ServeApp, url: str, stack: tuple[str, str] | None = None, grpc: str | None = None) -> str:
    """The one-line startup banner: URL, the gRPC address (``grpc``, HOST:PORT, when served), model, batching and
    instance settings, notes; ``stack`` = the (loop, http) uvicorn runs (from :func:`uvicorn_stack`)."""
    parts = [f"inferperf serve: {url}" + (f" (uvicorn, {stack[0]}, {stack[1]})" if stack else "")]
    if grpc is not None:
        parts.append(f"gRPC {grpc} (KServe v2 / Triton GRPCInferenceService)")
    for m in app.all_models():
        o = m.options
        batching = "off"
        if o.dynamic_batching and m.max_batch_size > 0:
            batching = f"on (max_queue_delay_us={o.max_queue_delay_us}"
            if o.preferred_batch_size:
                batching += f", preferred={o.preferred_batch_size}"
            batching += f", max_queue_size={o.max_queue_size or 'unbounded'})"
        threads = (getattr(m, "effective", None) or {}).get("intra_op_num_threads")
        inst = f"instances={o.instance_count}" + (f" x {threads} threads" if threads else "")
        version = f" version {m.version}" if len(app.versions.get(m.name, {})) > 1 else ""
        parts.append(f"model '{m.name}'{version} max_batch_size={m.max_batch_size} dynamic_batching={batching} {inst}")
        parts += list(getattr(m, "notes", []) or [])
    return " | ".join(parts)
