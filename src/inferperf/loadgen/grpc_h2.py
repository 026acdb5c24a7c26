"""Unary gRPC calls on a bare HTTP/2 connection: the load generator's own gRPC client (issue 40 item 3).

grpc.aio costs about 120 us of client CPU per unary call (BENCHMARKS.md, "gRPC beside HTTP": 8,384 requests per
client CPU-second against perf_analyzer's 26,270), most of it in its per-call machinery. A load generator sends the
same few prebuilt requests over and over, one at a time per connection, so this client does what the HTTP/1.1
client does (:mod:`.http1`): an :class:`asyncio.Protocol` per connection writing prebuilt frames and reading the
answer's frames, nothing else.

The exchange (RFC 9113 HTTP/2 over cleartext with prior knowledge, as gRPC's ``insecure`` channels speak it; gRPC
over HTTP/2 as grpc/grpc's doc/PROTOCOL-HTTP2.md defines it):

- The connection opens with the preface and SETTINGS: ``SETTINGS_HEADER_TABLE_SIZE`` 0 (the server may not index
  its headers, so every header block it sends decodes on its own: blocks are decoded with ``hpack`` once and cached
  by their bytes), push off, and the largest initial stream window; a WINDOW_UPDATE opens the connection window.
  The server's SETTINGS are applied and acknowledged, PINGs answered, received bytes given back to the connection
  window once half of it is used.
- A call is one stream (odd ids, increasing): one HEADERS frame whose block is built once per connection
  (``:method POST``, ``:scheme http``, ``:path /inference.GRPCInferenceService/ModelInfer``, ``:authority``,
  ``content-type: application/grpc``, ``te: trailers``, and the call metadata), then the length-prefixed message in
  DATA frames of at most the server's ``SETTINGS_MAX_FRAME_SIZE``, sent as the stream and connection send windows
  allow (waiting for the server's WINDOW_UPDATE when they do not).
- The answer is complete at END_STREAM: its ``grpc-status`` (in the trailers, or in a trailers-only answer) 0 is a
  success; another is a refusal with that code and ``grpc-message``. RST_STREAM, GOAWAY or a closed socket is a
  ``disconnected`` request.

One request is in flight per connection (the driver's rule for every transport), so flow control is per stream
and the connection's window is shared by one stream at a time.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any
from urllib.parse import unquote

from ..clock import SYSTEM_CLOCK, Clock
from .http1 import DISCONNECTED, ERROR_BODY_BYTES, Response

from ..workload.h2_frames import (ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, MAX_WINDOW, PADDED,
                                  PING, PREFACE, PRIORITY, RST_STREAM, SETTINGS, WINDOW_UPDATE)
from ..workload.h2_frames import U32 as _U32
from ..workload.h2_frames import frame as _frame
from ..workload.h2_frames import read_frame
from ..workload.h2_frames import literal as _literal


def request_block(path: str, authority: str, metadata: tuple[tuple[str, str], ...] = ()) -> bytes:
    """The HPACK block of every call's HEADERS frame: static-table ``:method POST`` (index 3) and ``:scheme http``
    (index 6), then literals (never indexed: nothing depends on the server's decoder state)."""
    fields = [(b":path", path.encode()), (b":authority", authority.encode()), (b"content-type", b"application/grpc"),
              (b"te", b"trailers"), *((k.encode(), v.encode()) for k, v in metadata)]
    return b"\x83\x86" + b"".join(_literal(k, v) for k, v in fields)


class _Blocks:
    """Header blocks decoded once each (the server may not index with a table of size 0: a block's bytes are its
    headers)."""

    def __init__(self) -> None:
        self.cache: dict[bytes, dict[str, str]] = {}

    def decode(self, block: bytes) -> dict[str, str]:
        got = self.cache.get(block)
        if got is None:
            from hpack import Decoder

            d = Decoder()
            d.max_allowed_table_size = 0
            d.header_table_size = 0
            got = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                   for k, v in d.decode(block, raw=True)}
            if len(self.cache) < 256:
                self.cache[block] = got
        return got


_BLOCKS = _Blocks()


