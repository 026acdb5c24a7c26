"""inferperf's subclass of uvicorn's private httptools protocol (issue 25 item 6), on fake time.

:mod:`inferperf.serve.http_protocol` subclasses ``uvicorn.protocols.http.httptools_impl.HttpToolsProtocol``,
which is not uvicorn's public API. These tests fail loudly when an installed uvicorn no longer has what the
subclass relies on: the pinned version range, the overridden hooks with their signatures, the attributes it
reads (``loop``, ``transport``, ``cycle.response_started``), the way uvicorn builds it, and that the response
cycle writes through ``self.transport`` (where the one-write transport sits). The protocol runs on a
:class:`~tests.fake_loop.FakeTimeLoop` with an in-memory transport: the 408 at the receipt deadline is checked
at its exact fake time.
"""

from __future__ import annotations

import asyncio
import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from inferperf.clock import FakeClock
from inferperf.serve.http_protocol import CoalescingTransport, http_protocol
from tests.fake_loop import FakeTimeLoop

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _uvicorn_requirement() -> Requirement:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "uvicorn"]
    return req


def test_uvicorn_is_pinned_to_a_tested_range_that_holds_the_installed_version() -> None:
    spec = _uvicorn_requirement().specifier
    uppers = [s for s in spec if s.operator in ("<", "<=", "~=", "==")]
    assert uppers, f"uvicorn requirement {spec!s} has no upper bound: the private protocol may change in any release"
    installed = Version(version("uvicorn"))
    assert spec.contains(installed), f"installed uvicorn {installed} is outside the tested range {spec!s}"


def test_the_private_protocol_has_the_hooks_the_subclass_overrides() -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

    expected = {"connection_made": ["self", "transport"], "connection_lost": ["self", "exc"],
                "on_message_begin": ["self"], "on_message_complete": ["self"]}
    for name, params in expected.items():
        fn = getattr(HttpToolsProtocol, name, None)
        assert fn is not None, f"uvicorn's HttpToolsProtocol has no {name}: inferperf.serve.http_protocol needs a new uvicorn pin"
        assert list(inspect.signature(fn).parameters) == params, (name, inspect.signature(fn))
    init = list(inspect.signature(HttpToolsProtocol.__init__).parameters)
    assert init[:4] == ["self", "config", "server_state", "app_state"] and "_loop" in init, init
    assert "transport" in inspect.signature(RequestResponseCycle.__init__).parameters


class MemoryTransport(asyncio.Transport):
    """An in-memory transport: records each ``write`` with the loop time (s), and ``close``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.writes: list[tuple[float, bytes]] = []
        self.closed_at: float | None = None

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.writes.append((self.loop.time(), bytes(data)))

    def close(self) -> None:
        if self.closed_at is None:
            self.closed_at = self.loop.time()

    def is_closing(self) -> bool:
        return self.closed_at is not None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _hello(scope: dict, receive: Any, send: Any) -> None:
    """A plain ASGI app: reads the body, answers 200 ``hello``."""
    assert scope["type"] == "http"
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
    await send({"type": "http.response.body", "body": b"hello"})


def _connect(loop: asyncio.AbstractEventLoop, receipt_timeout_s: float) -> tuple[Any, MemoryTransport]:
    """The protocol built as uvicorn's server builds it (``Server.startup``'s ``create_protocol``), connected."""
    import uvicorn
    from uvicorn.server import ServerState

    config = uvicorn.Config(_hello, http=http_protocol("httptools", receipt_timeout_s), lifespan="off",
                            log_level="warning", access_log=False, server_header=False, date_header=False)
    config.load()
    proto = config.http_protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    transport = MemoryTransport(loop)
    proto.connection_made(transport)
    return proto, transport


def _run(main: Any) -> None:
    clock = FakeClock(0)
    loop = FakeTimeLoop(clock)
    try:
        loop.run_until_complete(asyncio.wait_for(main(loop), timeout=60))
    finally:
        loop.close()


def test_a_response_is_written_in_one_piece_through_the_subclass_transport() -> None:
    async def main(loop: asyncio.AbstractEventLoop) -> None:
        proto, transport = _connect(loop, receipt_timeout_s=1.0)
        assert isinstance(proto.transport, CoalescingTransport) and proto.loop is loop
        proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert proto.cycle is not None and proto.cycle.transport is proto.transport  # the cycle writes through it
        for _ in range(100):  # bounded: the app task answers within a few loop turns
            if transport.writes:
                break
            await asyncio.sleep(0)
        assert len(transport.writes) == 1, transport.writes  # head and body in one write
        data = transport.writes[0][1]
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"\r\n\r\nhello")
        assert proto.cycle.response_complete and proto._receipt_timer is None  # noqa: SLF001
        proto.connection_lost(None)

    _run(main)


def test_a_request_not_received_by_its_deadline_gets_408_at_exactly_the_deadline() -> None:
    async def main(loop: asyncio.AbstractEventLoop) -> None:
        proto, transport = _connect(loop, receipt_timeout_s=1.0)
        proto.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\nab")  # t = 0: 2 of 20 bytes
        for _ in range(8):  # one byte every 100 ms of fake time: each would reset a keep-alive timer
            await asyncio.sleep(0.1)
            proto.data_received(b"c")
        assert transport.writes == [] and transport.closed_at is None
        await asyncio.sleep(0.5)
        assert len(transport.writes) == 1 and transport.writes[0][0] == pytest.approx(1.0, abs=1e-9)
        assert transport.writes[0][1].startswith(b"HTTP/1.1 408 Request Timeout")
        assert b"request not received within 1 s" in transport.writes[0][1]
        assert transport.closed_at == pytest.approx(1.0, abs=1e-9)
        proto.connection_lost(None)

    _run(main)


def test_a_complete_request_cancels_its_deadline() -> None:
    async def main(loop: asyncio.AbstractEventLoop) -> None:
        proto, transport = _connect(loop, receipt_timeout_s=1.0)
        proto.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab")
        await asyncio.sleep(3.0)  # fake time, past the deadline (uvicorn closes an idle keep-alive at 5 s)
        assert [d[:12] for _, d in transport.writes] == [b"HTTP/1.1 200"] and transport.closed_at is None
        proto.connection_lost(None)

    _run(main)
