"""How requests reach the target: the real HTTP/1.1 client and a simulated server on the fake clock.

The HTTP client is an :class:`asyncio.Protocol` per keep-alive connection
(:mod:`.http1`): each connection writes one prebuilt request (request line,
headers and body in one ``bytes``) and httptools parses the answer, whatever
its framing (Content-Length, chunked, until close; 1xx, 204, 304), optionally
streaming body pieces to a :class:`~inferperf.loadgen.http1.StreamSink`. Raw
asyncio was chosen by measurement over aiohttp and httpx (BENCHMARKS.md, "Load
generator HTTP client": ~4x aiohttp's requests per client CPU-second); the
move from substring header search to httptools kept that cost (BENCHMARKS.md,
"Generator ceiling").

Connections are explicit objects so the driver can count, grow and cap them
(``--max-connections``). Every failure is a :class:`Response` with an
``error_kind``, never an exception out of ``send``:

- ``connect``: the TCP connection could not be opened (refused, unreachable);
- ``disconnected``: the server closed or reset the connection mid-request;
- ``timeout``: no full answer within ``--timeout-ms`` (set by the driver);
- ``http_<status>``: an answer with status >= 400 (e.g. ``http_503``).

:class:`SimulatedServer` stands in for a server in tests: ``slots`` requests
in service at once, ``service_s`` each, ``freezes`` (windows of fake time in
which nothing is served) and ``die_at_s`` (connections refused afterwards),
all on the asyncio loop's clock (the fake-time loop in tests).
"""

from __future__ import annotations

import asyncio
import ssl
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import UsageError
from .http1 import DISCONNECTED, HttpConnection, Response, StreamSink, http_error_kind, read_buffer

#: error kinds (stable strings; the Result counts errors by them).
CONNECT, TIMEOUT = "connect", "timeout"
#: a request whose exchange raised in the client (a bug or a malformed answer past the sink's checks): counted
CLIENT_ERROR = "client_error"


class Connection(Protocol):
    """One open connection: ``send`` one payload and wait for its answer; ``close``; ``open`` False once broken."""

    open: bool

    async def send(self, payload: Any) -> Response:  # pragma: no cover - protocol
        """Send ``payload`` and return its :class:`Response` (errors as ``error_kind``, never raised)."""
        ...

    def close(self) -> None:  # pragma: no cover - protocol
        """Close now (idempotent)."""
        ...


class Transport(Protocol):
    """Opens connections to one target. ``connect()`` raises :class:`ConnectError` when it cannot."""

    async def connect(self) -> Connection:  # pragma: no cover - protocol
        """Open one connection."""
        ...

    def describe(self) -> dict[str, Any]:  # pragma: no cover - protocol
        """What this transport is (client name, target), for the Result."""
        ...


class ConnectError(Exception):
    """A connection could not be opened (its ``kind`` is ``connect``)."""