class H2Connection(asyncio.Protocol):
    """One HTTP/2 connection sending unary gRPC calls of prebuilt messages, one at a time (module docstring).

    Args:
        block: the request HPACK block (:func:`request_block`).
        clock: source of a :class:`~.http1.Response`'s ``first_ns`` (when the answer's first frame arrived).
        status_of: gRPC status code (int) -> (HTTP status of the same fault, error kind).
    """

    def __init__(self, block: bytes, clock: Clock = SYSTEM_CLOCK, status_of: Any = None) -> None:
        self.open = False
        self.block, self.clock, self.status_of = block, clock, status_of
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.next_stream = 1
        self.max_frame = 16384
        self.peer_initial_window = 65535
        self.conn_window = 65535  # what we may still send on the connection
        self.stream_window = 0
        self.received = 0  # bytes of DATA taken from our connection window since its last update
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # the server's SETTINGS seen
        self.window_open = asyncio.Event()
        self._reset()

    def _reset(self) -> None:
        self.stream = 0
        self.waiter: asyncio.Future[Response] | None = None
        self.headers: list[dict[str, str]] = []
        self.pending = bytearray()  # a header block across CONTINUATION frames
        self.body_len = 0
        self.first_ns = 0
        self.end_stream = False

    # ------------------------------------------------------------------------------------------- asyncio side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        self.transport = transport  # type: ignore[assignment]
        self.open = True
        settings = struct.pack(">HI", 0x1, 0) + struct.pack(">HI", 0x2, 0) + struct.pack(">HI", 0x4, MAX_WINDOW)
        transport.write(PREFACE + _frame(SETTINGS, 0, 0, settings)  # type: ignore[attr-defined]
                        + _frame(WINDOW_UPDATE, 0, 0, _U32.pack(MAX_WINDOW - 65535)))

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
        self.open = False
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"closed before its SETTINGS: {exc}"))
        self.window_open.set()
        self._finish(Response(0, 0, DISCONNECTED))

    def data_received(self, data: bytes) -> None:  # noqa: D102
        buf = self.buf
        buf += data
        pos = 0
        while (f := read_frame(buf, pos)) is not None:
            kind, flags, stream, payload, pos = f
            try:
                self._on_frame(kind, flags, stream, payload)
            except Exception as e:  # noqa: BLE001 - a frame this client cannot read (a header block it cannot decode)
                self._finish(Response(0, 0, "client_error", f"{type(e).__name__}: {e}".encode()[:ERROR_BODY_BYTES]))
                self.close()
                return
        del buf[:pos]

    # --------------------------------------------------------------------------------------------- frames
    def _on_frame(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        if kind == DATA:
            self._on_data(flags, stream, payload)
        elif kind in (HEADERS, CONTINUATION):
            self._on_headers(kind, flags, stream, payload)
        elif kind == SETTINGS:
            if not flags & ACK:
                self._apply_settings(payload)
                self.transport.write(_frame(SETTINGS, ACK, 0))  # type: ignore[union-attr]
                if not self.ready.done():
                    self.ready.set_result(None)
        elif kind == WINDOW_UPDATE:
            n = _U32.unpack_from(payload)[0] & 0x7FFFFFFF
            if stream == 0:
                self.conn_window += n
            elif stream == self.stream:
                self.stream_window += n
            self.window_open.set()
        elif kind == PING and not flags & ACK:
            self.transport.write(_frame(PING, ACK, 0, payload))  # type: ignore[union-attr]
        elif kind == RST_STREAM and stream == self.stream:
            code = _U32.unpack_from(payload)[0]
            self._finish(Response(0, 0, DISCONNECTED, f"RST_STREAM error code {code}".encode()))
        elif kind == GOAWAY:  # no new stream here; one in flight at or under the last id is still answered
            self.open = False
            last = _U32.unpack_from(payload)[0] & 0x7FFFFFFF
            if self.stream and self.stream > last:
                self._finish(Response(0, 0, DISCONNECTED, b"GOAWAY before this stream"))
            if not self.stream:
                self.close()

    def _apply_settings(self, payload: bytes) -> None:
        for i in range(0, len(payload) - 5, 6):
            key, value = struct.unpack_from(">HI", payload, i)
            if key == 0x4:  # SETTINGS_INITIAL_WINDOW_SIZE: applies to open streams too (RFC 9113 6.9.2)
                self.stream_window += value - self.peer_initial_window
                self.peer_initial_window = value
                self.window_open.set()
            elif key == 0x5:  # SETTINGS_MAX_FRAME_SIZE
                self.max_frame = value

    def _on_data(self, flags: int, stream: int, payload: bytes) -> None:
        self.received += len(payload)
        if self.received >= MAX_WINDOW // 2:  # give the connection window back (streams start at the maximum)
            self.transport.write(_frame(WINDOW_UPDATE, 0, 0, _U32.pack(self.received)))  # type: ignore[union-attr]
            self.received = 0
        if stream != self.stream or not stream:
            return
        if flags & PADDED:
            payload = payload[1:len(payload) - payload[0]]
        if not self.first_ns:
            self.first_ns = self.clock.now_ns()
        self.body_len += len(payload)
        if flags & END_STREAM:
            self._complete()

    def _on_headers(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        if stream != self.stream or not stream:
            return
        if kind == HEADERS:
            if flags & PADDED:
                payload = payload[1:len(payload) - payload[0]]
            if flags & PRIORITY:
                payload = payload[5:]
            if not self.first_ns:
                self.first_ns = self.clock.now_ns()
            self.end_stream = bool(flags & END_STREAM)
        self.pending += payload
        if flags & END_HEADERS:
            self.headers.append(_BLOCKS.decode(bytes(self.pending)))
            self.pending = bytearray()
            if self.end_stream:
                self._complete()

    def _complete(self) -> None:
        merged: dict[str, str] = {}
        for h in self.headers:
            merged.update(h)
        status = int(merged.get(":status", "0") or 0)
        if status != 200:
            self._finish(Response(status, self.body_len, f"http_{status}" if status >= 400 else DISCONNECTED))
            return
        code = int(merged.get("grpc-status", "2") or 2)  # no status: UNKNOWN, as gRPC's clients read it
        if code == 0:
            self._finish(Response(200, max(0, self.body_len - 5)))
            return
        http, kind = self.status_of(code)
        message = unquote(merged.get("grpc-message", "")).encode("utf-8", "replace")[:ERROR_BODY_BYTES]
        self._finish(Response(http, 0, kind, message))

    def _finish(self, r: Response) -> None:
        w = self.waiter
        r.first_ns = self.first_ns
        self.stream = 0
        if w is not None and not w.done():
            w.set_result(r)
        if not self.open and self.transport is not None:  # after a GOAWAY: nothing more will go on this connection
            self.transport.close()

    # -------------------------------------------------------------------------------------------- client side
    async def send(self, message: bytes) -> Response:
        """Call ModelInfer with the serialized ``message`` and wait for its answer (never raises for a refusal
        or a broken connection: a :class:`~.http1.Response` with its ``error_kind``).

        Raises:
            asyncio.CancelledError: cancelled mid-call (a timeout): the connection is closed first.
            RuntimeError: a call is already in flight on this connection.
        """
        if self.waiter is not None:
            raise RuntimeError("H2Connection.send: one call at a time per connection")
        if not self.open:
            return Response(0, 0, DISCONNECTED)
        self._reset()
        stream = self.stream = self.next_stream
        self.next_stream += 2
        self.stream_window = self.peer_initial_window
        waiter = self.waiter = asyncio.get_running_loop().create_future()
        body = b"\x00" + _U32.pack(len(message)) + message
        try:
            head = _frame(HEADERS, END_HEADERS, stream, self.block)
            if len(body) <= min(self.max_frame, self.conn_window, self.stream_window):
                self.conn_window -= len(body)
                self.stream_window -= len(body)
                self.transport.write(head + _frame(DATA, END_STREAM, stream, body))  # type: ignore[union-attr]
            else:
                self.transport.write(head)  # type: ignore[union-attr]
                await self._send_body(stream, memoryview(body))
            return await waiter
        except BaseException:
            self.close()
            raise
        finally:
            self.waiter = None

    async def _send_body(self, stream: int, body: memoryview) -> None:
        """DATA frames of at most the peer's frame size, as the send windows allow."""
        pos = 0
        while pos < len(body):
            room = min(self.max_frame, self.conn_window, self.stream_window, len(body) - pos)
            if room <= 0:
                self.window_open.clear()
                await self.window_open.wait()
                if not self.open or self.waiter is None or self.waiter.done():
                    return
                continue
            last = pos + room == len(body)
            self.transport.write(_frame(DATA, END_STREAM if last else 0, stream, bytes(body[pos:pos + room])))  # type: ignore[union-attr]
            self.conn_window -= room
            self.stream_window -= room
            pos += room

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self.open = False
        if self.transport is not None:
            self.transport.close()


async def open_h2(host: str, port: int, block: bytes, status_of: Any, clock: Clock = SYSTEM_CLOCK,
                  timeout_s: float = 10.0) -> H2Connection:
    """Connect, exchange the preface and SETTINGS (deadline ``timeout_s``).

    Raises:
        OSError, TimeoutError, ConnectionError: refused, unreachable, or no SETTINGS from the server in time.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout_s):
        _, conn = await loop.create_connection(lambda: H2Connection(block, clock, status_of), host, port)
        await conn.ready
    return conn


__all__ = ["H2Connection", "MAX_WINDOW", "open_h2", "request_block"]
