"""SSE parsed incrementally on the chunk callback (issue 30 item 1): any split of the stream gives the same
events; token-stream answers classified (content vs role-only events, [DONE], mid-stream failures)."""

from __future__ import annotations

import orjson
import pytest

from inferperf.loadgen.generation import (BAD_EVENT, FINISH_ERROR, INCOMPLETE, STREAM_ERROR, TokenStream,
                                          count_words)
from inferperf.loadgen.http1 import DISCONNECTED, Response
from inferperf.loadgen.sse import SseParser

STREAM = ("\ufeff: keep-alive comment\r\ndata: a\r\n\r\nevent: error\ndata: {\"x\": 1}\n\n"
          "data: line1\rdata: line2\r\rdata:nospace\n: c\n\ndata: é中\n\nid: 7\nretry: 5\n\ndata: [DONE]\n\n").encode()
EXPECTED = [("message", "a"), ("error", '{"x": 1}'), ("message", "line1\nline2"), ("message", "nospace"),
            ("message", "é中"), ("message", "[DONE]")]


def _feed(pieces: list[bytes]) -> list[tuple[str, str]]:
    p = SseParser()
    out = [e for piece in pieces for e in p.feed(piece)]
    assert not p.pending
    return out


def test_whole_stream() -> None:
    assert _feed([STREAM]) == EXPECTED