# ------------------------------------------------------------------------------------------------ real HTTP


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: scheme, host, port and the request path prefix (``/`` when none)."""

    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        """Parse ``http[s]://host[:port][/path]``.

        Raises:
            UsageError: another scheme or no host.
        """
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"target {url!r}: give an http:// or https:// URL, e.g. http://127.0.0.1:8000")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path or "/")

    @property
    def host_header(self) -> str:
        """The ``Host`` header value."""
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def build_request(endpoint: Endpoint, method: str, path: str, body: bytes = b"",
                  headers: Sequence[tuple[str, str]] = ()) -> bytes:  # fmt: skip
    """One HTTP/1.1 keep-alive request as bytes (request line, headers, ``Content-Length``, body)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {endpoint.host_header}"]
    names = {k.lower() for k, _ in headers}
    lines += [f"{k}: {v}" for k, v in headers]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    if "connection" not in names:
        lines.append("Connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HttpTransport:
    """Opens :class:`~inferperf.loadgen.http1.HttpConnection` s to ``url`` (TCP_NODELAY; TLS for https).

    Args:
        url: the target's base URL.
        connect_timeout_s: deadline for opening one connection.
        clock: the clock a streaming sink's ``t_ns`` comes from.
    """

    def __init__(self, url: str, connect_timeout_s: float = 10.0, clock: Clock = SYSTEM_CLOCK) -> None:
        self.endpoint = Endpoint.parse(url)
        self.connect_timeout_s = connect_timeout_s
        self.clock = clock
        self._buffers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, memoryview] = weakref.WeakKeyDictionary()
        self._ssl = ssl.create_default_context() if self.endpoint.scheme == "https" else None

    async def connect(self) -> HttpConnection:
        """Open one connection.

        Raises:
            ConnectError: refused, unreachable or over ``connect_timeout_s``.
        """
        loop = asyncio.get_running_loop()
        proactor = getattr(asyncio, "ProactorEventLoop", None)
        if proactor is not None and isinstance(loop, proactor):  # reads stay in flight: one buffer each
            buf = read_buffer()
        else:  # selector loop / uvloop: a read is parsed before the next starts, so one buffer serves all
            if self._buffers.get(loop) is None:
                self._buffers[loop] = read_buffer()
            buf = self._buffers[loop]
        clock = self.clock
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: HttpConnection(clock, buf), self.endpoint.host, self.endpoint.port, ssl=self._ssl
                )
        except (OSError, TimeoutError) as e:
            raise ConnectError(f"{self.endpoint.host}:{self.endpoint.port}: {e}") from None
        return conn

    def describe(self) -> dict[str, Any]:
        """Client name and target, for the Result."""
        e = self.endpoint
        return {"client": "asyncio-httptools", "url": f"{e.scheme}://{e.host_header}{e.path}"}


class ConnectionPool:
    """Connections to one target, grown on demand up to ``max_connections``.

    ``acquire`` gives an idle connection, opens a new one below the cap, or waits for a release
    (counted in ``ran_out``). Reusable across steps (stress keeps connections open between steps).
    """

    def __init__(self, transport: Transport, max_connections: int) -> None:
        self.transport = transport
        self.max_connections = max_connections
        self.count = 0
        self.peak = 0
        self.ran_out = 0
        self._idle: list[Connection] = []
        self._waiters: deque[asyncio.Future[Connection | None]] = deque()

    async def _open(self) -> Connection:
        self.count += 1
        self.peak = max(self.peak, self.count)
        try:
            return await self.transport.connect()
        except BaseException:
            self._freed()
            raise

    async def fill(self, n: int) -> int:
        """Open connections until ``n`` are idle (at most the cap); returns how many opened."""
        want = min(n, self.max_connections) - len(self._idle)
        if want <= 0:
            return 0
        got = await asyncio.gather(*(self._open() for _ in range(want)), return_exceptions=True)
        ok = [c for c in got if not isinstance(c, BaseException)]
        self._idle.extend(ok)  # type: ignore[arg-type]
        return len(ok)

    async def acquire(self) -> Connection:
        """An open connection for one request.

        Raises:
            ConnectError: a new connection was needed and could not be opened.
        """
        while self._idle:
            c = self._idle.pop()
            if c.open:
                return c
            self.count -= 1
        if self.count < self.max_connections:
            return await self._open()
        self.ran_out += 1
        fut: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        c = await fut
        if c is None:  # a broken connection freed a slot: open a new one in it
            self.count -= 1
            return await self._open()
        return c

    def _freed(self) -> None:
        self.count -= 1
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                self.count += 1
                w.set_result(None)
                return

    def release(self, c: Connection) -> None:
        """Give ``c`` back (a closed one frees its slot)."""
        if not c.open:
            self._freed()
            return
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(c)
                return
        self._idle.append(c)

    def close(self) -> None:
        """Close every idle connection; waiters are cancelled."""
        for c in self._idle:
            c.close()
        self.count -= len(self._idle)
        self._idle.clear()
        for w in self._waiters:
            w.cancel()
        self._waiters.clear()



# ------------------------------------------------------------------------------------------------ simulated


