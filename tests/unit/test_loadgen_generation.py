"""Token-stream metrics of a load step (issue 30 item 3): TTFT from the scheduled send, ITL per content gap,
TPOT, tokens, goodput (must-say-yes and must-say-no), incomplete streams; the prompt workload; the real client
against the mock on 127.0.0.1 (one token per event, usage agrees, a cut stream counted)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from inferperf.errors import UsageError
from inferperf.loadgen.driver import Closed, StepSamples, run_step
from inferperf.loadgen.gen_metrics import generation_block
from inferperf.loadgen.gen_target import GenTarget, make_prompt, prompt_lengths, read_gen_target, token_counter
from inferperf.loadgen.generation import INCOMPLETE, GenerationTransport, GenRecord
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.transport import HttpTransport
from inferperf.serve.mock_engine import MockProfile
from inferperf.serve.mock_server import start_mock

MS = 1_000_000


def _samples(recs: list[GenRecord | None], sched: list[int], done: list[int], err: list[int]) -> StepSamples:
    n = len(recs)
    return StepSamples(mode="open", concurrency=None, schedule=None, scheduled_ns=np.asarray(sched, np.int64),
                       sent_ns=np.asarray(sched, np.int64) + 5 * MS, done_ns=np.asarray(done, np.int64),
                       status=np.full(n, 200, np.int16), error=np.asarray(err, np.int8), worker=np.zeros(n, np.int16),
                       error_kinds=["", INCOMPLETE], t0_ns=0, measure_start_ns=0, measure_end_ns=1000 * MS,
                       streams=recs)  # fmt: skip


def _cfg(**kw) -> LoadConfig:
    return LoadConfig(api="openai-chat", **kw)


def test_ttft_from_the_scheduled_send_itl_per_gap_tpot_and_tokens() -> None:
    # request 0: scheduled 10 ms, sent 15 ms (late), content at 40, 60, 90 ms (the 60 ms chunk has 3 tokens), done 95
    a = GenRecord([40 * MS, 60 * MS, 90 * MS], 5, 12, 5, "length", True)
    b = GenRecord([120 * MS, 130 * MS], 2, 12, 2, "length", True)
    cut = GenRecord([300 * MS], 1, -1, -1, None, False)
    s = _samples([a, b, cut], [10 * MS, 100 * MS, 200 * MS], [95 * MS, 131 * MS, 310 * MS], [0, 0, 1])
    g, notes = generation_block(s, GenTarget(kind="openai", url="u", model="m", prompt_tokens=[12]), _cfg())
    assert g["ttft_ms"]["count"] == 2 and g["ttft_ms"]["min"] == 20 and g["ttft_ms"]["max"] == 30  # 40-10 from the schedule
    assert sorted([g["itl_ms"]["min"], g["itl_ms"]["max"]]) == [10, 30] and g["itl_ms"]["count"] == 3  # one gap per chunk
    assert g["tpot_ms"]["min"] == pytest.approx(11.0) and g["tpot_ms"]["max"] == pytest.approx(13.75)  # (95-40)/4, (131-120)/1
    assert g["e2e_ms"]["max"] == 85 and g["tokens"]["output_total"] == 7 and g["tokens"]["input_total"] == 24
    assert g["output_tokens_per_s"] == pytest.approx(7.0) and g["requests_per_s"] == pytest.approx(2.0)
    assert g["incomplete_streams"] == 1 and g["errors_by_kind"] == {INCOMPLETE: 1} and g["goodput"] is None
    assert not notes


def test_goodput_counts_only_requests_meeting_every_slo() -> None:
    fast = GenRecord([20 * MS, 30 * MS], 2, 1, 2, "length", True)  # TTFT 20, TPOT 10
    slow_first = GenRecord([80 * MS, 90 * MS], 2, 1, 2, "length", True)  # TTFT 80, TPOT 10
    slow_pace = GenRecord([20 * MS, 70 * MS], 2, 1, 2, "length", True)  # TTFT 20, TPOT 50
    s = _samples([fast, slow_first, slow_pace], [0, 0, 0], [30 * MS, 90 * MS, 70 * MS], [0, 0, 0])
    t = GenTarget(kind="openai", url="u", model="m", prompt_tokens=[1])
    yes, _ = generation_block(s, t, _cfg(slo_ttft_ms=100, slo_tpot_ms=100))
    assert yes["goodput"]["requests"] == 3 and yes["goodput"]["fraction"] == 1.0  # must say yes
    both, _ = generation_block(s, t, _cfg(slo_ttft_ms=50, slo_tpot_ms=20))
    assert both["goodput"]["requests"] == 1 and both["goodput"]["requests_per_s"] == pytest.approx(1.0)  # must say no
    ttft_only, _ = generation_block(s, t, _cfg(slo_ttft_ms=50))
    assert ttft_only["goodput"]["requests"] == 2


def test_usage_and_client_count_mismatch_is_noted() -> None:
    r = GenRecord([10 * MS, 20 * MS], 10, 5, 20, "length", True)
    s = _samples([r], [0], [25 * MS], [0])
    g, notes = generation_block(s, GenTarget(kind="openai", url="u", model="m", prompt_tokens=[5]), _cfg())
    assert g["tokens"]["output_total"] == 20 and g["tokens"]["output_source"] == "usage"
    assert any("usage says 20, the client counted 10" in n for n in notes)


def test_prompt_lengths_are_seeded_and_follow_the_distribution() -> None:
    fixed = prompt_lengths(_cfg(input_tokens=50))
    assert fixed == [50] * 16
    normal = prompt_lengths(_cfg(input_tokens=100, input_tokens_std=20, input_distribution="normal",
                                 input_pool_size=400, input_tokens_min=60, input_tokens_max=140))  # fmt: skip
    assert normal == prompt_lengths(_cfg(input_tokens=100, input_tokens_std=20, input_distribution="normal",
                                         input_pool_size=400, input_tokens_min=60, input_tokens_max=140))  # fmt: skip
    assert min(normal) >= 60 and max(normal) <= 140 and 95 < np.mean(normal) < 105 and len(set(normal)) > 20
    uni = prompt_lengths(_cfg(input_tokens=10, input_distribution="uniform", input_tokens_min=5, input_tokens_max=7))
    assert set(uni) <= {5, 6, 7}
    text, n = make_prompt(33, np.random.default_rng(0), token_counter(None))
    assert n == 33 and len(text.split()) == 33


def test_generation_flags_refused_without_an_openai_api_and_a_missing_tokenizers_library() -> None:
    with pytest.raises(ValueError, match="need --api openai-chat"):
        LoadConfig(max_tokens=8)
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        with pytest.raises(UsageError, match="pip install tokenizers"):
            token_counter("tok.json")


@pytest.fixture()
def mock():
    h = start_mock(MockProfile(prefill_base_ms=2, decode_base_ms=2, decode_per_seq_ms=0, abort_every=3))
    try:
        yield h
    finally:
        h.stop()


def test_real_client_against_the_mock(mock) -> None:
    cfg = LoadConfig(url=mock.url, api="openai-chat", max_tokens=6, input_tokens=9, input_pool_size=2)
    target = read_gen_target(cfg)
    assert target.model == "mock-model" and target.prompt_tokens == [9, 9]
    tr = GenerationTransport(HttpTransport(mock.url), "openai-chat")
    s = asyncio.run(run_step(tr, Closed(1), payloads=target.payloads, warmup_s=0, requests=6, timeout_s=10))
    recs = [x for x in s.streams if x is not None]
    kinds = [s.error_kinds[e] for e in s.error]
    assert kinds.count(INCOMPLETE) == 2 and kinds.count("") == 4  # every 3rd request is cut half-way by the mock
    ok = [r for r, k in zip(s.streams, kinds) if k == ""]
    assert all(len(r.chunk_ns) == 6 and r.out_tokens == 6 and r.usage_out == 6 and r.usage_in == 9 for r in ok)
    assert all(r.done for r in ok) and len(recs) == 6
    true = [t for t in mock.app.times.records if not t["aborted"]]
    assert [t["output_tokens"] for t in true] == [6] * 4 and all(len(t["itl_ms"]) == 5 for t in true)


def test_real_client_triton_generate_against_the_mock(mock) -> None:
    with pytest.raises(UsageError, match="needs --model"):
        read_gen_target(LoadConfig(url=mock.url, api="triton-generate"))
    cfg = LoadConfig(url=mock.url, api="triton-generate", model="mock-model", max_tokens=4, input_tokens=5)
    target = read_gen_target(cfg)
    tr = GenerationTransport(HttpTransport(mock.url), "triton-generate")
    s = asyncio.run(run_step(tr, Closed(1), payloads=target.payloads, warmup_s=0, requests=3, timeout_s=10))
    kinds = [s.error_kinds[e] for e in s.error]
    assert kinds == ["", "", INCOMPLETE]  # the mock cuts every 3rd stream half-way
    assert [len(r.chunk_ns) for r in s.streams[:2]] == [4, 4] and all(r.out_tokens == 4 for r in s.streams[:2])


def test_stress_and_rate_search_take_the_token_slos() -> None:
    from inferperf.loadgen.stress import Outcome, Ramp, RateSearch, token_slo_missed

    gen = {"goodput": {"slo_ttft_ms": 100.0, "slo_tpot_ms": 30.0}, "ttft_ms": {"p99": 90.0}, "tpot_ms": {"p99": 25.0}}
    assert token_slo_missed(gen) is None  # must say met
    assert token_slo_missed({**gen, "ttft_ms": {"p99": 120.0}}) == "p99 TTFT 120.00 ms > SLO 100 ms"  # must say missed
    assert token_slo_missed({**gen, "tpot_ms": {"p99": 31.0}}) == "p99 TPOT 31.00 ms > SLO 30 ms"
    assert token_slo_missed({**gen, "ttft_ms": None}).startswith("no TTFT")
    assert token_slo_missed({"goodput": None}) is None
    ramp = Ramp([1, 2, 4], slo_p99_ms=None)
    ramp.tell(Outcome(1, 10.0, 50.0, 0.0))
    assert ramp.stop_reason is None
    ramp.tell(Outcome(2, 20.0, 50.0, 0.0, token_slo_missed="p99 TTFT 120.00 ms > SLO 100 ms"))
    assert ramp.stop_reason == "p99 TTFT 120.00 ms > SLO 100 ms"
    search = RateSearch(None, start=10)
    search.tell(Outcome(10, 10.0, 50.0, 0.0))
    search.tell(Outcome(20, 20.0, 50.0, 0.0, token_slo_missed="p99 TPOT 31.00 ms > SLO 30 ms"))
    assert (search.lo, search.hi) == (10, 20)
    LoadConfig(api="openai-chat", find_max_rate=True, slo_ttft_ms=100)  # a token SLO is enough for the search
    with pytest.raises(ValueError, match="needs --slo-p99-ms"):
        LoadConfig(api="openai-chat", find_max_rate=True)


def test_dataset_rows_become_requests_in_order_and_their_timestamps_a_trace(tmp_path) -> None:
    import orjson

    from inferperf.measure.arrivals import load_trace

    f = tmp_path / "d.jsonl"
    f.write_text('{"prompt": "a b c", "output_tokens": 4, "timestamp_ms": 0}\n\n'
                 '{"prompt": "d e", "timestamp_ms": 12.5}\n')
    t = read_gen_target(LoadConfig(url="http://127.0.0.1:9", api="openai-completions", model="m", dataset=str(f),
                                   max_tokens=9))  # fmt: skip
    bodies = [orjson.loads(p.split(b"\r\n\r\n", 1)[1]) for p in t.payloads]
    assert [(b["prompt"], b["max_tokens"]) for b in bodies] == [("a b c", 4), ("d e", 9)]
    assert t.prompt_tokens == [3, 2] and t.data_source == f"dataset:{f}"
    assert load_trace(f).tolist() == [0, 12_500_000]
    f.write_text('{"prompt": 3}\n')
    with pytest.raises(UsageError, match="d.jsonl:1: expected"):
        read_gen_target(LoadConfig(url="http://127.0.0.1:9", api="openai-chat", model="m", dataset=str(f)))
    f.write_text('{"prompt": "x"}\n')
    with pytest.raises(UsageError, match="no numeric timestamp_ms"):
        load_trace(f)


def test_each_request_carries_its_own_prompt_count(mock, tmp_path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"prompt": "a b c d e f g"}\n{"prompt": "h"}\n{"prompt": "i j"}\n')
    cfg = LoadConfig(url=mock.url, api="openai-chat", dataset=str(f), max_tokens=2)
    target = read_gen_target(cfg)
    tr = GenerationTransport(HttpTransport(mock.url), "openai-chat")
    s = asyncio.run(run_step(tr, Closed(1), payloads=target.payloads, warmup_s=0, requests=5, timeout_s=10))
    assert [r.in_tokens for r in s.streams] == [7, 1, 2, 7, 1]  # the 3rd stream is cut by the mock: still counted
    ok = [r for r, e in zip(s.streams, s.error) if e == 0]
    assert all(r.usage_in == r.in_tokens for r in ok)  # the mock counts whitespace words too


def test_streams_survive_pickling_and_pool_aligned_over_workers() -> None:
    import pickle

    from inferperf.loadgen.run import pool_samples
    from inferperf.loadgen.windows import WindowRule

    a = GenRecord([1, 2], 2, 3, 2, "length", True, in_tokens=3)
    b = pickle.loads(pickle.dumps(a))
    assert (b.chunk_ns, b.out_tokens, b.usage_in, b.in_tokens, b.finish, b.done) == ([1, 2], 2, 3, 3, "length", True)
    p1 = _samples([a, None], [0, 0], [5 * MS, 6 * MS], [0, 1])
    p2 = _samples([None], [0], [-1], [0])  # a worker whose one request never answered
    p2.streams = None
    pooled = pool_samples([p1, p2], WindowRule())
    assert len(pooled.streams) == pooled.done_ns.size == 3 and pooled.streams[0] is a and pooled.streams[1:] == [None, None]


def test_no_stream_answers_give_e2e_and_tokens_only(mock) -> None:
    cfg = LoadConfig(url=mock.url, api="openai-chat", stream=False, max_tokens=5, input_tokens=4)
    target = read_gen_target(cfg)
    tr = GenerationTransport(HttpTransport(mock.url), "openai-chat", stream=False)
    s = asyncio.run(run_step(tr, Closed(1), payloads=target.payloads, warmup_s=0, requests=3, timeout_s=10))
    assert list(s.error) == [0, 0, 0]  # abort_every cuts streams only
    g, _ = generation_block(s, target, cfg)
    assert g["ttft_ms"] is None and g["itl_ms"] is None and g["e2e_ms"]["count"] == 3
    assert g["tokens"]["output_total"] == 15 and g["tokens"]["input_total"] == 12


def test_a_token_slo_without_a_stream_is_refused() -> None:
    """Issue 37 item 6: --no-stream with --slo-tpot-ms judged TPOT from a first-token time of -1 (about 20 s a token):
    goodput 0. Without a stream there is no TTFT nor TPOT to judge."""
    for slo in ({"slo_tpot_ms": 50.0}, {"slo_ttft_ms": 200.0}):
        with pytest.raises(ValueError, match="judge a token stream: --no-stream answers in one piece"):
            LoadConfig(url="http://127.0.0.1:1", api="openai-chat", stream=False, **slo)
        assert LoadConfig(url="http://127.0.0.1:1", api="openai-chat", **slo).stream  # streamed: accepted


@pytest.fixture()
def not_openai():
    """A server on an ephemeral 127.0.0.1 port that answers 404 to everything (a KServe server, say)."""
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a) -> None:  # noqa: ANN002
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(10)


def test_errors_name_what_happened_not_a_guess(not_openai) -> None:
    """Issue 37 item 10: a closed port said "gave no model name", a server without the OpenAI routes got KServe's
    hints (--shape, --protocol)."""
    import socket

    from inferperf.cli.load_lines import refused_line

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    with pytest.raises(UsageError, match=rf"^cannot connect to http://127.0.0.1:{closed} \(connection refused\): start"):
        read_gen_target(LoadConfig(url=f"http://127.0.0.1:{closed}", api="openai-chat"))
    with pytest.raises(UsageError, match=r"/v1/models answered 404: not an OpenAI-compatible server there"):
        read_gen_target(LoadConfig(url=not_openai, api="openai-chat"))
    refused = {"status": 404, "in_a_row": 10, "body": '{"error": "no route POST /v1/chat/completions"}'}
    line = refused_line(LoadConfig(url=not_openai, api="openai-chat", model="m"), refused)
    assert "does not serve POST /v1/chat/completions (--api openai-chat)" in line and "--shape" not in line
    assert refused_line(LoadConfig(url=not_openai, model="m"), refused).endswith(
        "fix --shape, --input-data, --protocol or --model")  # KServe: its own fixes
