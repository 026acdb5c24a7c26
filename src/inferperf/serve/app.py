"""The KServe v2 REST app (Starlette, orjson) with Triton's binary, model-configuration and statistics extensions.

Routes: ``GET /v2``, ``/v2/health/live``, ``/v2/health/ready``,
``/v2/models/{name}[/versions/{v}]`` (metadata), ``.../ready``, ``.../config``,
``.../stats``, ``GET /v2/models/stats``, ``POST .../infer``, ``GET /metrics``,
``GET /openapi.json``. Every response carries ``X-Request-Id`` (echoed when the
client sent one). Errors are ``{"error": "..."}``: 400 bad tensor, 404 unknown
model/version/route, 405 wrong method, 413 body over ``max_body_bytes``, 500
the model failed (the server keeps serving), 503 queue full / not ready /
shutting down with ``Retry-After``.

The app talks only to ``ServedModel`` objects (``name``, ``version``,
``metadata``, ``max_batch_size``, ``options``, ``ready``, ``infer``, ``stats``,
``close``), to :class:`~inferperf.serve.metrics.ServerMetrics` and, when serving a repository, to the
:class:`RepositoryHandler` injected into it (:class:`inferperf.serve.control.ModelControl`); it imports
neither the server nor the control module.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..clock import SYSTEM_CLOCK, Clock
from . import load_override
from .errors import ModelUnloading, ServeError, UnknownModel, unknown_model, unknown_version
from .infer_route import InferEndpoint, InferFirst
from .log_settings import LogSettings, LogSettingsError
from .shm import SharedMemory
from .shm_routes import shm_routes
from .metrics import CONTENT_TYPE, ServerMetrics
from .options import ConnectionLimits
from .triton import model_config, model_metadata, openapi, server_metadata

_JSON = "application/json"


def _json(doc: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(doc), status_code=status, media_type=_JSON, headers=headers)


def _error(message: str, status: int, retry_after_s: int | None = None) -> Response:
    headers = {"retry-after": str(retry_after_s)} if retry_after_s is not None else None
    return _json({"error": message}, status, headers)


def _refused(e: ServeError) -> Response:
    """A serving error's answer: ``{"error": str(e)}`` with ``e.status``; a 503 says ``Retry-After`` when it has one."""
    return _error(str(e), e.status, getattr(e, "retry_after_s", None) if e.status == 503 else None)


def _version_order(version: str) -> tuple[int, int | str]:
    """Numeric versions in numeric order, after any non-numeric ones."""
    return (1, int(version)) if version.isdigit() else (0, version)