class SimulatedServer:
    """A fake server for tests on the fake clock (the loop's time must be ``clock``).

    Args:
        clock: the clock the event loop runs on (``FakeClock`` in tests).
        service_s: service time of one request, s (or a callable ``(i) -> s`` for request i).
        slots: requests served at once; more wait in arrival order.
        freezes: ``(start_s, end_s)`` windows (clock seconds) in which no request starts or finishes service.
        die_at_s: clock time (s) after which connections are refused and open ones reset.
        status: HTTP status of every answer (or a callable ``(i) -> status`` for request i); a 4xx answer
            carries ``error_body`` ``b"simulated <status>"``.
        keeps_abandoned: a request whose client gave up (timed out, closed) stays queued and is served all the
            same, as by a server that does not notice disconnects (default: dropped with its client).

    ``in_system``: requests queued or in service now (what a server's queue gauge would show).
    """

    def __init__(self, clock: Clock = SYSTEM_CLOCK, service_s: Any = 0.001, slots: int = 1,
                 freezes: Sequence[tuple[float, float]] = (), die_at_s: float | None = None,
                 status: Any = 200, keeps_abandoned: bool = False) -> None:  # fmt: skip
        self.clock = clock
        self.service_s = service_s
        self.slots = slots
        self.freezes = [(round(a * 1e9), round(b * 1e9)) for a, b in freezes]
        self.die_at_ns = None if die_at_s is None else round(die_at_s * 1e9)
        self.status = status
        self.keeps_abandoned = keeps_abandoned
        self.in_system = 0
        self.connections_opened = 0
        self.served = 0
        self._sem: asyncio.Semaphore | None = None

    def _dead(self) -> bool:
        return self.die_at_ns is not None and self.clock.now_ns() >= self.die_at_ns

    async def _wait_unfrozen(self) -> None:
        for a, b in self.freezes:
            now = self.clock.now_ns()
            if a <= now < b:
                await asyncio.sleep((b - now) / 1e9)

    async def serve(self) -> Response:
        """Serve one request: wait for a slot, for any freeze, then the service time."""
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.slots)
        self.in_system += 1
        try:
            async with self._sem:
                await self._wait_unfrozen()
                i = self.served
                self.served += 1
                s = self.service_s(i) if callable(self.service_s) else self.service_s
                await asyncio.sleep(s)
                await self._wait_unfrozen()
        finally:
            self.in_system -= 1
        if self._dead():
            return Response(0, 0, DISCONNECTED)
        status = self.status(i) if callable(self.status) else self.status
        body = f"simulated {status}".encode() if 400 <= status < 500 else None
        return Response(status, 0, http_error_kind(status), body)

    async def connect(self) -> _SimConnection:
        """Open a simulated connection (instant).

        Raises:
            ConnectError: after ``die_at_s``.
        """
        if self._dead():
            raise ConnectError("simulated server is down")
        self.connections_opened += 1
        return _SimConnection(self)

    def describe(self) -> dict[str, Any]:
        """Marks the Result as simulated."""
        return {"client": "simulated", "slots": self.slots}


class _SimConnection:
    def __init__(self, server: SimulatedServer) -> None:
        self.server = server
        self.open = True

    async def send(self, payload: Any) -> Response:
        if not self.open:
            return Response(0, 0, DISCONNECTED)
        if self.server._dead():
            self.open = False
            return Response(0, 0, DISCONNECTED)
        if self.server.keeps_abandoned:  # the service goes on even if this caller is cancelled
            r = await asyncio.shield(asyncio.ensure_future(self.server.serve()))
        else:
            r = await self.server.serve()
        if r.error_kind == DISCONNECTED:
            self.open = False
        return r

    def close(self) -> None:
        self.open = False


__all__ = [
    "CONNECT",
    "DISCONNECTED",
    "TIMEOUT",
    "ConnectError",
    "ConnectionPool",
    "Connection",
    "Endpoint",
    "HttpConnection",
    "HttpTransport",
    "Response",
    "SimulatedServer",
    "StreamSink",
    "Transport",
    "build_request",
    "http_error_kind",
]
