"""gRPC's HTTP/2 served from the event loop itself: the server's gRPC front (issue 40 items 1 and 4).

Why not ``grpc.aio``: its server hands every event from gRPC core's own I/O threads to the asyncio loop ("multiple
thread hops per RPC", grpc/grpc#22258). On a replica of one or two cores those threads took about 170 us of CPU per
request from the model call (BENCHMARKS.md, "gRPC beside HTTP", 1b). Here, as uvicorn does for HTTP/1.1, one
:class:`asyncio.Protocol` per connection reads the frames and the handlers run on the loop: no thread, no hop.

What a connection does (RFC 9113 HTTP/2 over cleartext with prior knowledge, which is what gRPC's ``insecure``
channels speak; gRPC over HTTP/2 as grpc/grpc's ``doc/PROTOCOL-HTTP2.md`` defines it):

- It reads the client's preface and sends its SETTINGS: ``HEADER_TABLE_SIZE`` 0 (the client may not index, so a
  header block's bytes are its headers and a repeated block is decoded once; a block that came before the client
  saw this still decodes with the connection's own HPACK decoder), at most :data:`MAX_STREAMS` streams, 16 MiB
  stream windows, 1 MiB frames, 64 KiB header lists; a WINDOW_UPDATE opens the connection window. It
  acknowledges the client's SETTINGS and applies ``INITIAL_WINDOW_SIZE`` (to open streams too) and
  ``MAX_FRAME_SIZE`` (out-of-range values are connection errors), answers PINGs, and gives received bytes back
  to the connection and stream windows once half of one is used (a streaming call's credit waits while its
  handler is behind: only that stream's client waits).
- Bounded: a frame over 1 MiB, a header block over 64 KiB, a unary message over ``max_message_bytes`` (from its
  prefix, or from the bytes received) are refused before they are kept; a streaming call parses at most 1,024
  waiting messages (8 MiB) ahead of its handler; past 4 MiB of unsent answers the connection stops being read.
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
- :meth:`.grpc_front.GrpcFront.stop`: no new connection, a GOAWAY to each (new streams refused with REFUSED_STREAM), running
  calls given ``grace_s`` to finish, then cancelled (UNAVAILABLE) and the connections closed.

The handlers are :class:`~.grpc_service.GrpcService`'s; what they get as ``context`` is
:class:`~.grpc_calls.CallContext` (the part of grpc.aio's ``ServicerContext`` they use: ``abort``,
``invocation_metadata``, ``cancelled``). The calls half of a connection (messages, handlers, answers) is
:mod:`.grpc_calls`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from typing import Any

import grpc

from ..workload.h2_frames import (ACK, COMPRESSION_ERROR, CONTINUATION, DATA, DEFAULT_FRAME, END_HEADERS, END_STREAM,
                                  FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, GOAWAY, HEADERS, MAX_FRAME_LIMIT, MAX_WINDOW,
                                  NO_ERROR, PING, PREFACE, PRIORITY, PRIORITY_FRAME, PROTOCOL_ERROR, PUSH_PROMISE, REFUSED_STREAM,
                                  RST_STREAM, SETTINGS, U32, WINDOW_UPDATE, frame, literal, read_frame, read_settings,
                                  settings, strip_padding)
from .grpc_calls import RECEIVE_WINDOW, CallContext, CallError, CallRunner, CallStream, parse_timeout

log = logging.getLogger("inferperf.serve")
#: the frame size this server allows its clients (a 600 kB request in one frame instead of 37)
RECEIVE_FRAME = 2**20
#: the most streams one connection may have open (SETTINGS_MAX_CONCURRENT_STREAMS; more are REFUSED_STREAM)
MAX_STREAMS = 1000
#: the largest header block (HEADERS + CONTINUATION, compressed) and decoded header list accepted
MAX_HEADER_BLOCK = 65536
#: bytes written but not yet taken by the socket past which the connection stops being read (a client that sends
#: PINGs or requests but does not read the answers)
WRITE_BUFFER = 4 * 2**20
_NOT_METADATA = frozenset({"content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding"})
_BLOCKS: dict[bytes, list[tuple[str, str]]] = {}  # header blocks decoded once (a table of size 0: bytes = headers)
_CACHED_BLOCK = 4096  # the largest block kept there (1,024 of them at most: 4 MiB)
_STREAM_FRAMES = frozenset({DATA, HEADERS, PRIORITY_FRAME, RST_STREAM, CONTINUATION})  # never on stream 0
_CONNECTION_FRAMES = frozenset({SETTINGS, PING, GOAWAY})  # only on stream 0


class ConnectionFault(Exception):
    """A connection error (RFC 9113 section 5.4.1): GOAWAY with ``code``, then close."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


