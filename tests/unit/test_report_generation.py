"""The report draws token-stream load steps (issue 30 item 7): TTFT/ITL vs load, their distributions, tokens/s
and goodput, from each Result's metrics.generation; a KServe-only report draws none of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferperf.report.render import render_markdown
from tests.unit.test_compare_generation import _step
from tests.unit.test_report_load import charts_of, closed


def test_generation_charts_follow_each_steps_figures(tmp_path: Path) -> None:
    rs = [_step(20.0 + 5 * k, 25.0 + k, seed=k, concurrency=c) for k, c in enumerate((1, 2, 4))]
    rep, ch = charts_of(tmp_path, rs)
    lat = {t["name"]: t for t in ch["gen-lat-0"].figure["data"]}
    assert lat["TTFT p50"]["x"] == [1, 2, 4]
    assert lat["TTFT p50"]["y"] == pytest.approx([r.metrics.generation["ttft_ms"]["p50"] for r in rs])
    assert lat["ITL p99"]["y"] == pytest.approx([r.metrics.generation["itl_ms"]["p99"] for r in rs])
    assert lat["TTFT p50"]["y"][2] == pytest.approx(30.0, abs=0.5)
    box = ch["gen-ttft-dist-0"].figure["data"]
    assert [b["median"][0] for b in box] == pytest.approx(lat["TTFT p50"]["y"])
    tok = {t["name"]: t for t in ch["gen-tok-0"].figure["data"]}
    assert tok["output tokens/s"]["y"] == pytest.approx([r.metrics.generation["output_tokens_per_s"] for r in rs])
    good = tok["goodput req/s"]["y"]  # SLO TTFT 25 ms: the 30 ms step meets it for almost no request
    assert good[0] > good[2] and good[2] < 0.1 * good[0]
    assert "TTFT and ITL vs load" in render_markdown(rep)


def test_kserve_steps_draw_no_generation_chart(tmp_path: Path) -> None:
    _, ch = charts_of(tmp_path, [closed(1), closed(2)])
    assert not [k for k in ch if k.startswith("gen-")]
