"""Soak over real sockets against ``inferperf serve`` (issue 13 item 6): short, loose bounds, no speed claims."""

from __future__ import annotations

from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.soak import soak
from tests.memory_growth import growing_memory


def test_soak_smoke_reads_rss_from_metrics(server) -> None:
    """Growth under the thresholds is no leak, whatever a 4 s run's RSS does (1 PiB/h: nothing reaches it); 20
    intervals leave enough after the settle period to be judged at all."""
    cfg = LoadConfig(url=server.url, model="mlp", concurrency=[2], warmup_s=0.3, soak_s=4.0, soak_interval_s=0.2,
                     leak_bytes_per_hour=2.0**50)
    (r,) = soak(cfg)
    b = r.metrics.client["soak"]
    assert r.kind == "load" and b["rss_source"] == "metrics"
    assert len(b["intervals"]) == 20 and all(iv["rss_bytes"] for iv in b["intervals"])
    assert b["intervals"][-1]["requests"] > 0 and b["verdict"] == "no leak" and b["rss"]["judged"]
    assert b["rss"]["slope_bytes_per_hour"] is not None


def test_a_soak_of_a_few_intervals_is_not_judged(server) -> None:
    """3 s at 0.5 s intervals leaves 4 samples after settling: 'too few intervals', never 'no leak', even while
    memory grows (seconds of growth are no hourly verdict)."""
    cfg = LoadConfig(url=server.url, model="mlp", concurrency=[2], warmup_s=0.3, soak_s=3.0, soak_interval_s=0.5)
    with growing_memory(every_s=0.040, most_mib=100):
        (r,) = soak(cfg)
    b = r.metrics.client["soak"]
    assert b["verdict"] == "too few intervals" and b["rss"]["judged"] is False and not b["rss"]["leak"]


def test_soak_flags_a_server_whose_memory_grows(server) -> None:
    """The server runs in this process: 1 MiB more held every 40 ms (400 MiB at most: to the end of the soak,
    however long the start takes, so its last third still grows) while it is soaked is a leak on its /metrics
    RSS, over real sockets, at the default thresholds."""
    cfg = LoadConfig(url=server.url, model="mlp", concurrency=[2], warmup_s=0.3, soak_s=4.0, soak_interval_s=0.2)
    with growing_memory(every_s=0.040, most_mib=400):
        (r,) = soak(cfg)
    b = r.metrics.client["soak"]
    assert b["rss_source"] == "metrics" and b["verdict"] == "leak", b["rss"]