class RequestIdMiddleware:
    """Pure-ASGI middleware: every response gets ``X-Request-Id`` (the client's, or a fresh one)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._prefix = os.urandom(4).hex()
        self._counter = itertools.count(1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = next((v for k, v in scope["headers"] if k == b"x-request-id"), None)
        if rid is None:
            rid = f"{self._prefix}-{next(self._counter):x}".encode()
        scope.setdefault("state", {})["request_id"] = rid  # for the access log

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid)]
            await send(message)

        await self.app(scope, receive, send_with_id)


class RepositoryHandler(Protocol):
    """What the app asks of a model repository at run time (Triton's repository extension): ``bind(app)``
    once (the app whose models it loads and unloads), ``index(ready_only)`` (Triton's index entries),
    ``await load(name, override)`` (Triton's load parameters, :mod:`.load_override`) / ``await unload(name)`` (a refusal raises a :class:`ServeError` such as
    ``ControlError``, answered with its status), and ``reasons`` (name -> why it is unavailable)."""

    reasons: dict[str, str]

    def bind(self, app: ServeApp) -> None: ...

    def index(self, ready_only: bool = False) -> list[dict[str, Any]]: ...

    async def load(self, name: str, override: Any = None) -> None: ...

    async def unload(self, name: str) -> None: ...


class ServeApp:
    """Holds the models, metrics and shutdown state; builds the ASGI app (:attr:`asgi`).

    Args:
        models: served models (``ServedModel``), by their ``name``.
        metrics: this server's metrics (None = a fresh :class:`ServerMetrics`).
        clock: times decode/encode and each model's last use (``now_ns``).
        close_models_on_shutdown: ``await model.close(drain=True)`` in the ASGI lifespan shutdown.
        repository: the repository handler behind ``/v2/repository/*`` (None = no repository served: those
            routes answer 400); bound to this app and kept as :attr:`control`.
    """

    def __init__(
        self,
        models: Sequence[Any],
        metrics: ServerMetrics | None = None,
        clock: Clock = SYSTEM_CLOCK,
        close_models_on_shutdown: bool = True,
        repository: RepositoryHandler | None = None,
    ) -> None:
        self.versions: dict[str, dict[str, Any]] = {}
        for m in models:
            self.versions.setdefault(m.name, {})[m.version] = m
        # name -> the version served without /versions/{v}: the highest (numeric order), as Triton does
        self.models = {n: vs[max(vs, key=_version_order)] for n, vs in self.versions.items()}
        self.draining: set[str] = set()  # names being unloaded: new requests get 503
        self.last_used: dict[str, int] = {}  # name -> clock.now_ns() of its last infer (LRU unloading)
        self.control = repository
        self.metrics = metrics or ServerMetrics(clock=clock)
        for m in self.all_models():
            self._count_from_zero(m)
        self.clock = clock
        self.shutting_down = False
        self.loop_tid: int | None = None  # the event loop thread's OS id, once the server started
        self.log_settings = LogSettings()  # Triton's logging extension: /v2/logging, gRPC LogSettings
        self.shm = SharedMemory(allowed=False)  # Triton's system shared memory: on with allow_client_shm()
        self._close_models = close_models_on_shutdown
        self._openapi = orjson.dumps(openapi(list(self.models), metrics=getattr(self.metrics, "enabled", True)))
        self._server_meta = orjson.dumps(server_metadata())
        self._infer_endpoint = InferEndpoint(self)
        self._routes = self._starlette()
        self._auth: tuple[str, bool] | None = None
        self.limits = ConnectionLimits()
        self.access_log: Any = None
        self.asgi: ASGIApp = RequestIdMiddleware(InferFirst(self._routes, self._infer_endpoint))
        if repository is not None:
            repository.bind(self)

    def _chain(self) -> None:
        """request id -> access log -> API key -> infer front -> routes (log and key only when configured)."""
        app: ASGIApp = InferFirst(self._routes, self._infer_endpoint)
        if self._auth is not None:
            from .auth import ApiKeyMiddleware

            app = ApiKeyMiddleware(app, *self._auth)
        if self.access_log is not None:
            from .access_log import AccessLogMiddleware

            app = AccessLogMiddleware(app, self.access_log, self.clock)
        self.asgi = RequestIdMiddleware(app)

    def require_api_key(self, key: str, metrics_auth: bool = False) -> None:
        """From now on every route but ``/v2/health/*`` (and ``/metrics`` unless ``metrics_auth``) needs
        ``Authorization: Bearer KEY`` (:mod:`inferperf.serve.auth`); call before the server starts.

        Raises:
            UsageError: an empty key (:func:`inferperf.serve.auth.check_api_key`).
        """
        from .auth import check_api_key

        self._auth = (check_api_key(key), metrics_auth)
        self._chain()

    def log_access(self, target: Any) -> None:
        """Write a JSON line per request to ``target`` (a path, or ``"-"`` for stderr;
        :mod:`inferperf.serve.access_log`); call before the server starts."""
        from .access_log import AccessLog

        self.access_log = AccessLog(target)
        self._chain()

    def _starlette(self) -> Starlette:
        m, v = "/v2/models/{model_name}", "/v2/models/{model_name}/versions/{model_version}"
        routes = [  # every endpoint is a coroutine (or an ASGI app): Starlette runs a plain function in a thread pool
            Route("/v2", self._server_metadata),
            Route("/v2/logging", self._logging, methods=["GET", "POST"]),
            *shm_routes(self.shm),
            Route("/v2/health/live", self._live),
            Route("/v2/health/ready", self._ready),
            Route("/v2/models/stats", self._all_stats),
            Route("/metrics", self._metrics),
            Route("/openapi.json", self._openapi_doc),
            Route("/v2/repository/index", self._repo_index, methods=["POST"]),
            Route("/v2/repository/models/{model_name}/load", self._repo_load, methods=["POST"]),
            Route("/v2/repository/models/{model_name}/unload", self._repo_unload, methods=["POST"]),
        ]
        for base in (m, v):
            routes += [
                Route(base, self._metadata),
                Route(base + "/ready", self._model_ready),
                Route(base + "/config", self._config),
                Route(base + "/stats", self._stats),
                Route(base + "/infer", self._infer_endpoint, methods=["POST"]),  # POSTs reach it via InferFirst
            ]
        handlers = {HTTPException: self._http_error, ServeError: self._serve_error}
        return Starlette(routes=routes, exception_handlers=handlers, lifespan=self._lifespan)  # type: ignore[arg-type]

    @asynccontextmanager
    async def _lifespan(self, app: Starlette):  # type: ignore[no-untyped-def]
        from .warmup import warm_through_app

        await warm_through_app(self, self.all_models())  # before uvicorn accepts: the first batch is on time
        yield
        self.shutting_down = True
        self.log_settings.close()
        if self._close_models:
            for model in self.all_models():
                await model.close(drain=True)
        await self.shm.close()  # after the models drained: no request holds a view of a region

    async def _serve_error(self, request: Request, exc: ServeError) -> Response:
        return _refused(exc)  # a lookup's 404/503 (:meth:`_model`), a refused repository request

    async def _http_error(self, request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            return _error(f"no route {request.method} {request.url.path}: see /openapi.json", 404)
        if exc.status_code == 405:
            return _error(f"{request.method} is not allowed on {request.url.path}", 405)
        return _error(str(exc.detail), exc.status_code)

    @property
    def ready(self) -> bool:
        """True once every model is loaded and warmed up, until shutdown begins."""
        return not self.shutting_down and all(m.ready for m in self.all_models())

    def replace_model(self, name: str, served: Sequence[Any]) -> list[Any]:
        """Serve ``served`` (every version of ``name``; empty = stop serving it); returns the versions replaced."""
        old = list(self.versions.pop(name, {}).values())
        self.models.pop(name, None)
        if served:
            for m in served:
                self._count_from_zero(m)
            self.versions[name] = {m.version: m for m in served}
            vs = self.versions[name]
            self.models[name] = vs[max(vs, key=_version_order)]
        return old

    def _count_from_zero(self, model: Any) -> None:
        """The model's metric series exist at 0 from its load (:meth:`ServerMetrics.model_loaded`)."""
        self.metrics.model_loaded(model.name, getattr(getattr(model, "options", None), "instance_count", 1) or 1)

    def all_models(self) -> list[Any]:
        """Every served model version (``models`` holds only each name's default version)."""
        return [m for vs in self.versions.values() for m in vs.values()]

    def _model(self, request: Request) -> Any:
        """The model (and version) a model route names (:meth:`lookup` of its path parameters)."""
        return self.lookup(request.path_params["model_name"], request.path_params.get("model_version"))

    def exchanged(self, path: str, ns: int) -> None:
        """An infer request to ``path`` (``/v2/models/NAME[/versions/V]/infer``) took ``ns`` on its HTTP
        connection (:mod:`inferperf.serve.http_protocol`): observed for a served model only (an unknown
        model's 404 is not a request of any)."""
        parts = path.split("/", 4)
        if len(parts) == 5 and parts[1] == "v2" and parts[2] == "models" and parts[3] in self.models:
            self.metrics.exchanged(parts[3], ns)

    def lookup(self, name: str, version: str | None = None) -> Any:
        """The served model ``name`` (its ``version``; None = the default one): the one lookup behind every
        model route.

        Raises:
            ModelUnloading: it is being unloaded (answered 503, ``Retry-After: 1``).
            UnknownModel: no such model or version is served (answered 404 in Triton's wording, "Request for
                unknown model: ..."; a repository model that is not loaded says why).
        """
        if name in self.draining:
            raise ModelUnloading(name)
        model = self.models.get(name)
        if model is None:
            reason = self.control.reasons.get(name, "") if self.control is not None else ""
            raise UnknownModel(unknown_model(name, list(self.models), reason))
        if version is not None:
            model = self.versions[name].get(version)
            if model is None:
                raise UnknownModel(unknown_version(name, version, sorted(self.versions[name], key=_version_order)))
        return model

    async def _server_metadata(self, request: Request) -> Response:
        extra = (["model_repository"] if self.control is not None else []) + (  # served only over a repository,
            ["system_shared_memory"] if self.shm.allowed else [])  # and with --allow-client-shm
        if extra:
            doc = orjson.loads(self._server_meta)
            return _json({**doc, "extensions": sorted([*doc["extensions"], *extra])})
        return Response(self._server_meta, media_type=_JSON)

    async def _live(self, request: Request) -> Response:
        return Response(b'{"live":true}', 200, media_type=_JSON)  # KServe v2's body; Triton's clients read the status

    async def _metrics(self, request: Request) -> Response:
        if not getattr(self.metrics, "enabled", True):
            return _error("metrics are off (--no-metrics): restart without it to scrape /metrics", 404)
        return Response(self.metrics.exposition(), media_type=CONTENT_TYPE)

    async def _openapi_doc(self, request: Request) -> Response:
        return Response(self._openapi, media_type=_JSON)

    async def _logging(self, request: Request) -> Response:
        """Triton's logging extension: GET the settings; POST a JSON object of those to change (all or none)."""
        if request.method == "GET":
            return _json(self.log_settings.values)
        try:
            changes = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error("the log settings request body is not JSON: send an object such as "
                          '{"log_verbose_level": 1}', 400)
        if not isinstance(changes, dict):
            return _error('the log settings request body must be a JSON object, e.g. {"log_info": false}', 400)
        try:
            return _json(self.log_settings.update(changes))
        except LogSettingsError as e:
            return _error(str(e), 400)

    def allow_client_shm(self) -> None:
        """Serve Triton's system shared memory (``--allow-client-shm``: regions of this machine's /dev/shm)."""
        self.shm.allowed = True

    async def _ready(self, request: Request) -> Response:
        if self.ready:
            return Response(b'{"ready":true}', 200, media_type=_JSON)
        what = "shutting down" if self.shutting_down else "not ready"
        return _json({"ready": False, "error": f"server is {what}"}, 503, {"Retry-After": "1"})

    async def _model_ready(self, request: Request) -> Response:
        model = self._model(request)
        if model.ready and not self.shutting_down:
            return _json({"name": model.name, "ready": True})
        return _json({"name": model.name, "ready": False, "error": f"model '{model.name}' is not ready"}, 503,
                     {"Retry-After": "1"})

    async def _metadata(self, request: Request) -> Response:
        return self._model_doc(request, model_metadata)

    async def _config(self, request: Request) -> Response:
        return self._model_doc(request, model_config)

    async def _stats(self, request: Request) -> Response:
        return self._model_doc(request, lambda m: {"model_stats": [m.stats()]})

    async def _all_stats(self, request: Request) -> Response:
        return _json({"model_stats": [m.stats() for m in self.all_models()]})

    def _model_doc(self, request: Request, build: Any) -> Response:
        return _json(build(self._model(request)))

    async def _repo_index(self, request: Request) -> Response:
        if self.control is None:
            return _error("this server serves no model repository: start it with --model-repository DIR", 400)
        body = await request.body()
        try:
            doc = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError as e:
            return _error(f"request body is not valid JSON: {e}", 400)
        ready_only = bool(doc.get("ready", False)) if isinstance(doc, dict) else False
        return _json(self.control.index(ready_only))

    async def _repo_load(self, request: Request) -> Response:
        return await self._repo_call(request, "load")

    async def _repo_unload(self, request: Request) -> Response:
        return await self._repo_call(request, "unload")

    async def _repo_call(self, request: Request, action: str) -> Response:
        if self.control is None:
            return _error("this server serves no model repository: start it with --model-repository DIR", 400)
        name = request.path_params["model_name"]
        if action == "unload":
            await self.control.unload(name)  # a ControlError: its status
            return _json({})
        raw = await request.body()
        try:
            body = orjson.loads(raw) if raw.strip() else None
        except orjson.JSONDecodeError:
            return _error(f"failed to load '{name}': the load request body is not JSON", 400)
        await self.control.load(name, load_override.from_http(name, body))
        return _json({})
