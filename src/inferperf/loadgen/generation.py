"""Token-stream answers read on the load client's chunk callback: OpenAI-compatible chat and completions, and
Triton's generate extension (``/v2/models/M/generate_stream``).

:class:`TokenStream` is an :class:`~inferperf.loadgen.http1.StreamSink`: each body piece goes through the
incremental :class:`~inferperf.loadgen.sse.SseParser` as it arrives, so event times are socket-read times
(pieces of one read share one time). Per event (``data:`` JSON):

- a **content** event carries generated text: ``choices[i].delta.content`` (chat; also ``reasoning_content``)
  or ``choices[i].text`` (completions) or ``text_output`` (Triton generate) non-empty. A role-only or empty event is NOT content (vLLM's first
  chat event ``{role: assistant, content: ""}`` would otherwise be taken for the first token);
- ``usage`` (``stream_options.include_usage``) gives the server's prompt and completion token counts;
- ``finish_reason`` is kept; ``"error"`` makes the request fail as ``finish_error``;
- an ``event: error`` event or a JSON ``{"error": ...}`` makes it fail as ``stream_error``; an event that is
  not JSON as ``stream_bad_event``;
- a field of the wrong type (a non-numeric ``usage.prompt_tokens``, a non-string ``text``) makes the request fail
  as ``stream_bad_event`` (``bad_answer`` without streaming), its event kept as the error body; the sink never
  raises, so one malformed answer never ends a stream of requests;
- ``data: [DONE]`` ends an OpenAI stream; one that ends (closed, or the body framing ended) without it is
  ``stream_incomplete`` (Triton's generate_stream has no such marker: the body's framed end completes it), the same when the connection broke after the 200 head (``disconnected`` is kept
  for a break before any answer).

Without streaming (``stream`` false) the body is one JSON answer (``choices[0].message.content`` / ``text``,
``usage``); only end-to-end latency and token counts come from it.

:class:`GenerationTransport` wraps an ``HttpTransport``: its connections send with a fresh sink per request
and return a :class:`StreamResponse` whose ``stream`` is the request's :class:`GenRecord`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from .http1 import DISCONNECTED, Response
from .sse import SseParser

INCOMPLETE, FINISH_ERROR, STREAM_ERROR, BAD_EVENT, BAD_ANSWER = (
    "stream_incomplete", "finish_error", "stream_error", "stream_bad_event", "bad_answer")
#: the error kinds of a stream that failed after its 200 head.
STREAM_FAILURES = (INCOMPLETE, FINISH_ERROR, STREAM_ERROR, BAD_EVENT, BAD_ANSWER)


def count_words(text: str) -> int:
    """Whitespace words in ``text`` (the approximate token count used without ``--tokenizer``)."""
    return len(text.split())


@dataclass(slots=True, eq=False)
class GenRecord:
    """One generation request's stream: ``chunk_ns`` (clock ns of each content event, in order; empty without
    streaming), ``out_tokens`` (the client's count of the generated text), ``usage_in``/``usage_out`` (the
    server's usage, -1 = not given), ``finish`` (last ``finish_reason`` or None), ``done`` ([DONE] seen),
    ``in_tokens`` (the client's count of the request's prompt, -1 = unknown)."""

    chunk_ns: list[int]
    out_tokens: int
    usage_in: int
    usage_out: int
    finish: str | None
    done: bool
    in_tokens: int = -1

    @property
    def first_ns(self) -> int:
        """Clock ns of the first content event (-1: none)."""
        return self.chunk_ns[0] if self.chunk_ns else -1


class TokenStream:
    """The sink of one request (module docstring); ``api`` (``openai-chat``, ``openai-completions`` or
    ``triton-generate``) selects where text is read; ``stream`` False reads one JSON answer; ``count`` counts
    tokens in the generated text (default: whitespace words)."""

    __slots__ = ("chat", "triton", "stream", "count", "parser", "status", "chunk_ns", "texts", "usage_in", "usage_out",
                 "finish", "done", "error", "bad", "_body", "_last_ns")  # fmt: skip

    def __init__(self, api: str, stream: bool = True, count: Callable[[str], int] = count_words) -> None:
        self.chat, self.triton = api == "openai-chat", api == "triton-generate"
        self.stream, self.count = stream, count
        self.parser = SseParser()
        self.status = 0
        self.chunk_ns: list[int] = []
        self.texts: list[str] = []
        self.usage_in = self.usage_out = -1
        self.finish: str | None = None
        self.done = False
        self.error: str | None = None
        self.bad: bytes | None = None  # the first malformed event or answer (the error body)
        self._body: list[bytes] = []
        self._last_ns = 0

    def head(self, t_ns: int, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """The answer's status (headers unused)."""
        self.status = status

    def chunk(self, t_ns: int, data: bytes) -> None:
        """A body piece read at ``t_ns``: its completed events are taken in order (a 200 answer only)."""
        if self.status != 200:
            return
        if not self.stream:
            self._body.append(bytes(data))
            return
        self._last_ns = t_ns
        self._events(t_ns, self.parser.feed(data))

    def _events(self, t_ns: int, events: list[tuple[str, str]]) -> None:
        for typ, payload in events:
            try:
                self._event(t_ns, typ, payload)
            except (TypeError, ValueError, AttributeError, OverflowError):  # a field of the wrong type
                self._malformed(BAD_EVENT, payload.encode("utf-8", "replace"))

    def _malformed(self, kind: str, body: bytes) -> None:
        self.error = self.error or kind
        if self.bad is None:
            self.bad = body[:2000]

    def _event(self, t_ns: int, typ: str, data: str) -> None:
        if typ == "error":
            self.error = self.error or STREAM_ERROR
            return
        if data == "[DONE]":
            self.done = True
            return
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._malformed(BAD_EVENT, data.encode("utf-8", "replace"))
            return
        if not isinstance(doc, dict):
            self._malformed(BAD_EVENT, data.encode("utf-8", "replace"))
            return
        if doc.get("error"):
            self.error = self.error or STREAM_ERROR
        self._usage(doc.get("usage"))
        for ch in (doc,) if self.triton else doc.get("choices") or ():
            text = self._text(ch)
            if text:
                self.chunk_ns.append(t_ns)
                self.texts.append(text)

    def _text(self, ch: Any) -> str | None:
        """The generated text of one choice; a text field that is not a string raises TypeError (malformed)."""
        text = self._raw_text(ch)
        if text is not None and not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}, not a string")
        return text

    def _raw_text(self, ch: Any) -> Any:
        if self.triton:
            return ch.get("text_output") if isinstance(ch, dict) else None
        if not isinstance(ch, dict):
            return None
        fr = ch.get("finish_reason")
        if fr:
            self.finish = fr
            if fr == "error":
                self.error = self.error or FINISH_ERROR
        if not self.chat:
            return ch.get("text")
        d = ch.get("delta") or ch.get("message") or {}
        if not isinstance(d, dict):
            return None
        content, reasoning = d.get("content") or "", d.get("reasoning_content") or ""
        if not isinstance(content, str) or not isinstance(reasoning, str):
            raise TypeError("content is not a string")
        return content + reasoning

    def _usage(self, usage: Any) -> None:
        """The server's token counts; a count that is not an integer raises TypeError (malformed)."""
        if isinstance(usage, dict):
            self.usage_in, self.usage_out = (_count(usage, k) for k in ("prompt_tokens", "completion_tokens"))

    def _whole(self) -> None:
        body = b"".join(self._body)
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            self._malformed(BAD_ANSWER, body)
            return
        if not isinstance(doc, dict) or not (self.triton or isinstance(doc.get("choices"), list)):
            self._malformed(BAD_ANSWER, body)
            return
        if doc.get("error"):
            self.error = STREAM_ERROR
        try:
            self._usage(doc.get("usage"))
            self.texts = [t for ch in ((doc,) if self.triton else doc["choices"]) if (t := self._text(ch))]
        except (TypeError, ValueError, AttributeError, OverflowError):
            self._malformed(BAD_ANSWER, body)
            return
        self.done = True

    def outcome(self, r: Response) -> str | None:
        """The request's error kind given the HTTP exchange's ``r`` (None = a complete answer)."""
        if r.error_kind is not None and not (r.error_kind == DISCONNECTED and self.status == 200):
            return r.error_kind
        if self.status == 200 and not self.stream and r.error_kind is None:
            self._whole()
        if self.status == 200 and self.stream:
            self._events(self._last_ns, self.parser.end())  # a last event framed by bare CRs
        if self.error is not None:
            return self.error
        if self.triton and r.error_kind is None and self.status == 200:
            self.done = True  # generate_stream ends with the body: no [DONE] marker
        if not self.done:
            return INCOMPLETE
        return None

    def record(self) -> GenRecord:
        """The request's :class:`GenRecord` (token count of the text received)."""
        return GenRecord(self.chunk_ns, self.count("".join(self.texts)) if self.texts else 0, self.usage_in,
                         self.usage_out, self.finish, self.done)  # fmt: skip


