"""Server-sent events parsed incrementally, as body pieces arrive (the HTML standard's "event stream" rules).

- a line ends at CRLF, LF or CR (a CR that ends one piece waits for the next: it may be half of a CRLF; at the
  end of the stream, :meth:`SseParser.end`, it ends its line, so a last event framed by bare CRs is dispatched);
- ``data: x`` lines append ``x`` (one space after the colon removed) to the event's data, joined by LF;
- ``event: T`` sets the event's type (default ``message``); ``id``/``retry`` and unknown fields are ignored;
- a line starting with ``:`` is a comment (keep-alives); a blank line dispatches the event (none without data);
- a UTF-8 byte-order mark at the start of the stream is dropped; bytes are decoded as UTF-8 per whole line, so
  a multi-byte character split across reads is whole.

Source: HTML Living Standard, section 9.2.6 "Interpreting an event stream".
"""

from __future__ import annotations

import re

_EOL = re.compile(rb"\r\n|\r|\n")


class SseParser:
    """Feed body pieces with :meth:`feed`; get the events they complete as ``(type, data)`` string pairs.

    ``pending`` tells whether an undispatched event or partial line is buffered (the stream ended mid-event).
    """

    __slots__ = ("_buf", "_data", "_type", "_started")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._type = ""
        self._started = False

    @property
    def pending(self) -> bool:
        """True while a partial line or an event without its blank line is buffered."""
        return bool(self._buf.strip(b"\r\n")) or bool(self._data)

    def feed(self, piece: bytes) -> list[tuple[str, str]]:
        """Parse ``piece`` (any split of the stream); return the events it completes, in order."""
        buf = self._buf + piece if self._buf else bytes(piece)
        if not self._started and buf:
            if len(buf) < 3 and b"\xef\xbb\xbf".startswith(buf):
                self._buf = buf
                return []
            self._started = True
            if buf.startswith(b"\xef\xbb\xbf"):
                buf = buf[3:]
        events: list[tuple[str, str]] = []
        pos = 0
        for m in _EOL.finditer(buf):
            if m.group() == b"\r" and m.end() == len(buf):  # maybe the first half of a CRLF: wait
                break
            self._line(buf[pos : m.start()], events)
            pos = m.end()
        self._buf = buf[pos:]
        return events

    def end(self) -> list[tuple[str, str]]:
        """The stream ended: a buffered trailing CR ends its line (no LF can follow now); return the events that
        completes. A line or event left unterminated is dropped, as the standard says."""
        if not self._buf.endswith(b"\r"):
            return []
        buf, self._buf = self._buf, b""
        events: list[tuple[str, str]] = []
        pos = 0
        for m in _EOL.finditer(buf):
            self._line(buf[pos : m.start()], events)
            pos = m.end()
        return events

    def _line(self, raw: bytes, events: list[tuple[str, str]]) -> None:
        if not raw:
            if self._data:
                events.append((self._type or "message", "\n".join(self._data)))
            self._data = []
            self._type = ""
            return
        if raw[0] == 58:  # ':' comment
            return
        line = raw.decode("utf-8", "replace")
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value


__all__ = ["SseParser"]
