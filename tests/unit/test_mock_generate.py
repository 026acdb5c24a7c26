"""The mock token server (issue 30 item 4): its latency model on the fake loop (exact times), and its ASGI answers."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from inferperf.clock import FakeClock
from inferperf.errors import UsageError
from inferperf.serve.mock_app import MockGenerateApp, TrueTimes
from inferperf.serve.mock_engine import MockEngine, MockProfile, load_profile
from tests.fake_loop import run_fake

MS = 1_000_000
P = MockProfile(prefill_base_ms=10, prefill_per_token_ms=0.1, decode_base_ms=20, decode_per_seq_ms=1, max_active=2)


def _engine_times(profile: MockProfile, reqs: list[tuple[int, int]]) -> list[list[int]]:
    clock = FakeClock()

    async def main() -> list[list[int]]:
        eng = MockEngine(profile, clock)
        seqs = [eng.submit(n_in, n_out) for n_in, n_out in reqs]
        for s in seqs:
            while await s.queue.get() is not None:
                pass
        await eng.close()
        return [[t // MS for t in s.token_ns] for s in seqs]

    return run_fake(clock, main)


def test_one_sequence_alone_ttft_is_prefill_and_each_gap_one_decode_step() -> None:
    assert _engine_times(P, [(100, 4)]) == [[20, 41, 62, 83]]  # 10 + 0.1 x 100; then 20 + 1 x 1 each


def test_continuous_batching_two_active_share_each_step() -> None:
    # both prefilled one after the other (20 ms each), then every step has 2 active: 20 + 1 x 2 = 22 ms
    assert _engine_times(P, [(100, 3), (100, 3)]) == [[20, 62, 84], [40, 62, 84]]


def test_at_most_s_active_the_rest_wait() -> None:
    one = P.model_copy(update={"max_active": 1})
    # the second is admitted only once the first is done (62), prefilled (20) then decoded alone (21)
    assert _engine_times(one, [(100, 3), (100, 3)]) == [[20, 41, 62], [82, 103, 124]]


def test_text_is_seeded() -> None:
    async def words(seed: int) -> list[list[str]]:
        eng = MockEngine(P.model_copy(update={"seed": seed}), FakeClock())
        out = [eng.submit(1, 8).tokens for _ in range(2)]
        await eng.close()
        return out

    a, b, c = (run_fake(FakeClock(), lambda s=s: words(s)) for s in (0, 0, 1))
    assert a == b and a != c and a[0] != a[1]


def _call(app: MockGenerateApp, clock: FakeClock, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    sent: list[dict] = []

    async def main() -> None:
        msgs = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict:
            if msgs:
                return msgs.pop()
            await asyncio.sleep(3600)  # the client never goes away
            return {"type": "http.disconnect"}

        async def send(m: dict) -> None:
            sent.append(m)

        try:
            await app({"type": "http", "method": method, "path": path}, receive, send)
        except ConnectionAbortedError:
            sent.append({"type": "aborted"})
        await app.engine.close()

    run_fake(clock, main)
    status = sent[0]["status"]
    return status, b"".join(m.get("body", b"") for m in sent[1:])


def _events(body: bytes) -> list[str]:
    return [e.removeprefix("data: ") for e in body.decode().split("\n\n") if e]


def test_chat_stream_role_first_then_one_word_per_event_usage_and_done() -> None:
    clock = FakeClock()
    app = MockGenerateApp(P, clock)
    req = {"messages": [{"role": "user", "content": "w " * 100}], "max_tokens": 3, "stream": True,
           "stream_options": {"include_usage": True}}
    status, body = _call(app, clock, "POST", "/v1/chat/completions", orjson.dumps(req))
    ev = _events(body)
    assert status == 200 and ev[-1] == "[DONE]"
    docs = [orjson.loads(e) for e in ev[:-1]]
    assert docs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    words = [d["choices"][0]["delta"]["content"] for d in docs[1:4]]
    assert len(words) == 3 and words[1].startswith(" ") and len("".join(words).split()) == 3
    assert docs[4]["choices"][0]["finish_reason"] == "length"
    assert docs[5]["usage"] == {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103}
    rec = app.times.records[0]
    assert rec["ttft_ms"] == 20 and rec["itl_ms"] == [21, 21] and rec["output_tokens"] == 3


def test_completions_whole_answer_and_bad_requests() -> None:
    clock = FakeClock()
    status, body = _call(MockGenerateApp(P, clock), clock, "POST", "/v1/completions",
                         orjson.dumps({"prompt": "a b", "max_tokens": 2}))
    doc = orjson.loads(body)
    assert status == 200 and len(doc["choices"][0]["text"].split()) == 2 and doc["usage"]["completion_tokens"] == 2
    for path, req in (("/v1/completions", {"max_tokens": 2}), ("/v1/chat/completions", {"messages": []}),
                      ("/v1/completions", {"prompt": "a", "max_tokens": 0})):
        status, body = _call(MockGenerateApp(P, clock), clock, "POST", path, orjson.dumps(req))
        assert status == 400 and orjson.loads(body)["error"]["type"] == "invalid_request_error"
    assert _call(MockGenerateApp(P, clock), clock, "GET", "/health")[0] == 200
    assert orjson.loads(_call(MockGenerateApp(P, clock), clock, "GET", "/v1/models")[1])["data"][0]["id"] == "mock-model"
    assert _call(MockGenerateApp(P, clock), clock, "GET", "/nope")[0] == 404


def test_abort_every_cuts_the_stream_before_done() -> None:
    clock = FakeClock()
    app = MockGenerateApp(P.model_copy(update={"abort_every": 1}), clock)
    req = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 4, "stream": True}
    _, body = _call(app, clock, "POST", "/v1/chat/completions", orjson.dumps(req))
    assert "[DONE]" not in body.decode() and app.times.records[0]["aborted"] and app.times.records[0]["output_tokens"] == 2


def test_profile_file_and_its_refusals(tmp_path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("decode_base_ms: 30\nmax_active: 4\n")
    assert load_profile(f).decode_base_ms == 30 and load_profile(f).max_active == 4
    f.write_text("max_active: 0\n")
    with pytest.raises(UsageError, match="max_active"):
        load_profile(f)
    f.write_text("bogus: 1\n")
    with pytest.raises(UsageError, match="bogus"):
        load_profile(f)
    with pytest.raises(UsageError, match="missing.yaml not found"):
        load_profile(tmp_path / "missing.yaml")


def test_true_times_derive_ttft_and_gaps() -> None:
    t = TrueTimes()
    t.record({"arrived_ns": 0, "send_ns": [5 * MS, 7 * MS, 10 * MS]})
    assert t.records[0]["ttft_ms"] == 5 and t.records[0]["itl_ms"] == [2, 3]


def test_triton_generate_stream_and_whole_answer() -> None:
    clock = FakeClock()
    app = MockGenerateApp(P, clock)
    status, body = _call(app, clock, "POST", "/v2/models/mock-model/generate_stream",
                         orjson.dumps({"text_input": "w " * 100, "max_tokens": 3}))
    ev = [orjson.loads(e) for e in _events(body)]
    assert status == 200 and [set(e) for e in ev] == [{"model_name", "model_version", "text_output"}] * 3
    assert len("".join(e["text_output"] for e in ev).split()) == 3 and app.times.records[0]["ttft_ms"] == 20
    status, body = _call(MockGenerateApp(P, clock), clock, "POST", "/v2/models/mock-model/generate",
                         orjson.dumps({"text_input": "a", "parameters": {"max_tokens": 2}}))
    assert status == 200 and len(orjson.loads(body)["text_output"].split()) == 2
    status, body = _call(MockGenerateApp(P, clock), clock, "POST", "/v2/models/other/generate", b"{}")
    assert status == 400 and "unknown model" in orjson.loads(body)["error"]
    status, body = _call(MockGenerateApp(P, clock), clock, "POST", "/v2/models/mock-model/generate", b"{}")
    assert status == 400 and "text_input" in orjson.loads(body)["error"]