def test_byte_by_byte() -> None:
    assert _feed([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_every_two_way_split(cut: int) -> None:  # CR|LF, inside the BOM, inside a UTF-8 character, ...
    assert _feed([STREAM[:cut], STREAM[cut:]]) == EXPECTED


def test_three_way_splits_around_crlf() -> None:
    for i in range(1, 40):
        for j in range(i + 1, 41):
            assert _feed([STREAM[:i], STREAM[i:j], STREAM[j:]]) == EXPECTED


def test_no_event_without_data_and_pending_mid_event() -> None:
    p = SseParser()
    assert p.feed(b"event: x\n\n: only a comment\n\n") == []
    assert p.feed(b"data: half") == [] and p.pending
    assert p.feed(b"\n") == [] and p.pending  # the event's blank line has not come
    assert p.feed(b"\n") == [("message", "half")] and not p.pending


def _chat(delta: dict, finish: str | None = None) -> bytes:
    return b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"


USAGE = b'data: {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}\n\n'


def _run(pieces: list[tuple[int, bytes]], r: Response = Response(200, 1), status: int = 200,
         chat: bool = True) -> tuple[str | None, TokenStream]:  # fmt: skip
    s = TokenStream("openai-chat" if chat else "openai-completions")
    s.head(0, status, [])
    for t, b in pieces:
        s.chunk(t, b)
    return s.outcome(r), s


def test_role_only_and_empty_events_are_not_tokens() -> None:
    body = [(5, _chat({"role": "assistant", "content": ""})), (6, _chat({"content": ""})), (10, _chat({"content": "a"})),
            (30, _chat({"content": " b c"})), (31, _chat({}, "length") + USAGE + b"data: [DONE]\n\n")]
    kind, s = _run(body)
    rec = s.record()
    assert kind is None and rec.chunk_ns == [10, 30] and rec.first_ns == 10
    assert rec.out_tokens == 3 and (rec.usage_in, rec.usage_out) == (7, 3) and rec.finish == "length" and rec.done


def test_an_event_split_across_reads_takes_the_time_of_the_read_that_completes_it() -> None:
    ev = _chat({"content": "x"})
    _, s = _run([(10, ev[:7]), (20, ev[7:-1]), (35, ev[-1:] + b"data: [DONE]\n\n")])
    assert s.record().chunk_ns == [35]


def test_completions_text() -> None:
    ev = b'data: {"choices": [{"index": 0, "text": "hi there", "finish_reason": null}]}\n\ndata: [DONE]\n\n'
    kind, s = _run([(4, ev)], chat=False)
    assert kind is None and s.record().chunk_ns == [4] and s.record().out_tokens == 2


@pytest.mark.parametrize(("pieces", "r", "kind"), [
    ([_chat({"content": "a"})], Response(200, 9), INCOMPLETE),  # body ended (close-delimited) before [DONE]
    ([_chat({"content": "a"})], Response(0, 0, DISCONNECTED), INCOMPLETE),  # chunked body cut after the head
    ([_chat({"content": "a"}, "error"), b"data: [DONE]\n\n"], Response(200, 9), FINISH_ERROR),
    ([b"event: error\ndata: {\"message\": \"overloaded\"}\n\n"], Response(200, 9), STREAM_ERROR),
    ([b'data: {"error": {"message": "boom"}}\n\ndata: [DONE]\n\n'], Response(200, 9), STREAM_ERROR),
    ([b"data: {not json\n\ndata: [DONE]\n\n"], Response(200, 9), BAD_EVENT),
    ([_chat({"content": "a"}) + b"data: [DO"], Response(200, 9), INCOMPLETE),
])
def test_mid_stream_failures_are_classified(pieces: list[bytes], r: Response, kind: str) -> None:
    assert _run([(1, p) for p in pieces], r)[0] == kind


def test_failures_before_the_answer_keep_their_kind() -> None:
    assert TokenStream("openai-chat").outcome(Response(0, 0, DISCONNECTED)) == DISCONNECTED
    s = TokenStream("openai-chat")
    s.head(0, 503, [])
    s.chunk(1, b"data: [DONE]\n\n")  # an error answer's body is not read as a stream
    assert s.outcome(Response(503, 14, "http_503")) == "http_503" and s.record().chunk_ns == []


def test_whole_answer_without_streaming() -> None:
    s = TokenStream("openai-chat", stream=False)
    s.head(0, 200, [])
    body = orjson.dumps({"choices": [{"message": {"role": "assistant", "content": "one two"}, "finish_reason": "length"}],
                         "usage": {"prompt_tokens": 4, "completion_tokens": 2}})
    s.chunk(1, body[:10])
    s.chunk(2, body[10:])
    assert s.outcome(Response(200, len(body))) is None
    rec = s.record()
    assert rec.chunk_ns == [] and rec.out_tokens == 2 and rec.usage_out == 2 and rec.finish == "length"
    bad = TokenStream("openai-chat", stream=False)
    bad.head(0, 200, [])
    bad.chunk(1, b"<html>")
    assert bad.outcome(Response(200, 6)) == "bad_answer"


def test_count_words() -> None:
    assert count_words(" a  b\nc ") == 3 and count_words("") == 0


def test_triton_generate_stream_ends_with_the_body() -> None:
    ev = b'data: {"model_name": "m", "model_version": "1", "text_output": "a b"}\n\n'
    s = TokenStream("triton-generate")
    s.head(0, 200, [])
    s.chunk(7, ev)
    assert s.outcome(Response(200, len(ev))) is None and s.record().chunk_ns == [7] and s.record().out_tokens == 2
    cut = TokenStream("triton-generate")
    cut.head(0, 200, [])
    cut.chunk(7, ev)
    assert cut.outcome(Response(0, 0, DISCONNECTED)) == INCOMPLETE  # the chunked body broke off


@pytest.mark.parametrize("eol", [b"\r\n", b"\n", b"\r"])
def test_the_last_event_is_dispatched_with_each_line_ending_the_standard_allows(eol: bytes) -> None:
    """Issue 37 item 8: a final event whose blank line was a bare CR was never dispatched (the CR waited for a
    possible LF that never came); at the stream's end it now ends its line."""
    body = (b"data: {\"choices\": [{\"delta\": {\"content\": \"a b\"}}]}" + eol + eol + b"data: [DONE]" + eol + eol)
    for cut in (len(body), len(body) - 1):  # in one read, and with the last line ending alone in the next
        kind, s = _run([(1, body[:cut]), (2, body[cut:])] if cut < len(body) else [(1, body)])
        assert kind is None and s.record().done and s.record().out_tokens == 2, (eol, cut)
    p = SseParser()
    assert p.feed(b"data: x\r\r") == [] and p.end() == [("message", "x")]  # the blank line's CR came last
    q = SseParser()
    assert q.feed(b"data: x\r\ndata: y") == [] and q.end() == []  # an unterminated event is dropped (the standard)


@pytest.mark.parametrize("bad", [
    b'data: {"choices": [], "usage": {"prompt_tokens": "seven", "completion_tokens": 3}}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"content": 42}}]}\n\n',
    b'data: {"choices": [{"index": 0, "text": ["x"]}]}\n\n',
])
def test_a_malformed_field_is_an_error_of_its_own_kind_never_a_raise(bad: bytes) -> None:
    """Issue 37 item 7: a non-numeric usage count or non-string text raised inside the sink, the closed-loop stream
    died and the step ended with no error recorded. The request fails as stream_bad_event, its event kept."""
    kind, s = _run([(1, _chat({"content": "a"})), (2, bad + b"data: [DONE]\n\n")], chat=b'"delta"' in bad or b"usage" in bad)
    assert kind == BAD_EVENT and s.bad is not None and s.bad.startswith(bad[len(b"data: "):].strip()[:20])
