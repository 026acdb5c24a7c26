"""Report over REAL load Results: ``loadgen.run.load`` against ``inferperf serve`` (issue 13 item 8), mixed with a
bench Result in the same folder (mixed kinds must not crash)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from inferperf.cli import main
from inferperf.config import BenchConfig
from inferperf.loadgen.breakdown import PARTS
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.run import load
from inferperf.results.io import save
from inferperf.serve.server import serving
from tests.models import seeded_mlp_onnx


def run(argv: list[str]) -> int:
    try:
        return main(argv) or 0
    except SystemExit as e:  # click standalone mode
        return int(e.code or 0)


def test_report_draws_real_load_steps_beside_a_bench_result(tmp_path: Path) -> None:
    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    with serving(str(mlp), cfg, name="mlp") as handle:
        rs = load(LoadConfig(url=handle.url, model="mlp", concurrency=[1, 2], warmup_s=0.3, duration_s=1.0,
                             measurement_interval_ms=500))  # fmt: skip
    out = tmp_path / "res"
    for i, r in enumerate(rs):
        save(r, out / f"step{i}.json")
    assert run(["bench", str(mlp), "--duration-s", "0.3", "--warmup", "1", "-o", str(out / "bench.json")]) == 0
    html_path = tmp_path / "report.html"
    assert run(["report", str(out), "-o", str(html_path), "--slo-p99-ms", "1000"]) == 0
    html = html_path.read_text()
    specs = json.loads(re.search(r'<script id="chart-specs" type="application/json">(.*?)</script>', html, re.S)
                       .group(1).replace("<\\/", "</"))  # fmt: skip
    tput = specs["load-tput-0"]["data"][0]
    assert tput["x"] == [1, 2]
    assert tput["y"] == pytest.approx([r.metrics.throughput.queries_per_s for r in rs])
    # issue 39 item 5: one stacked bar per step, the parts in a request's order, adding up to the client's mean
    split = specs["load-split-0"]["data"]
    names = [t["name"] for t in split]
    assert names == [p.replace("_", " ") for p in PARTS if p.replace("_", " ") in names]
    assert {"client send", "server http", "queue", "model call", "remainder"} <= set(names)
    for k, r in enumerate(rs):
        b = r.metrics.server["breakdown_ms"]
        assert sum(t["y"][k] for t in split) == pytest.approx(b["client_ms"], rel=1e-6)
        assert b["client_ms"] == pytest.approx(r.metrics.latency_ms.mean, rel=0.05)
    assert "mlp (json, closed loop): 2 steps: no knee from fewer than 3" in html  # issue 24 item 10
    # the SLO line follows the Results' own validity (1 s steps of 500 ms windows may be INVALID on a busy
    # machine): it names the highest VALID step meeting the SLO, or says none does
    ok = [r for r in rs if r.validity.valid and r.metrics.latency_ms.p99 <= 1000]
    if ok:
        assert f"highest load meeting p99 &lt;= 1000 ms: {ok[-1].config.concurrency:g} " in html
    else:
        assert "no step meets p99 &lt;= 1000 ms" in html