def _count(usage: dict[str, Any], key: str) -> int:
    """A token count of ``usage`` (-1 when absent or null); anything but an integer raises TypeError."""
    v = usage.get(key)
    if v is None:
        return -1
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"usage.{key} is {v!r}, not an integer")
    return v


class StreamResponse(Response):
    """A :class:`Response` with the request's :class:`GenRecord` as ``stream``."""

    __slots__ = ("stream",)

    def __init__(self, status: int, body_len: int, error_kind: str | None, error_body: bytes | None,
                 stream: GenRecord) -> None:  # fmt: skip
        super().__init__(status, body_len, error_kind, error_body)
        self.stream = stream


class _GenConnection:
    __slots__ = ("conn", "api", "stream", "count", "owner")

    def __init__(self, conn: Any, owner: GenerationTransport) -> None:
        self.conn, self.owner = conn, owner
        self.api, self.stream, self.count = owner.api, owner.stream, owner.count

    @property
    def open(self) -> bool:
        return self.conn.open

    async def send(self, payload: bytes) -> Response:
        sink = TokenStream(self.api, self.stream, self.count)
        r = await self.conn.send(payload, sink)
        kind = sink.outcome(r)
        rec = sink.record()
        rec.in_tokens = self.owner.prompt_tokens(payload)
        body = sink.bad if kind in (BAD_EVENT, BAD_ANSWER) and sink.bad is not None else r.error_body
        return StreamResponse(r.status, r.body_len, kind, body, rec)

    def close(self) -> None:
        self.conn.close()


