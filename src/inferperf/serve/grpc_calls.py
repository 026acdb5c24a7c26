"""The calls of a gRPC connection (:mod:`.grpc_h2`): messages taken from DATA, handlers run on the event loop,
answers written as the client's windows allow, deadlines and cancellation.

:class:`CallRunner` is the half of :class:`~.grpc_h2.H2ServerConnection` that works on one stream at a time; the
other half reads frames. Sources: grpc/grpc ``doc/PROTOCOL-HTTP2.md`` (length-prefixed messages, trailers,
``grpc-timeout``, ``grpc-encoding``), RFC 9113 section 6.9 (flow control).
"""

from __future__ import annotations

import asyncio
import logging
import re
import zlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from ..workload.h2_frames import (CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS, MESSAGE_PREFIX, NO_ERROR,
                                  RST_STREAM, U32, WINDOW_UPDATE, frame, grpc_message_value, literal)

log = logging.getLogger("inferperf.serve")
RESPONSE_HEAD = b"\x88" + literal(b"content-type", b"application/grpc")  # :status 200 is static index 8
OK_TRAILERS = literal(b"grpc-status", b"0")
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_TIMEOUT = re.compile(r"[0-9]{1,8}[HMSmun]")
#: a streaming call's requests parsed but not yet taken by its handler (count, bytes): at either, its further
#: bytes stay unparsed and their flow-control credit is held back until the handler catches up
MAX_QUEUED, MAX_QUEUED_BYTES = 1024, 8 * 2**20
#: the stream window this server grants (SETTINGS_INITIAL_WINDOW_SIZE): what one stream may send ahead of it
RECEIVE_WINDOW = 16 * 2**20


class Abort(Exception):
    """A handler's ``context.abort(code, details)``: the call ends with that status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class CallContext:
    """The ``context`` a handler gets: the call's metadata, whether it was cancelled, and ``abort``."""

    __slots__ = ("metadata", "is_cancelled")

    def __init__(self, metadata: tuple[tuple[str, Any], ...]) -> None:
        self.metadata, self.is_cancelled = metadata, False

    def invocation_metadata(self) -> tuple[tuple[str, Any], ...]:
        """``(key, value)`` pairs of the call's metadata (keys lower-case; ``-bin`` values as bytes)."""
        return self.metadata

    def cancelled(self) -> bool:
        """True once the client reset the stream, the deadline passed, or the server stopped."""
        return self.is_cancelled

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        """End the call with ``code`` and ``details``.

        Raises:
            Abort: always (the front answers it).
        """
        raise Abort(code, details)


def parse_timeout(value: str) -> float | None:
    """``grpc-timeout`` (1-8 digits and a unit H M S m u n) in seconds; None when malformed (ignored, as gRPC
    core ignores it)."""
    if _TIMEOUT.fullmatch(value):
        return int(value[:-1]) * _TIMEOUT_UNITS[value[-1]]
    return None


