"""The serving app in-process (ASGI, no socket): one model lookup behind every model route, the repository
handler injected into the app, and time read through the app's clock (issue 25 item 4)."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest

from inferperf.clock import FakeClock
from inferperf.serve.access_log import AccessLog, AccessLogMiddleware
from inferperf.serve.app import ServeApp
from inferperf.serve.errors import ControlError
from inferperf.serve.options import ServeOptions


class Stub:
    """A served model that is never asked to infer: enough for lookups and a refused body."""

    def __init__(self, name: str, version: str = "1") -> None:
        self.name, self.version, self.ready, self.max_batch_size = name, version, True, 0
        self.metadata = SimpleNamespace(inputs=[], outputs=[])
        self.options = ServeOptions()

    def stats(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    async def close(self, drain: bool = True) -> None:
        pass


class Repository:
    """A repository handler: records what the app asks of it."""

    def __init__(self) -> None:
        self.reasons = {"gone": "unloaded"}
        self.app: Any = None
        self.calls: list[tuple[str, str]] = []

    def bind(self, app: Any) -> None:
        self.app = app

    def index(self, ready_only: bool = False) -> list[dict[str, Any]]:
        return [{"name": "echo", "version": "1", "state": "READY", "reason": ""}]

    async def load(self, name: str, override: object = None) -> None:
        self.calls.append(("load", name))

    async def unload(self, name: str) -> None:
        self.calls.append(("unload", name))
        raise ControlError(f"model '{name}' is not loaded: nothing to unload", 404)


def _ask(app: ServeApp, *requests: tuple[str, str]) -> list[httpx.Response]:
    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app.asgi)  # no lifespan: nothing warms up
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            return [await client.request(method, path, content=b"{}" if method == "POST" else None)
                    for method, path in requests]

    return asyncio.run(go())


MODEL_ROUTES = [("GET", ""), ("GET", "/ready"), ("GET", "/config"), ("GET", "/stats"), ("POST", "/infer")]


@pytest.mark.parametrize(("method", "route"), MODEL_ROUTES)
def test_every_model_route_answers_an_unknown_model_or_version_with_tritons_404(method: str, route: str) -> None:
    app = ServeApp([Stub("echo", "1"), Stub("echo", "2")])
    nope, version = _ask(app, (method, f"/v2/models/nope{route}"), (method, f"/v2/models/echo/versions/9{route}"))
    assert nope.status_code == 404 and "retry-after" not in nope.headers
    assert nope.json() == {"error": "Request for unknown model: 'nope' is not found (this server serves ['echo'])"}
    assert version.status_code == 404
    assert version.json() == {"error": "Request for unknown model: 'echo' version 9 is not found (versions ['1', '2'])"}


@pytest.mark.parametrize(("method", "route"), MODEL_ROUTES)
def test_every_model_route_answers_a_model_being_unloaded_with_503_and_retry_after(method: str, route: str) -> None:
    app = ServeApp([Stub("echo")])
    app.draining.add("echo")
    (r,) = _ask(app, (method, f"/v2/models/echo{route}"))
    assert (r.status_code, r.headers["retry-after"]) == (503, "1")
    assert r.json() == {"error": "model 'echo' is being unloaded"}


def test_a_found_model_is_served_by_each_route() -> None:
    app = ServeApp([Stub("echo", "1"), Stub("echo", "2")])
    ready, stats, v1 = _ask(app, ("GET", "/v2/models/echo/ready"), ("GET", "/v2/models/echo/stats"),
                            ("GET", "/v2/models/echo/versions/1/stats"))
    assert ready.status_code == 200
    assert stats.json() == {"model_stats": [{"name": "echo", "version": "2"}]}  # the highest version by default
    assert v1.json() == {"model_stats": [{"name": "echo", "version": "1"}]}


def test_the_repository_handler_is_injected_and_bound() -> None:
    repo = Repository()
    app = ServeApp([Stub("echo")], repository=repo)
    assert repo.app is app and app.control is repo
    meta, gone, index, load, unload = _ask(
        app, ("GET", "/v2"), ("GET", "/v2/models/gone/ready"), ("POST", "/v2/repository/index"),
        ("POST", "/v2/repository/models/echo/load"), ("POST", "/v2/repository/models/x/unload"))
    assert "model_repository" in meta.json()["extensions"]
    assert gone.status_code == 404
    assert gone.json()["error"] == "Request for unknown model: 'gone' has no available versions (UNAVAILABLE: unloaded)"
    assert index.json() == repo.index()
    assert (load.status_code, load.json()) == (200, {})
    assert (unload.status_code, unload.json()) == (404, {"error": "model 'x' is not loaded: nothing to unload"})
    assert repo.calls == [("load", "echo"), ("unload", "x")]


def test_without_a_repository_its_routes_say_how_to_serve_one() -> None:
    (r,) = _ask(ServeApp([Stub("echo")]), ("POST", "/v2/repository/models/echo/load"))
    assert r.status_code == 400 and "--model-repository DIR" in r.json()["error"]


def test_last_use_is_read_on_the_apps_clock() -> None:
    clock = FakeClock(start_ns=123_456_789)
    app = ServeApp([Stub("echo")], clock=clock)
    (r,) = _ask(app, ("POST", "/v2/models/echo/infer"))  # refused (no inputs given), after the lookup
    assert r.status_code == 400
    assert app.last_used == {"echo": 123_456_789}


def test_the_access_log_times_a_request_on_the_given_clock() -> None:
    clock = FakeClock(start_ns=10**9)

    async def slow_app(scope: Any, receive: Any, send: Any) -> None:
        clock.advance_ns(2_500_000)  # the request takes exactly 2.5 ms of fake time
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    out = io.StringIO()
    log = AccessLog("-")
    log._out = out
    when = dt.datetime(2026, 12, 2, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)
    middleware = AccessLogMiddleware(slow_app, log, clock, wall=lambda: when)

    async def go() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Any) -> None:
            pass

        await middleware({"type": "http", "method": "GET", "path": "/v2", "headers": [], "client": ("h", 1)},
                         receive, send)

    asyncio.run(go())
    record = orjson.loads(out.getvalue())
    assert record["ms"] == 2.5 and record["status"] == 204
    assert record["ts"] == "2026-12-02T12:00:00.123+00:00"
