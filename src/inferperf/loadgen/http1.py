"""The load client's HTTP/1.1 connection: requests written as prebuilt bytes, answers parsed by httptools.

One :class:`HttpConnection` is an :class:`asyncio.Protocol` over one keep-alive TCP (or TLS) connection with
one request in flight at a time. The response side is httptools' ``HttpResponseParser`` (llhttp, the parser
of Node.js and of uvicorn's server side), so framing follows RFC 9112 whatever the header spelling
(``Transfer-Encoding:chunked``, ``Transfer-Encoding: gzip, chunked``, ``Connection:close``, any case):

- a ``Content-Length`` or chunked body is read to its end, trailers included, before the connection is reused;
- a body with neither ends when the server closes the connection (RFC 9112 section 6.3, rule 8): that close
  completes the answer; a close before a framed body's end is ``disconnected``;
- interim 1xx answers (100 Continue, 103 Early Hints) are skipped: the exchange ends at the final answer;
- 204, 304 and 1xx answers have no body, even when they carry a ``Content-Length`` (a 304's is the cached
  representation's);
- ``Connection: close`` or HTTP/1.0 without keep-alive closes the connection after the answer, so the
  pool opens a new one for the next request;
- a folded header line (obs-fold) and bare-LF line ends are accepted (RFC 9112 sections 5.2, 2.2);
- anything else the parser rejects (Content-Length beside Transfer-Encoding, two different Content-Lengths,
  garbage) closes the connection and is ``disconnected``.

HEAD requests are not supported (their answers' ``Content-Length`` announces a body that never comes; the
load generator sends POST and GET only).

Streaming (a chunk-callback API for server-sent events, token streams): ``send(payload, sink)`` with a
:class:`StreamSink` calls ``sink.head(t_ns, status, headers)`` once the final answer's headers are parsed and
``sink.chunk(t_ns, data)`` for every piece of body as it arrives, before the answer completes. ``t_ns`` is
the transport clock's reading (``time.perf_counter_ns`` unless another clock is given) when the socket read
that carried the bytes was delivered; pieces from one read share it. ``data`` is body content (chunk framing
removed); one HTTP chunk may arrive in several pieces and one piece may hold several events, so a consumer
buffers across calls. Without a sink no header is collected and no clock is read per read.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import httptools

from ..clock import SYSTEM_CLOCK, Clock

#: error kind of an exchange the server broke off (closed, reset, or sent what is not HTTP).
DISCONNECTED = "disconnected"
#: the most of a 4xx answer's body kept in :attr:`Response.error_body` (bytes).
ERROR_BODY_BYTES = 64 * 1024
#: bytes per socket read (asyncio's own read size for plain protocols).
READ_BUFFER_BYTES = 256 * 1024


class Response:
    """One answer: HTTP ``status`` (0 = none), body length in bytes, ``error_kind`` (None = success);
    ``error_body``: the body of a 4xx answer (its first :data:`ERROR_BODY_BYTES` bytes, any framing; None
    otherwise), so a request the server refuses as malformed can be shown with the server's own words;
    ``first_ns``: the transport clock when the answer's first bytes were read (0 = not known), so the client's
    read of the answer (first bytes to complete) is told from the time before it.

    A plain slotted class (not a dataclass): one is built per request on the generator's hot path.
    """

    __slots__ = ("status", "body_len", "error_kind", "error_body", "first_ns")

    def __init__(self, status: int, body_len: int, error_kind: str | None = None,
                 error_body: bytes | None = None, first_ns: int = 0) -> None:  # fmt: skip
        self.status = status
        self.body_len = body_len
        self.error_kind = error_kind
        self.error_body = error_body
        self.first_ns = first_ns

    def _key(self) -> tuple[int, int, str | None, bytes | None]:
        return (self.status, self.body_len, self.error_kind, self.error_body)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Response):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Response(status={self.status}, body_len={self.body_len}, error_kind={self.error_kind!r}, "
                f"error_body={self.error_body!r})")  # fmt: skip


def http_error_kind(status: int) -> str | None:
    """``http_<status>`` for status >= 400, else None."""
    return f"http_{status}" if status >= 400 else None


class StreamSink(Protocol):
    """Receives one answer as it arrives (see the module docstring for the timing of ``t_ns``)."""

    def head(self, t_ns: int, status: int, headers: list[tuple[bytes, bytes]]) -> None:  # pragma: no cover
        """The final answer's status and headers (names lower-cased, values as sent), at clock time ``t_ns``."""
        ...

    def chunk(self, t_ns: int, data: bytes) -> None:  # pragma: no cover
        """One piece of body (framing removed), read from the socket at clock time ``t_ns`` (ns)."""
        ...


