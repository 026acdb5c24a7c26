"""Stress ramp and capacity search against a real inferperf serve on 127.0.0.1 (issue 13 item 5): loose bounds."""

from __future__ import annotations

import pytest

from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.stress import stress

FAST = {"warmup_s": 0.2, "duration_s": 0.8, "measurement_interval_ms": 400}


def test_stress_ramp_smoke(server, monkeypatch) -> None:
    from inferperf.loadgen.transport import HttpTransport

    opened = []
    connect = HttpTransport.connect

    async def counting(self):
        opened.append(1)
        return await connect(self)

    monkeypatch.setattr(HttpTransport, "connect", counting)
    cfg = LoadConfig(url=server.url, model="mlp", stress=True, concurrency=[1, 2], slo_p99_ms=2000, **FAST)
    rs = stress(cfg)
    assert 2 <= len(rs) <= 12 and all(r.kind == "load" for r in rs)
    f = rs[-1].metrics.client["stress"]
    assert f["stop_reason"] and f["knee"] is not None and len(f["steps"]) == len(rs)
    assert [r.config.concurrency for r in rs][:3] == [1, 2, 4]
    # each step's connections are closed after it (issue 23 item 3: nothing of a step is left for the next), and
    # every step after the first is drained first, confirmed by the server's busy gauges
    assert len(opened) == sum(r.config.concurrency for r in rs)
    assert all(r.metrics.errors.count == 0 for r in rs)
    assert rs[0].metrics.client["drain"] is None
    for r in rs[1:]:
        d = r.metrics.client["drain"]
        assert d["source"] == "metrics" and d["drained"] is True and d["server_busy_after"] == 0


def test_find_max_rate_smoke(server) -> None:
    cfg = LoadConfig(url=server.url, model="mlp", find_max_rate=True, slo_p99_ms=1e-3, request_rate=[200.0],
                     warmup_s=0.2, measurement_interval_ms=400)
    rs = stress(cfg)  # a 1 us SLO is missed at once: one step, no goodput
    f = rs[-1].metrics.client["stress"]
    assert len(rs) == 1 and f["goodput_rate"] is None and "missed" in f["stop_reason"]


@pytest.mark.timeout(120)
def test_find_max_rate_brackets_then_bisects_over_real_sockets(server) -> None:
    """Doubling from 300 req/s until p99 passes 100 ms (the server saturates), then bisection: each step after the
    first miss lies strictly inside the bracket (highest pass, lowest miss) known before it, the goodput is the
    highest passing rate, and the search ends with the bracket within 5 % (or says why)."""
    cfg = LoadConfig(url=server.url, model="mlp", find_max_rate=True, slo_p99_ms=100, request_rate=[300.0],
                     warmup_s=0.2, measurement_interval_ms=400)
    rs = stress(cfg)
    f = rs[-1].metrics.client["stress"]
    # a step passes as the search judges it: p99 within the SLO, no errors, and not OVERLOADED (the offered rate
    # not achieved); the last is what a busy machine adds (CI of 2026-12-03: 1950 req/s had p99 < 100 ms but was
    # OVERLOADED, so the search bisected below it and this test, ignoring it, read that as leaving the bracket)
    steps = [(s["value"], s["p99_ms"] <= 100 and s["error_rate"] == 0 and not s["overloaded"]) for s in f["steps"]]
    assert [r.config.request_rate for r in rs] == [v for v, _ in steps]
    assert all(r.metrics.latency_ms.count >= 1000 for r in rs)  # each step long enough for its p99
    if not steps[0][1]:  # a machine too busy for even the first rate: nothing to bisect, and it says so
        assert f["goodput_rate"] is None
        return
    lo, hi = None, None
    for v, ok in steps:
        if hi is not None:
            assert lo < v < hi, (v, lo, hi, steps)  # bisection stays inside the bracket
        if ok:
            lo = v if lo is None else max(lo, v)
        else:
            hi = v if hi is None else min(hi, v)
    assert f["goodput_rate"] == max(v for v, ok in steps if ok)
    assert hi is not None and (hi / lo <= 1.05 or f["stop_reason"])