class GenerationTransport:
    """Wraps ``inner`` (an ``HttpTransport``) so each request is read as a token stream (module docstring).

    Args:
        inner: the transport whose connections take ``send(payload, sink)``.
        api: ``openai-chat``, ``openai-completions`` or ``triton-generate`` (where text is read).
        stream: requests ask ``stream: true`` (else one JSON answer).
        count: token counter for the generated text.
    """

    def __init__(self, inner: Any, api: str, stream: bool = True, count: Callable[[str], int] = count_words) -> None:
        self.inner, self.api, self.stream, self.count = inner, api, stream, count
        self._prompt_tokens: dict[bytes, int] = {}

    async def connect(self) -> _GenConnection:
        """One connection of ``inner``, wrapped (``ConnectError`` passes through)."""
        return _GenConnection(await self.inner.connect(), self)

    def prompt_tokens(self, payload: bytes) -> int:
        """The client's token count of the prompt in ``payload`` (a whole request; counted once per distinct
        payload): the chat messages' text, ``prompt`` or ``text_input``; -1 when the body is not such JSON."""
        n = self._prompt_tokens.get(payload)
        if n is None:
            try:
                doc = orjson.loads(payload.split(b"\r\n\r\n", 1)[1])
                msgs = doc.get("messages")
                text = " ".join(m.get("content") or "" for m in msgs) if msgs else doc.get("prompt", doc.get("text_input"))
                n = self.count(text) if isinstance(text, str) else -1
            except (orjson.JSONDecodeError, IndexError, AttributeError, TypeError):
                n = -1
            self._prompt_tokens[payload] = n
        return n

    def describe(self) -> dict[str, Any]:
        """``inner``'s description plus the API read."""
        return {**self.inner.describe(), "api": self.api, "stream": self.stream}


__all__ = ["BAD_ANSWER", "BAD_EVENT", "FINISH_ERROR", "INCOMPLETE", "STREAM_ERROR", "STREAM_FAILURES", "GenRecord",
           "GenerationTransport", "StreamResponse", "TokenStream", "count_words"]