def read_buffer(size: int = READ_BUFFER_BYTES) -> memoryview:
    """A receive buffer for :class:`HttpConnection` (``size`` bytes); one may serve every connection of a loop.

    Sharing is safe on the selector event loop and uvloop: each fills the buffer (``recv_into``) and hands it
    to the protocol (``buffer_updated``, which parses it at once) in one synchronous step. A proactor loop
    (Windows) keeps reads in flight: give each connection its own.
    """
    return memoryview(bytearray(size))


class HttpConnection(asyncio.BufferedProtocol):
    """A keep-alive HTTP/1.1 connection; one request at a time (made by ``HttpTransport.connect``).

    ``open`` turns False when the connection closes (either side) or must not be reused. Reads go into
    ``buffer`` (``recv_into``, no allocation per read: a fresh ``recv`` of asyncio's 256 KiB read size is an
    ``mmap``/``munmap`` pair per answer under glibc's default malloc settings, which cost more than the parse).

    Args:
        clock: source of the ``t_ns`` handed to a :class:`StreamSink`.
        buffer: the receive buffer (:func:`read_buffer`; a fresh one when None).
    """

    __slots__ = ("open", "_transport", "_parser", "_waiter", "_status", "_body_len", "_framed", "_head_done",
                 "_sink", "_headers", "_now", "_clock", "_buf", "_error_body", "_first_ns")  # fmt: skip

    def __init__(self, clock: Clock = SYSTEM_CLOCK, buffer: memoryview | None = None) -> None:
        self._buf = read_buffer() if buffer is None else buffer
        self.open = False
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        # RFC 9112: a user agent MUST accept an obs-fold in a response (section 5.2) and MAY take a bare LF as a
        # line end (section 2.2); llhttp refuses both unless told. The refusals that guard framing (Content-Length
        # with Transfer-Encoding, conflicting Content-Lengths) stay strict.
        self._parser.set_dangerous_leniencies(lenient_headers=True, lenient_optional_cr_before_lf=True)
        self._waiter: asyncio.Future[Response] | None = None
        self._clock = clock
        self._sink: StreamSink | None = None
        self._headers: list[tuple[bytes, bytes]] | None = None
        self._now = 0
        self._reset()

    def _reset(self) -> None:
        self._first_ns = 0
        self._status = 0
        self._body_len = 0
        self._framed = False  # a Content-Length or a chunked Transfer-Encoding: the body does not end at close
        self._head_done = False
        self._error_body: bytearray | None = None
        if self._headers is not None:
            self._headers = []

    # ---------------------------------------------------------------------------------------------- client side

    async def send(self, payload: bytes, sink: StreamSink | None = None) -> Response:
        """Write ``payload`` (a full request from ``build_request``) and wait for the final answer.

        Args:
            payload: request line, headers and body in one ``bytes``.
            sink: receives the answer's head and body pieces as they arrive (streaming); None to only count.

        Returns:
            The :class:`Response`; a broken exchange is ``Response(0, 0, "disconnected")``, never an exception.

        Raises:
            asyncio.CancelledError: cancelled mid-exchange (e.g. a timeout): the connection is closed first.
            RuntimeError: a request is already in flight on this connection.
            Exception: whatever ``sink`` raised (the connection is closed first).
        """
        if self._waiter is not None:
            raise RuntimeError("HttpConnection.send: one request at a time per connection")
        if not self.open:
            return Response(0, 0, DISCONNECTED)
        self._sink = sink
        self._headers = [] if sink is not None else None
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(payload)  # type: ignore[union-attr]
        try:
            return await waiter
        except BaseException:  # cancelled, or the sink raised: an answer may still arrive, never reuse this one
            self.close()
            raise
        finally:
            self._waiter = self._sink = None

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self.open = False
        if self._transport is not None:
            self._transport.close()

    def _finish(self, r: Response | None, exc: BaseException | None = None) -> None:
        if r is not None:
            r.first_ns = self._first_ns
        w = self._waiter
        if w is not None and not w.done():
            if exc is not None:
                w.set_exception(exc)
            else:
                w.set_result(r)  # type: ignore[arg-type]
        self._reset()

    # ------------------------------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self.open = True

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buf

    def buffer_updated(self, nbytes: int) -> None:
        if self._sink is not None:
            self._now = self._clock.now_ns()
            if not self._first_ns:
                self._first_ns = self._now
        elif not self._first_ns:
            self._first_ns = self._clock.now_ns()
        try:
            self._parser.feed_data(self._buf[:nbytes])
        except httptools.HttpParserCallbackError as e:  # the sink raised
            self.close()
            self._finish(None, e.__context__ or e)
        except httptools.HttpParserUpgrade:  # 101 Switching Protocols: an answer, and the end of HTTP here
            self.close()
            self._finish(Response(self._status, self._body_len))
        except httptools.HttpParserError:
            self.close()
            self._finish(Response(0, 0, DISCONNECTED))

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost decides what the close means

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self._waiter is None or self._waiter.done():
            return
        if self._head_done and not self._framed:  # RFC 9112 6.3 rule 8: this body ended at the close
            self._finish(self._response())
        else:
            self._finish(Response(0, 0, DISCONNECTED))

    # ----------------------------------------------------------------------------------- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        n = len(name)
        if n == 14 or n == 17:  # content-length / transfer-encoding: only these decide the framing
            low = name.lower()
            if low == b"content-length" or (low == b"transfer-encoding"
                                            and value.rstrip().lower().endswith(b"chunked")):  # fmt: skip
                self._framed = True
        if self._headers is not None:
            self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self._status = status = self._parser.get_status_code()
        self._head_done = True
        if 400 <= status < 500:
            self._error_body = bytearray()
        if self._sink is not None and status >= 200:
            self._sink.head(self._now, status, self._headers or [])

    def on_body(self, body: bytes) -> None:
        self._body_len += len(body)
        if self._error_body is not None and len(self._error_body) < ERROR_BODY_BYTES:
            self._error_body += body[: ERROR_BODY_BYTES - len(self._error_body)]
        if self._sink is not None:
            self._sink.chunk(self._now, body)

    def on_message_complete(self) -> None:
        status = self._status
        if status < 200:  # interim answer (100 Continue, 103 Early Hints): the final one follows
            self._reset()
            return
        if self._waiter is None or not self._parser.should_keep_alive():  # an answer nobody asked for: do not reuse
            self.close()
        if status >= 400:
            self._finish(self._response())
        else:
            self._finish(Response(status, self._body_len))

    def _response(self) -> Response:
        """The answer now complete (error kind and a 4xx body filled in)."""
        body = self._error_body
        return Response(self._status, self._body_len, http_error_kind(self._status),
                        None if body is None else bytes(body))  # fmt: skip


__all__ = ["DISCONNECTED", "ERROR_BODY_BYTES", "READ_BUFFER_BYTES", "HttpConnection", "Response", "StreamSink", "http_error_kind", "read_buffer"]
