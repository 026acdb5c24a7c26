"""compare gates on token-stream figures (issue 30 item 7): TTFT p50, ITL p50 and output tokens/s of
``metrics.generation``, must-say-regressed and must-say-unchanged, and only when asked for."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inferperf.analysis.compare import compare
from inferperf.analysis.compare.gate import build_gate
from inferperf.loadgen.driver import StepSamples
from inferperf.loadgen.gen_target import GenTarget
from inferperf.loadgen.generation import GenRecord
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.result import step_result
from inferperf.results.io import save

MS = 1_000_000


def _step(ttft_ms: float, gap_ms: float, seed: int, concurrency: int = 1) -> object:
    rng = np.random.default_rng(seed)
    n, tokens = 200, 8
    sched = np.arange(n, dtype=np.int64) * 50 * MS + 1
    recs, done = [], []
    for t0 in sched:
        first = t0 + round((ttft_ms + rng.normal(0, 0.3)) * MS)
        chunks = [int(first + k * round((gap_ms + rng.normal(0, 0.2)) * MS)) for k in range(tokens)]
        recs.append(GenRecord(chunks, tokens, 16, tokens, "length", True))
        done.append(chunks[-1] + MS)
    s = StepSamples(mode="closed", concurrency=concurrency, schedule=None, scheduled_ns=sched, sent_ns=sched.copy(),
                    done_ns=np.asarray(done, np.int64), status=np.full(n, 200, np.int16), error=np.zeros(n, np.int8),
                    worker=np.zeros(n, np.int16), error_kinds=[""], t0_ns=0, measure_start_ns=0,
                    measure_end_ns=int(sched[-1] + 50 * MS), streams=recs)  # fmt: skip
    cfg = LoadConfig(api="openai-chat", concurrency=[concurrency], duration_s=10, slo_ttft_ms=25.0)
    return step_result(s, GenTarget(kind="openai", url="http://x", model="m", prompt_tokens=[16]), cfg, ["t"])


def _side(tmp: Path, name: str, ttft_ms: float, gap_ms: float) -> Path:
    d = tmp / name
    for k in range(4):
        save(_step(ttft_ms, gap_ms, seed=k + (100 if name == "cur" else 0)), d / f"r{k}.json")
    return d


def _verdicts(tmp: Path, cur_ttft: float, cur_gap: float, metrics: str | None, **flags: str) -> dict[str, str]:
    base, cur = _side(tmp, "base", 20.0, 25.0), _side(tmp, "cur", cur_ttft, cur_gap)
    gate = build_gate(None, flags, metrics)
    return {r.metric: r.verdict for r in compare([base], [cur], gate).rows}


def test_slower_first_token_regresses_ttft_only(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, 26.0, 25.0, "ttft_p50,itl_p50,output_tokens_per_s")
    assert v["ttft_p50"] == "regressed" and v["itl_p50"] == "unchanged"


def test_same_stream_is_unchanged(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, 20.0, 25.0, "ttft_p50,itl_p50,output_tokens_per_s")
    assert v == {"ttft_p50": "unchanged", "itl_p50": "unchanged", "output_tokens_per_s": "unchanged"}


def test_token_metrics_only_when_asked(tmp_path: Path) -> None:
    assert "ttft_p50" not in _verdicts(tmp_path, 26.0, 25.0, None)
    assert "itl_p50" in _verdicts(tmp_path / "t", 20.0, 25.0, None, **{"max-itl-increase": "5%"})