class CallStream:
    """One call's state: its RPC, context, bytes received, send window, task and why it was cancelled."""

    __slots__ = ("id", "rpc", "ctx", "chunks", "size", "buf", "queue", "queued_bytes", "fed_end", "task", "window",
                 "received", "half_closed", "answered", "headers_sent", "encoding", "timer", "why")

    def __init__(self, sid: int, rpc: Any, ctx: CallContext, window: int, encoding: str | None) -> None:
        self.id, self.rpc, self.ctx, self.window, self.encoding = sid, rpc, ctx, window, encoding
        self.chunks: list[bytes] = []  # a unary call's DATA, joined once at the end
        self.size = 0  # bytes in chunks
        self.buf = bytearray()  # a streaming call's bytes not yet a whole message
        self.queue: asyncio.Queue[Any] | None = None
        self.queued_bytes = 0  # message bytes in queue
        self.fed_end = False  # the end of the client's half handed to the handler (None in queue)
        self.task: asyncio.Task[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.received = 0
        self.half_closed = self.answered = self.headers_sent = False
        self.why = ""  # why the call was cancelled: "reset", "deadline", "shutdown"


class CallError(Exception):
    """A call refused by the front itself (a message over the limit, one that does not parse)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class CallRunner:
    """The calls half of a connection; the class using it provides ``transport``, ``front``, ``streams``,
    ``max_frame``, ``send_window``, ``writable``, ``room``, ``idle`` and ``going_away``."""

    transport: Any
    front: Any
    streams: dict[int, CallStream]
    max_frame: int
    send_window: int
    writable: bool
    room: asyncio.Event
    idle: asyncio.Event
    going_away: bool

    # ------------------------------------------------------------------------------------------- messages
    def _check_size(self, length: int) -> None:
        limit = self.front.max_message_bytes
        if length > limit:
            raise CallError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"Received message larger than max ({length} vs. {limit})")

    def _take(self, st: CallStream, payload: bytes) -> None:
        if st.queue is None:  # unary: keep the bytes; refuse a message over the limit from its prefix, and bytes
            before = st.size  # past the limit whatever the prefix says
            st.chunks.append(payload)
            st.size += len(payload)
            if before < 5 <= st.size:
                self._check_size(MESSAGE_PREFIX.unpack_from(b"".join(st.chunks)[:5] if before else payload)[1])
            if st.size > self.front.max_message_bytes + 5:
                self._check_size(st.size - 5)
            return
        st.buf += payload
        self._feed(st)

    def _backlogged(self, st: CallStream) -> bool:
        return st.queue is not None and (st.queue.qsize() >= MAX_QUEUED or st.queued_bytes >= MAX_QUEUED_BYTES)

    def _give_back(self, st: CallStream) -> None:
        """Return the stream's received bytes to its window once half of it is used, unless its handler is behind
        (RFC 9113 6.9: the client then waits, and only this stream does)."""
        if st.received >= RECEIVE_WINDOW // 2 and not self._backlogged(st) and self.transport is not None:
            self.transport.write(frame(WINDOW_UPDATE, 0, st.id, U32.pack(st.received)))
            st.received = 0

    def _feed(self, st: CallStream) -> None:
        """Hand a streaming call's whole messages to its handler, at most :data:`MAX_QUEUED` (and
        :data:`MAX_QUEUED_BYTES`) waiting: past that the bytes stay here, unparsed, and their credit is held back
        (:meth:`_give_back`) until the handler takes them; once the client's half ended and every message is
        handed over, its end.

        Raises:
            CallError: a message over the limit, one that does not parse or inflate, a half that ended inside a
                message.
        """
        buf, queue = st.buf, st.queue
        while len(buf) >= 5:
            if self._backlogged(st):  # the handler falls behind (its answers unread, say)
                return
            flag, length = MESSAGE_PREFIX.unpack_from(buf)
            self._check_size(length)
            if len(buf) < 5 + length:
                break
            body = bytes(buf[5:5 + length])
            del buf[:5 + length]
            queue.put_nowait((self._parse(st, flag, body), length))  # type: ignore[union-attr]
            st.queued_bytes += length
        if st.half_closed and not st.fed_end:
            if buf:
                raise CallError(grpc.StatusCode.INTERNAL, "the stream ended inside a message")
            st.fed_end = True
            queue.put_nowait(None)  # type: ignore[union-attr]

    def _parse(self, st: CallStream, flag: int, body: bytes | memoryview) -> Any:
        if flag:
            if st.encoding is None:
                raise CallError(grpc.StatusCode.INTERNAL, "a compressed message without grpc-encoding")
            d = zlib.decompressobj(31 if st.encoding == "gzip" else 15)
            limit = self.front.max_message_bytes
            try:
                body = d.decompress(body, limit + 1)
            except zlib.error as e:
                raise CallError(grpc.StatusCode.INTERNAL, f"could not inflate the request message "
                                                          f"({st.encoding}): {e}") from None
            self._check_size(len(body) if not d.unconsumed_tail else limit + 1)
        try:
            return st.rpc.parse(body)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError
            raise CallError(grpc.StatusCode.INTERNAL, f"could not parse the request message: {e}") from None

    def _end_request(self, st: CallStream) -> None:
        if st.half_closed:
            return
        st.half_closed = True
        if st.answered or st.rpc is None:
            return
        if st.queue is not None:
            try:
                self._feed(st)  # what is left, then the end
            except CallError as e:
                self._answer_status(st, e.code, e.details)
                self._cancel(st, "refused")
            return
        body = b"".join(st.chunks) if len(st.chunks) != 1 else st.chunks[0]
        st.chunks = []
        try:
            if len(body) < 5:
                raise CallError(grpc.StatusCode.INTERNAL, "a unary call without its request message")
            flag, length = MESSAGE_PREFIX.unpack_from(body)
            if len(body) != 5 + length:
                raise CallError(grpc.StatusCode.INTERNAL, "a unary call must carry exactly one message")
            request = self._parse(st, flag, memoryview(body)[5:])
        except CallError as e:
            self._answer_status(st, e.code, e.details)
            return
        self._start(st, self._run_unary(st, request))

    def _start(self, st: CallStream, coro: Any) -> None:
        """Run ``coro`` as the call's task; a task cancelled before its first step (a deadline or a reset in the
        same pass of the loop) never runs its own ``finally``, so its end is answered and its state freed here."""
        st.task = task = asyncio.ensure_future(coro)
        task.add_done_callback(lambda t: self._task_done(st, t))

    def _task_done(self, st: CallStream, task: asyncio.Task[Any]) -> None:
        if self.streams.get(st.id) is st:
            if task.cancelled():
                self._answer_error(st, asyncio.CancelledError())
            self._close(st)

    # -------------------------------------------------------------------------------------------- running
    async def _run_unary(self, st: CallStream, request: Any) -> None:
        try:
            data = st.rpc.serialize(await st.rpc.run(request, st.ctx))
            await self._send(st, data, OK_TRAILERS)
        except BaseException as e:  # noqa: BLE001 - every end of a call is answered (or, reset, not)
            self._answer_error(st, e)
        finally:
            self._close(st)

    async def _run_stream(self, st: CallStream) -> None:
        queue = st.queue

        async def requests() -> AsyncIterator[Any]:
            while (got := await queue.get()) is not None:  # type: ignore[union-attr]
                item, size = got
                st.queued_bytes -= size
                if st.buf or st.received:
                    self._feed(st)  # what waited unparsed, then its credit back to the client
                    self._give_back(st)
                yield item

        try:
            async for resp in st.rpc.run(requests(), st.ctx):
                await self._send(st, st.rpc.serialize(resp), None)
            await self._send(st, None, OK_TRAILERS)
        except BaseException as e:  # noqa: BLE001
            self._answer_error(st, e)
        finally:
            self._close(st)

    def _answer_error(self, st: CallStream, e: BaseException) -> None:
        if isinstance(e, Abort | CallError):
            self._answer_status(st, e.code, e.details)
        elif isinstance(e, asyncio.CancelledError):
            if st.why == "deadline":
                self._answer_status(st, grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
            elif st.why == "shutdown":
                self._answer_status(st, grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
        elif isinstance(e, Exception):
            log.exception("gRPC call %s failed", st.id)
            self._answer_status(st, grpc.StatusCode.UNKNOWN, f"Unexpected error: {type(e).__name__}: {e}")
        else:
            raise e

    # -------------------------------------------------------------------------------------------- writing
    def _write_block(self, sid: int, block: bytes, flags: int) -> None:
        """A header block in HEADERS (+ CONTINUATION) frames of at most the client's frame size."""
        t = self.transport
        if t is None:
            return
        size = self.max_frame
        if len(block) <= size:
            t.write(frame(HEADERS, flags | END_HEADERS, sid, block))
            return
        parts = [block[i:i + size] for i in range(0, len(block), size)]
        out = [frame(HEADERS, flags, sid, parts[0])]
        out += [frame(CONTINUATION, END_HEADERS if i == len(parts) - 1 else 0, sid, p) for i, p in enumerate(parts)
                if i]
        t.write(b"".join(out))

    def _answer_status(self, st: CallStream, code: grpc.StatusCode, details: str) -> None:
        """Trailers with ``code`` (trailers-only when nothing was sent yet); the stream is then done."""
        if st.answered or self.transport is None or st.why == "reset":
            return
        block = literal(b"grpc-status", str(code.value[0]).encode())
        if details:
            block += literal(b"grpc-message", grpc_message_value(details[:4096]))
        if not st.headers_sent:
            block = RESPONSE_HEAD + block
        self._write_block(st.id, block, END_STREAM)
        self._finish(st)

    def _finish(self, st: CallStream) -> None:
        st.answered = True
        if not st.half_closed:  # the client still sends: tell it to stop (gRPC's servers do the same)
            self.transport.write(frame(RST_STREAM, 0, st.id, U32.pack(NO_ERROR)))  # type: ignore[union-attr]
            st.half_closed = True
        if st.task is None:
            self._close(st)

    async def _send(self, st: CallStream, data: bytes | None, trailers: bytes | None) -> None:
        """One message (``data``, may be None) and then ``trailers`` (may be None), as the windows allow."""
        if st.answered or self.transport is None:
            raise asyncio.CancelledError
        out = []
        if not st.headers_sent:
            out.append(frame(HEADERS, END_HEADERS, st.id, RESPONSE_HEAD))
        if data is not None:
            body = MESSAGE_PREFIX.pack(0, len(data)) + data
            n = len(body)
            if n <= self.max_frame and n <= self.send_window and n <= st.window:
                self.send_window -= n
                st.window -= n
                out.append(frame(DATA, 0, st.id, body))
            else:
                self.transport.write(b"".join(out))
                st.headers_sent, out = True, []
                await self._send_body(st, memoryview(body))
        if trailers is not None:
            out.append(frame(HEADERS, END_HEADERS | END_STREAM, st.id, trailers))
        if out:
            self.transport.write(b"".join(out))
            st.headers_sent = True
        if trailers is not None:
            self._finish(st)

    async def _send_body(self, st: CallStream, body: memoryview) -> None:
        pos = 0
        while pos < len(body):
            room = min(self.max_frame, self.send_window, st.window, len(body) - pos)
            if room <= 0 or not self.writable:
                self.room.clear()
                await self.room.wait()
                if self.transport is None or st.why:
                    raise asyncio.CancelledError
                continue
            self.transport.write(frame(DATA, 0, st.id, bytes(body[pos:pos + room])))
            self.send_window -= room
            st.window -= room
            pos += room

    # ------------------------------------------------------------------------------------------- lifetime
    def _deadline(self, st: CallStream) -> None:
        if self.streams.get(st.id) is st and not st.answered:
            if st.task is None:
                self._answer_status(st, grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
            else:
                self._cancel(st, "deadline")

    def _cancel(self, st: CallStream, why: str) -> None:
        st.ctx.is_cancelled = True
        st.why = st.why or why
        if st.timer is not None:
            st.timer.cancel()
        if st.task is not None:
            st.task.cancel()

    def _close(self, st: CallStream) -> None:
        if st.timer is not None:
            st.timer.cancel()
        if self.streams.get(st.id) is st:
            del self.streams[st.id]
        self._maybe_idle()

    def _maybe_idle(self) -> None:
        if not self.streams:
            self.idle.set()
            if self.going_away and self.transport is not None and self.front.stopping:
                self.transport.close()


__all__ = ["Abort", "CallContext", "CallError", "CallRunner", "CallStream", "MAX_QUEUED", "MAX_QUEUED_BYTES", "OK_TRAILERS",
           "RECEIVE_WINDOW", "RESPONSE_HEAD", "parse_timeout"]
