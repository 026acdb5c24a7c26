"""uvicorn's httptools protocol as inferperf serves it: one write per response, and a request-receipt deadline.

Writing a response in one piece (:class:`CoalescingTransport`) keeps a response's head and body in one
TCP segment, so no request waits on Nagle plus a delayed ACK; the receipt deadline answers 408 and
closes a connection whose request has not fully arrived in time (slow clients, slowloris).
Used by :mod:`inferperf.serve.server`; uvicorn's h11 protocol is used as uvicorn ships it.
"""

from __future__ import annotations

from typing import Any


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


def http_protocol(http: str, receipt_timeout_s: float = 0.0) -> Any:
    """uvicorn's httptools protocol writing each response in one piece and enforcing a request-receipt
    deadline (``receipt_timeout_s`` > 0); h11 as uvicorn ships it (no receipt deadline)."""
    if http != "httptools":
        return http
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class OnePieceHttpToolsProtocol(HttpToolsProtocol):
        """Responses in one write; a request whose bytes (request line, headers and body) have not all
        arrived ``receipt_timeout_s`` after its first byte gets 408 and the connection is closed: a client
        trickling bytes resets a plain keep-alive timer with each one, never this deadline (slowloris)."""

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = CoalescingTransport(transport)  # type: ignore[assignment]
            self._receipt_timer: Any = None

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._cancel_receipt()
            if receipt_timeout_s > 0:
                self._receipt_timer = self.loop.call_later(receipt_timeout_s, self._receipt_expired)

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


