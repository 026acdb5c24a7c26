"""One AIPerf agreement point on the mock token server (issue 30 item 5, the CI check).

NVIDIA AIPerf (``.venv-aiperf``, made by ``scripts/install_aiperf.sh``, which ``.ci/run`` calls; without it
the test skips with a reason, a failure under ``CI=true``) runs ``aiperf profile --endpoint-type chat
--streaming --use-server-token-count`` at concurrency 4 against ``inferperf serve --mock-generate`` on a free
127.0.0.1 port, with the offline WordLevel tokenizer of ``scripts/make_tokenizer.py``. Its figures are
checked against the mock's own log of the same requests, figure by figure under the same definition
(benchmarks/gen_peers.py): TTFT p50, per-gap ITL p50 (AIPerf's ``inter_chunk_latency``), per-request TPOT
p50 (AIPerf's ``inter_token_latency``). The profile makes a wrong definition visible beyond the noise of
2 shared cores: a 200 ms prefill against 20 ms decode steps, 8 tokens, so taking the role-only first event
for a token (TTFT ~0), or e2e / tokens for the inter-token latency (42 ms instead of 20), misses by far more
than the tolerances (15 % TTFT, 10 % ITL/TPOT); the output length must be exact.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_peers", ROOT / "benchmarks" / "gen_peers.py")
assert _spec is not None and _spec.loader is not None
gp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gp)

PROFILE = ("prefill_base_ms: 200\nprefill_per_token_ms: 0\ndecode_base_ms: 20\ndecode_per_seq_ms: 0\n"
           "max_active: 16\n")  # fmt: skip


def test_aiperf_agrees_with_the_mock(tmp_path: Path) -> None:
    if not (gp.AIPERF / "aiperf").exists():
        pytest.skip(f"no AIPerf venv at {gp.AIPERF.parent}: run `bash scripts/install_aiperf.sh`")
    tok = gp.make_tokenizer(tmp_path / "tok")
    proc, url, log = gp.start_mock(tmp_path, PROFILE)
    try:
        fig = gp.run_arm("aiperf", url, "concurrency", 4, 12, tmp_path / "aiperf", tok, timeout_s=240,
                         tokens=(32, 8))  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(30)
    recs = gp.read_log(log)
    assert len(recs) == 12 and all(r["output_tokens"] == 8 and not r["aborted"] for r in recs)
    doc = json.loads((tmp_path / "aiperf" / "profile_export_aiperf.json").read_text())
    assert doc["output_sequence_length"]["avg"] == 8 and doc["request_count"]["avg"] == 12
    true = gp.truth(recs)
    assert fig["ttft"] == pytest.approx(true["ttft"], rel=0.15), (fig, true)
    assert fig["itl"] == pytest.approx(true["itl"], rel=0.10), (fig, true)
    assert fig["tpot"] == pytest.approx(true["tpot"], rel=0.10), (fig, true)
