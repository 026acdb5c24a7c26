"""Soak over real sockets against ``inferperf serve`` (issue 13 item 6): short, loose bounds, no speed claims."""

from __future__ import annotations

from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.soak import soak


def test_soak_smoke_reads_rss_from_metrics(server) -> None:
    cfg = LoadConfig(url=server.url, model="mlp", concurrency=[2], warmup_s=0.3, soak_s=3.0, soak_interval_s=0.5)
    (r,) = soak(cfg)
    b = r.metrics.client["soak"]
    assert r.kind == "load" and b["rss_source"] == "metrics"
    assert len(b["intervals"]) == 6 and all(iv["rss_bytes"] for iv in b["intervals"])
    assert b["intervals"][-1]["requests"] > 0 and b["verdict"] in ("leak", "no leak")
    assert b["rss"]["slope_bytes_per_hour"] is not None