class H2ServerConnection(CallRunner, asyncio.Protocol):
    """One client connection of a :class:`~.grpc_front.GrpcFront` (module docstring)."""

    def __init__(self, front: Any) -> None:
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
        self.pauses: set[str] = set()  # why reading is paused (our writes backed up: a client that does not read)
        self.idle = asyncio.Event()
        self.idle.set()

    # ------------------------------------------------------------------------------------------- asyncio side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=WRITE_BUFFER)  # type: ignore[attr-defined]
        self.front.connections.add(self)
        ours = settings(HEADER_TABLE_SIZE=0, ENABLE_PUSH=0, MAX_CONCURRENT_STREAMS=MAX_STREAMS,
                        INITIAL_WINDOW_SIZE=RECEIVE_WINDOW, MAX_FRAME_SIZE=RECEIVE_FRAME,
                        MAX_HEADER_LIST_SIZE=MAX_HEADER_BLOCK)
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
        self.pause("writes")  # a client that does not read (PINGs, answers) stops being read

    def resume_writing(self) -> None:  # noqa: D102
        self.writable = True
        self.room.set()
        self.resume("writes")

    def pause(self, reason: str) -> None:
        """Stop reading the socket while ``reason`` holds (with others: until none holds)."""
        if not self.pauses and self.transport is not None:
            self.transport.pause_reading()
        self.pauses.add(reason)

    def resume(self, reason: str) -> None:
        """``reason`` no longer holds: read again once no other does."""
        if reason in self.pauses:
            self.pauses.discard(reason)
            if not self.pauses and self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()

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
        while self.transport is not None:
            if len(buf) - pos >= 3 and int.from_bytes(buf[pos:pos + 3], "big") > RECEIVE_FRAME:
                self._fail(FRAME_SIZE_ERROR, f"a frame over SETTINGS_MAX_FRAME_SIZE ({RECEIVE_FRAME})")
                return
            if (f := read_frame(buf, pos)) is None:
                break
            kind, flags, sid, payload, pos = f
            try:
                self._on_frame(kind, flags, sid, payload)
            except ConnectionFault as e:
                self._fail(e.code, str(e))
                return
            except Exception as e:  # noqa: BLE001 - a frame this server cannot read: a connection error
                self._fail(PROTOCOL_ERROR, f"{type(e).__name__}: {e}")
                return
        del buf[:pos]

    # --------------------------------------------------------------------------------------------- frames
    def _on_frame(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if self.block_stream and kind != CONTINUATION:
            raise ConnectionFault(PROTOCOL_ERROR, "a header block was not continued (RFC 9113 6.10)")
        if (sid == 0 and kind in _STREAM_FRAMES) or (sid and kind in _CONNECTION_FRAMES) or kind == PUSH_PROMISE:
            raise ConnectionFault(PROTOCOL_ERROR, f"frame type {kind} on stream {sid} (RFC 9113 section 6)")
        if kind == DATA:
            self._on_data(flags, sid, payload)
        elif kind in (HEADERS, CONTINUATION):
            self._on_headers(kind, flags, sid, payload)
        elif kind == SETTINGS:
            if flags & ACK:
                if payload:
                    raise ConnectionFault(FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload")
            else:
                self._apply_settings(payload)
                self.transport.write(frame(SETTINGS, ACK, 0))  # type: ignore[union-attr]
        elif kind == WINDOW_UPDATE:
            self._on_window_update(sid, payload)
        elif kind == PING:
            if len(payload) != 8:
                raise ConnectionFault(FRAME_SIZE_ERROR, "a PING of other than 8 bytes")
            if not flags & ACK:
                self.transport.write(frame(PING, ACK, 0, payload))  # type: ignore[union-attr]
        elif kind == RST_STREAM:
            st = self.streams.pop(sid, None)
            if st is not None:
                self._cancel(st, "reset")
                self._maybe_idle()
        elif kind == GOAWAY:
            self.going_away = True
            self._maybe_idle()

    def _on_window_update(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionFault(FRAME_SIZE_ERROR, "a WINDOW_UPDATE of other than 4 bytes")
        n = U32.unpack_from(payload)[0] & 0x7FFFFFFF
        if sid == 0:
            if n == 0 or self.send_window + n > MAX_WINDOW:
                raise ConnectionFault(PROTOCOL_ERROR if n == 0 else FLOW_CONTROL_ERROR,
                                      f"connection WINDOW_UPDATE of {n} (RFC 9113 6.9.1)")
            self.send_window += n
        elif (st := self.streams.get(sid)) is not None:
            if n == 0 or st.window + n > MAX_WINDOW:  # a stream error: that call ends, the others go on
                self._answer_status(st, grpc.StatusCode.INTERNAL, f"stream WINDOW_UPDATE of {n} (RFC 9113 6.9.1)")
                self._cancel(st, "refused")
                return
            st.window += n
        self.room.set()

    def _apply_settings(self, payload: bytes) -> None:
        if len(payload) % 6:
            raise ConnectionFault(FRAME_SIZE_ERROR, "a SETTINGS payload not a multiple of 6 bytes")
        for key, value in read_settings(payload).items():
            if key == 0x2 and value > 1:
                raise ConnectionFault(PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value}")
            if key == 0x4:  # SETTINGS_INITIAL_WINDOW_SIZE: applies to open streams too (RFC 9113 6.9.2)
                if value > MAX_WINDOW:
                    raise ConnectionFault(FLOW_CONTROL_ERROR, f"SETTINGS_INITIAL_WINDOW_SIZE {value}")
                for st in self.streams.values():
                    st.window += value - self.peer_window
                self.peer_window = value
                self.room.set()
            elif key == 0x5:
                if not DEFAULT_FRAME <= value <= MAX_FRAME_LIMIT:
                    raise ConnectionFault(PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value}")
                self.max_frame = value

    def _on_headers(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == HEADERS:
            payload = strip_padding(flags, payload)
            if flags & PRIORITY:
                payload = payload[5:]
            self.block_stream, self.block_end, self.block = sid, bool(flags & END_STREAM), bytearray(payload)
        elif not self.block_stream or sid != self.block_stream:
            raise ConnectionFault(PROTOCOL_ERROR, "CONTINUATION without its HEADERS")
        else:
            self.block += payload
        if len(self.block) > MAX_HEADER_BLOCK:
            raise ConnectionFault(PROTOCOL_ERROR, f"a header block over {MAX_HEADER_BLOCK} bytes")
        if flags & END_HEADERS:
            headers = self._decode(bytes(self.block))
            self.block_stream, self.block = 0, bytearray()
            self._on_block(sid, headers, self.block_end)

    def _decode(self, block: bytes) -> list[tuple[str, str]]:
        """The block's headers, from this connection's HPACK decoder; once the client has emptied its table
        (our HEADER_TABLE_SIZE 0) a block's headers depend on its bytes alone and repeated blocks come from the
        cache.

        Raises:
            ConnectionFault: COMPRESSION_ERROR for a block that does not decode (the decoder's state is lost).
        """
        if self.decoder is None:
            from hpack import Decoder

            self.decoder = Decoder(max_header_list_size=MAX_HEADER_BLOCK)
        d = self.decoder
        if d.header_table.maxsize == 0 and (got := _BLOCKS.get(block)) is not None:
            return got
        try:
            got = d.decode(block)
        except Exception as e:  # noqa: BLE001 - hpack's HPACKError family, and what a corrupt block raises
            raise ConnectionFault(COMPRESSION_ERROR, f"header block: {type(e).__name__}: {e}") from None
        if d.header_table.maxsize == 0:
            d.max_allowed_table_size = 0  # the table stays empty: a block's decoding depends on its bytes alone
            if len(_BLOCKS) < 1024 and len(block) <= _CACHED_BLOCK:
                _BLOCKS[block] = got
        return got

    def _on_block(self, sid: int, headers: list[tuple[str, str]], end: bool) -> None:
        st = self.streams.get(sid)
        if st is not None:  # the client's trailers: its half of the stream ends
            if end:
                self._end_request(st)
            else:  # a second HEADERS that does not end the stream: malformed (a stream error)
                self._answer_status(st, grpc.StatusCode.INTERNAL, "a second HEADERS without END_STREAM")
                self._cancel(st, "refused")
            return
        if sid % 2 == 0 or sid <= self.last_stream:
            raise ConnectionFault(PROTOCOL_ERROR, f"stream {sid} is not a new client stream")
        self.last_stream = sid
        if self.going_away or len(self.streams) >= MAX_STREAMS:
            self.transport.write(frame(RST_STREAM, 0, sid, U32.pack(REFUSED_STREAM)))  # type: ignore[union-attr]
            return
        h = dict(headers)
        if not h.get("content-type", "").startswith("application/grpc"):
            self._write_block(sid, literal(b":status", b"415"), END_STREAM)  # not a gRPC request: HTTP's answer
            return
        rpc = self.front.rpcs.get(h.get(":path", ""))
        try:
            metadata = tuple((k, base64.b64decode(v + "==", validate=True) if k.endswith("-bin") else v)
                             for k, v in headers if k[0] != ":" and k not in _NOT_METADATA)
            bad_metadata = ""
        except (binascii.Error, ValueError) as e:
            metadata, bad_metadata = (), f"a -bin metadata value is not base64: {e}"
        encoding = h.get("grpc-encoding", "identity")
        st = CallStream(sid, rpc, CallContext(metadata), self.peer_window, None if encoding == "identity" else encoding)
        self.streams[sid] = st
        self.idle.clear()
        if bad_metadata:
            self._answer_status(st, grpc.StatusCode.INTERNAL, bad_metadata)
        elif rpc is None:
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
                self._start(st, self._run_stream(st))
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
        payload = strip_padding(flags, payload)
        if not st.answered and payload:
            try:
                self._take(st, payload)
            except CallError as e:
                self._answer_status(st, e.code, e.details)
                self._cancel(st, "refused")  # a streaming call's handler stops too
            except Exception as e:  # noqa: BLE001 - a message this call cannot take: that call ends, not the others
                self._answer_status(st, grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
                self._cancel(st, "refused")
        if flags & END_STREAM:
            self._end_request(st)
        elif not st.answered:
            self._give_back(st)

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


__all__ = ["ConnectionFault", "H2ServerConnection", "MAX_HEADER_BLOCK", "MAX_STREAMS", "RECEIVE_FRAME", "WRITE_BUFFER"]
