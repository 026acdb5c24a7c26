"""Stress ramp and capacity search against a real inferperf serve on 127.0.0.1 (issue 13 item 5): loose bounds."""

from __future__ import annotations

import pytest

from inferperf.config import BenchConfig
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.stress import stress
from inferperf.serve.server import serving
from tests.models import seeded_mlp_onnx

FAST = {"warmup_s": 0.2, "duration_s": 0.8, "measurement_interval_ms": 400}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    mlp = seeded_mlp_onnx(tmp_path_factory.mktemp("stress") / "mlp.onnx")
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    with serving(str(mlp), cfg, name="mlp") as handle:
        yield handle


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
    # connections stay open between steps: the ramp opens as many as its largest step needs, not one set per step
    assert len(opened) == max(r.config.concurrency for r in rs) < sum(r.config.concurrency for r in rs)
    assert all(r.metrics.errors.count == 0 for r in rs)


def test_find_max_rate_smoke(server) -> None:
    cfg = LoadConfig(url=server.url, model="mlp", find_max_rate=True, slo_p99_ms=1e-3, request_rate=[200.0],
                     warmup_s=0.2, measurement_interval_ms=400)
    rs = stress(cfg)  # a 1 us SLO is missed at once: one step, no goodput
    f = rs[-1].metrics.client["stress"]
    assert len(rs) == 1 and f["goodput_rate"] is None and "missed" in f["stop_reason"]
