"""uvicorn's httptools protocol as inferperf serves it: one write per response, a request-receipt deadline, and
each infer request's time on its connection.

Writing a response in one piece (:class:`CoalescingTransport`) keeps a response's head and body in one
TCP segment, so no request waits on Nagle plus a delayed ACK; the receipt deadline answers 408 and
closes a connection whose request has not fully arrived in time (slow clients, slowloris). The exchange
time (``on_exchange``) runs from the parser starting a request (in the ``data_received`` that carried its
first bytes) to the response's last byte handed to the socket (uvicorn's ``on_response``, right after the
final write): the infer route's own time plus the HTTP parsing and event-loop waits around it, which
``load`` reports as the server's share of a request (docs/load.md, "Where the time went").
Used by :mod:`inferperf.serve.server`; uvicorn's h11 protocol is used as uvicorn ships it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock

#: ``on_exchange(path, ns)``: an infer request (POST to a path ending ``/infer``) took ``ns`` on its connection.
OnExchange = Callable[[str, int], None]


class CoalescingTransport:
    """Transport proxy that holds a response's status line + headers until its body is written, then
    writes both with one ``write`` call: one syscall and, on loopback or a fast link, one TCP segment
    per response. Interim (1xx) responses pass at once; ``close`` flushes what is held."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        if self._held is not None:
            data, self._held = self._held + data, None
        elif data.endswith(b"\r\n\r\n") and data.startswith(b"HTTP/1.1 ") and not data.startswith(b"HTTP/1.1 1"):
            self._held = data
            return
        self._transport.write(data)

    def close(self) -> None:
        if self._held is not None:
            data, self._held = self._held, None
            self._transport.write(data)
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def http_protocol(http: str, receipt_timeout_s: float = 0.0, on_exchange: OnExchange | None = None,
                  clock: Clock = SYSTEM_CLOCK) -> Any:
    """uvicorn's httptools protocol writing each response in one piece, enforcing a request-receipt deadline
    (``receipt_timeout_s`` > 0) and timing each infer request's exchange on ``clock`` for ``on_exchange``
    (None: not timed); h11 as uvicorn ships it (no receipt deadline, no exchange time)."""
    if http != "httptools":
        return http
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    now_ns = clock.now_ns

    class OnePieceHttpToolsProtocol(HttpToolsProtocol):
        """Responses in one write; a request whose bytes (request line, headers and body) have not all
        arrived ``receipt_timeout_s`` after its first byte gets 408 and the connection is closed: a client
        trickling bytes resets a plain keep-alive timer with each one, never this deadline (slowloris)."""

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = CoalescingTransport(transport)  # type: ignore[assignment]
            self._receipt_timer: Any = None

        def on_message_begin(self) -> None:
            self._begin_ns = now_ns()
            super().on_message_begin()
            self._cancel_receipt()
            if receipt_timeout_s > 0:
                self._receipt_timer = self.loop.call_later(receipt_timeout_s, self._receipt_expired)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            cycle, scope = self.cycle, self.scope
            if (on_exchange is None or cycle is None or cycle.scope is not scope or scope.get("method") != "POST"
                    or not scope.get("path", "").endswith("/infer")):
                return
            begin, path, answered = self._begin_ns, scope["path"], cycle.on_response

            def exchanged() -> None:  # uvicorn calls it right after the response's final write
                on_exchange(path, now_ns() - begin)
                answered()

            cycle.on_response = exchanged

        def on_message_complete(self) -> None:
            self._cancel_receipt()
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_receipt()
            super().connection_lost(exc)

        def _cancel_receipt(self) -> None:
            if getattr(self, "_receipt_timer", None) is not None:
                self._receipt_timer.cancel()
                self._receipt_timer = None

        def _receipt_expired(self) -> None:
            self._receipt_timer = None
            if self.transport.is_closing():
                return
            if self.cycle is None or not self.cycle.response_started:
                body = (f'{{"error": "request not received within {receipt_timeout_s:g} s of its first byte:'
                        f' connection closed (--request-receipt-timeout-s)"}}').encode()
                self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                     b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            self.transport.close()

    return OnePieceHttpToolsProtocol


