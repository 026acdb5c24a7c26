"""gRPC's HTTP/2 served from the event loop itself: the server's gRPC front (issue 40 items 1 and 4).

Why not ``grpc.aio``: its server hands every event from gRPC core's own I/O threads to the asyncio loop ("multiple
thread hops per RPC", grpc/grpc#22258). On a replica of one or two cores those threads took about 170 us of CPU per
request from the model call (BENCHMARKS.md, "gRPC beside HTTP", 1b). Here, as uvicorn does for HTTP/1.1, one
:class:`asyncio.Protocol` per connection reads the frames and the handlers run on the loop: no thread, no hop.

What a connection does (RFC 9113 HTTP/2 over cleartext with prior knowledge, which is what gRPC's ``insecure``
channels speak; gRPC over HTTP/2 as grpc/grpc's ``doc/PROTOCOL-HTTP2.md`` defines it):

- It reads the client's preface and sends its SETTINGS: ``HEADER_TABLE_SIZE`` 0 (the client may not index, so a
  header block's bytes are its headers and a repeated block is decoded once; a block that came before the client
  saw this still decodes with the connection's own HPACK decoder), the largest stream window, 1 MiB frames; a
  WINDOW_UPDATE opens the connection window. It acknowledges the client's SETTINGS and applies
  ``INITIAL_WINDOW_SIZE`` (to open streams too) and ``MAX_FRAME_SIZE``, answers PINGs, and gives received bytes
  back to the connection and stream windows once half of one is used.
- A stream is one call: HEADERS (and CONTINUATION) name the RPC (``:path``), the call metadata (``-bin`` keys
  base64-decoded), ``grpc-timeout`` and ``grpc-encoding`` (identity, gzip or deflate); DATA frames carry
  length-prefixed messages. A unary call runs when its half of the stream ends; a streaming call
  (``ModelStreamInfer``) runs from its HEADERS on, its requests handed over as they complete.
- Answers: HEADERS (``:status 200``, ``content-type: application/grpc``), the messages in DATA frames as the
  client's windows allow, then trailers with ``grpc-status`` and ``grpc-message``; a call that fails before any
  message is answered trailers-only. An unknown RPC is UNIMPLEMENTED, a message over ``max_message_bytes`` (also
  after decompression) RESOURCE_EXHAUSTED with gRPC core's words, a passed deadline DEADLINE_EXCEEDED.
- RST_STREAM from the client cancels its call (the handler sees ``context.cancelled()`` and its task is
  cancelled: the request leaves the batcher's queue as a disconnected HTTP client's does). A connection error
  (a bad preface, an undecodable header block) is a GOAWAY and a close.
- :meth:`GrpcFront.stop`: no new connection, a GOAWAY to each (new streams refused with REFUSED_STREAM), running
  calls given ``grace_s`` to finish, then cancelled (UNAVAILABLE) and the connections closed.

The handlers are :class:`~.grpc_service.GrpcService`'s; what they get as ``context`` is
:class:`~.grpc_calls.CallContext` (the part of grpc.aio's ``ServicerContext`` they use: ``abort``,
``invocation_metadata``, ``cancelled``). The calls half of a connection (messages, handlers, answers) is
:mod:`.grpc_calls`.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import grpc

from ..workload.h2_frames import (ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, MAX_WINDOW,
                                  NO_ERROR, PING, PREFACE, PRIORITY, PROTOCOL_ERROR, REFUSED_STREAM, RST_STREAM,
                                  SETTINGS, U32, WINDOW_UPDATE, frame, literal, read_frame, read_settings, settings, strip_padding)
from .grpc_calls import CallContext, CallError, CallRunner, CallStream, parse_timeout

log = logging.getLogger("inferperf.serve")
#: the frame size this server allows its clients (a 600 kB request in one frame instead of 37)
RECEIVE_FRAME = 2**20
_NOT_METADATA = frozenset({"content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding"})
_BLOCKS: dict[bytes, list[tuple[str, str]]] = {}  # header blocks decoded once (a table of size 0: bytes = headers)


class H2ServerConnection(CallRunner, asyncio.Protocol):
    """One client connection of :class:`GrpcFront` (module docstring)."""

    def __init__(self, front: GrpcFront) -> None:
        self.front = front
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.preface = False
        self.streams: dict[int, CallStream] = {}
        self.last_stream = 0
        self.decoder: Any = None
        self.peer_window = 65535  # the client's initial stream window
        self.send_window = 65535  # what we may still send on the connection
        self.max_frame = 16384  # the client's SETTINGS_MAX_FRAME_SIZE
        self.received = 0
        self.block = bytearray()  # a header block across CONTINUATION frames
        self.block_stream, self.block_end = 0, False
        self.going_away = False
        self.room = asyncio.Event()  # set when a window grows or the transport drains
        self.writable = True
        self.idle = asyncio.Event()
        self.idle.set()

    # ------------------------------------------------------------------------------------------- asyncio side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        self.transport = transport  # type: ignore[assignment]
        self.front.connections.add(self)
        ours = settings(HEADER_TABLE_SIZE=0, ENABLE_PUSH=0, INITIAL_WINDOW_SIZE=MAX_WINDOW, MAX_FRAME_SIZE=RECEIVE_FRAME)
        transport.write(frame(SETTINGS, 0, 0, ours) + frame(WINDOW_UPDATE, 0, 0, U32.pack(MAX_WINDOW - 65535)))  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
        self.front.connections.discard(self)
        self.writable = False
        self.room.set()
        for st in list(self.streams.values()):
            self._cancel(st, "reset")
        self.streams.clear()
        self.idle.set()

    def pause_writing(self) -> None:  # noqa: D102
        self.writable = False

    def resume_writing(self) -> None:  # noqa: D102
        self.writable = True
        self.room.set()

    def data_received(self, data: bytes) -> None:  # noqa: D102
        buf = self.buf
        buf += data
        pos = 0
        if not self.preface:
            if len(buf) < len(PREFACE):
                if not PREFACE.startswith(bytes(buf)):
                    self._fail(PROTOCOL_ERROR, "not an HTTP/2 client preface (gRPC needs HTTP/2)")
                return
            if buf[:len(PREFACE)] != PREFACE:
                self._fail(PROTOCOL_ERROR, "not an HTTP/2 client preface (gRPC needs HTTP/2)")
                return
            self.preface, pos = True, len(PREFACE)
        while self.transport is not None and (f := read_frame(buf, pos)) is not None:
            kind, flags, sid, payload, pos = f
            try:
                self._on_frame(kind, flags, sid, payload)
            except Exception as e:  # noqa: BLE001 - a frame this server cannot read: a connection error
                self._fail(PROTOCOL_ERROR, f"{type(e).__name__}: {e}")
                return
        del buf[:pos]

    # --------------------------------------------------------------------------------------------- frames
    def _on_frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if self.block_stream and kind != CONTINUATION:
            raise ValueError("a header block was not continued (RFC 9113 6.10)")
        if kind == DATA:
            self._on_data(flags, sid, payload)
        elif kind in (HEADERS, CONTINUATION):
            self._on_headers(kind, flags, sid, payload)
        elif kind == SETTINGS:
            if not flags & ACK:
                self._apply_settings(payload)
                self.transport.write(frame(SETTINGS, ACK, 0))  # type: ignore[union-attr]
        elif kind == WINDOW_UPDATE:
            n = U32.unpack_from(payload)[0] & 0x7FFFFFFF
            if sid == 0:
                self.send_window += n
            elif (st := self.streams.get(sid)) is not None:
                st.window += n
            self.room.set()
        elif kind == PING and not flags & ACK:
            self.transport.write(frame(PING, ACK, 0, payload))  # type: ignore[union-attr]
        elif kind == RST_STREAM:
            st = self.streams.pop(sid, None)
            if st is not None:
                self._cancel(st, "reset")
                self._maybe_idle()
        elif kind == GOAWAY:
            self.going_away = True
            self._maybe_idle()

    def _apply_settings(self, payload: bytes) -> None:
        for key, value in read_settings(payload).items():
            if key == 0x4:  # SETTINGS_INITIAL_WINDOW_SIZE: applies to open streams too (RFC 9113 6.9.2)
                for st in self.streams.values():
                    st.window += value - self.peer_window
                self.peer_window = value
                self.room.set()
            elif key == 0x5:
                self.max_frame = value

    def _on_headers(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == HEADERS:
            payload = strip_padding(flags, payload)
            if flags & PRIORITY:
                payload = payload[5:]
            self.block_stream, self.block_end, self.block = sid, bool(flags & END_STREAM), bytearray(payload)
        elif sid != self.block_stream:
            raise ValueError("CONTINUATION without its HEADERS")
        else:
            self.block += payload
        if flags & END_HEADERS:
            headers = self._decode(bytes(self.block))
            self.block_stream, self.block = 0, bytearray()
            self._on_block(sid, headers, self.block_end)

    def _decode(self, block: bytes) -> list[tuple[str, str]]:
        got = _BLOCKS.get(block)
        if got is not None and self.decoder is None:
            return got
        if self.decoder is None:
            from hpack import Decoder

            self.decoder = Decoder()
        d = self.decoder
        if d.header_table.maxsize == 0 and (got := _BLOCKS.get(block)) is not None:
            return got
        got = d.decode(block)
        if d.header_table.maxsize == 0:
            d.max_allowed_table_size = 0  # the table stays empty: a block's decoding depends on its bytes alone
            if len(_BLOCKS) < 1024:
                _BLOCKS[block] = got
        return got

    def _on_block(self, sid: int, headers: list[tuple[str, str]], end: bool) -> None:
        st = self.streams.get(sid)
        if st is not None:  # the client's trailers: its half of the stream ends
            if end:
                self._end_request(st)
            return
        if sid % 2 == 0 or sid <= self.last_stream:
            raise ValueError(f"stream {sid} is not a new client stream")
        self.last_stream = sid
        if self.going_away:
            self.transport.write(frame(RST_STREAM, 0, sid, U32.pack(REFUSED_STREAM)))  # type: ignore[union-attr]
            return
        h = dict(headers)
        if not h.get("content-type", "").startswith("application/grpc"):
            self._write_block(sid, literal(b":status", b"415"), END_STREAM)  # not a gRPC request: HTTP's answer
            return
        rpc = self.front.rpcs.get(h.get(":path", ""))
        metadata = tuple((k, base64.b64decode(v + "==") if k.endswith("-bin") else v) for k, v in headers
                         if k[0] != ":" and k not in _NOT_METADATA)
        encoding = h.get("grpc-encoding", "identity")
        st = CallStream(sid, rpc, CallContext(metadata), self.peer_window, None if encoding == "identity" else encoding)
        self.streams[sid] = st
        self.idle.clear()
        if rpc is None:
            self._answer_status(st, grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {h.get(':path', '')}")
        elif st.encoding not in (None, "gzip", "deflate"):
            self._answer_status(st, grpc.StatusCode.UNIMPLEMENTED,
                                f"Compression algorithm '{encoding}' is not supported (identity, gzip, deflate)")
        else:
            timeout = parse_timeout(h.get("grpc-timeout", ""))
            if timeout is not None:
                st.timer = asyncio.get_running_loop().call_later(timeout, self._deadline, st)
            if rpc.streaming:
                st.queue = asyncio.Queue()
                st.task = asyncio.ensure_future(self._run_stream(st))
        if end:
            self._end_request(st)

    def _on_data(self, flags: int, sid: int, payload: bytes) -> None:
        n = len(payload)
        self.received += n
        if self.received >= MAX_WINDOW // 2:  # give the connection window back (streams start at the maximum)
            self.transport.write(frame(WINDOW_UPDATE, 0, 0, U32.pack(self.received)))  # type: ignore[union-attr]
            self.received = 0
        st = self.streams.get(sid)
        if st is None or st.half_closed:
            return  # a stream this server already answered or reset: its bytes are dropped
        st.received += n
        if st.received >= MAX_WINDOW // 2:
            self.transport.write(frame(WINDOW_UPDATE, 0, sid, U32.pack(st.received)))  # type: ignore[union-attr]
            st.received = 0
        payload = strip_padding(flags, payload)
        if not st.answered and payload:
            try:
                self._take(st, payload)
            except CallError as e:
                self._answer_status(st, e.code, e.details)
                self._cancel(st, "refused")  # a streaming call's handler stops too
        if flags & END_STREAM:
            self._end_request(st)

    def go_away(self) -> None:
        """Refuse new streams (GOAWAY naming the last stream taken); running ones go on."""
        if self.transport is not None and not self.going_away:
            self.going_away = True
            self.transport.write(frame(GOAWAY, 0, 0, U32.pack(self.last_stream) + U32.pack(NO_ERROR)))

    def cancel_all(self) -> None:
        """Cancel every running call (each answered UNAVAILABLE) and close the connection."""
        for st in list(self.streams.values()):
            self._cancel(st, "shutdown")
        if self.transport is not None:
            asyncio.get_running_loop().call_soon(self.transport.close)

    def _fail(self, code: int, why: str) -> None:
        """A connection error: GOAWAY with ``code`` and ``why``, then close."""
        log.info("gRPC connection closed: %s", why)
        t = self.transport
        if t is not None:
            t.write(frame(GOAWAY, 0, 0, U32.pack(self.last_stream) + U32.pack(code) + why.encode()[:256]))
            t.close()
            self.transport = None


class GrpcFront:
    """The gRPC server of one ``ServeApp``: :class:`H2ServerConnection` on the running event loop (uvicorn's),
    stopped with the server's own shutdown.

    Args:
        app: the ``ServeApp``.
        host, port: where to listen (port 0: any free port; :attr:`port` is the one bound once started).
        max_message_bytes: the largest request message accepted (gRPC's default is 4 MiB; a batch of 8
            224x224x3 FP32 images is 4.8 MB); 0 = the largest model body limit (``max_body_bytes``) plus 64 KiB, so a
            message a little over a model's limit is refused with that model's words (413, RESOURCE_EXHAUSTED,
            "raise --max-body-bytes") and one far over by the front itself (RESOURCE_EXHAUSTED, gRPC core's
            words). Answers are not limited (Triton sets both to INT32_MAX).
    """

    def __init__(self, app: Any, host: str, port: int, max_message_bytes: int = 0) -> None:
        from .grpc_service import GrpcService

        self.app, self.host, self.port = app, host, port
        limits = [m.options.max_body_bytes for m in app.all_models()] or [64 * 2**20]
        self.max_message_bytes = max_message_bytes or min(2**31 - 1, max(limits) + 65536)
        self.rpcs = GrpcService(app).rpcs()
        self.connections: set[H2ServerConnection] = set()
        self.server: asyncio.AbstractServer | None = None
        self.stopping = False

    async def start(self) -> int:
        """Bind and start serving; returns the port bound.

        Raises:
            RuntimeError: the address could not be bound (a port in use).
        """
        loop = asyncio.get_running_loop()
        try:
            self.server = await loop.create_server(lambda: H2ServerConnection(self), self.host, self.port,
                                                   reuse_address=True)
        except OSError as e:
            raise RuntimeError(f"gRPC could not bind {self.host}:{self.port}: {e.strerror or e}") from None
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self, grace_s: float | None = 30.0) -> None:
        """Refuse new RPCs at once; let those running finish for up to ``grace_s`` s, then cancel them."""
        if self.server is None:
            return
        self.stopping = True
        self.server.close()
        conns = list(self.connections)
        for c in conns:
            c.go_away()
        busy = [c.idle.wait() for c in conns if not c.idle.is_set()]
        if busy:
            try:
                await asyncio.wait_for(asyncio.gather(*busy), grace_s)
            except TimeoutError:
                pass
        for c in list(self.connections):
            c.cancel_all()
        await asyncio.sleep(0)
        self.server = None


__all__ = ["GrpcFront", "H2ServerConnection", "RECEIVE_FRAME"]
