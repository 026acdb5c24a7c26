"""``inferperf load --shared-memory system`` (issue 41 item 1): inputs put in registered regions and outputs asked
into one, over HTTP and gRPC against ``inferperf serve --allow-client-shm`` on 127.0.0.1; the answers land in the
output region (checked against onnxruntime), the regions are unregistered and the segments unlinked when the run
ends (also when it fails), and a server that does not allow it is one line naming the flag."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from inferperf.config import BenchConfig
from inferperf.errors import UsageError
from inferperf.loadgen.gen_target import read_load_target
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.run import load
from inferperf.serve.options import ServeOptions
from inferperf.serve.server import prepare, start
from tests.models import seeded_mlp_onnx

FAST = {"warmup_s": 0.2, "duration_s": 1.0, "measurement_interval_ms": 500}


def _leftovers() -> list[str]:
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(f"inferperf-load-{os.getpid()}-"))


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seeded_mlp_onnx(tmp_path_factory.mktemp("load-shm") / "mlp.onnx")


@pytest.fixture(scope="module")
def server(mlp_path: Path) -> Iterator[Any]:
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    app = prepare(str(mlp_path), cfg, ServeOptions(max_batch_size=4), name="mlp")
    app.allow_client_shm()
    h = start(app, grpc_port=0)
    try:
        yield h
    finally:
        h.stop()


def _url(h: Any, protocol: str) -> str:
    return f"grpc://127.0.0.1:{h.grpc_port}" if protocol == "grpc" else h.url


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_run_through_regions_answers_into_the_output_region_and_leaves_nothing(server, mlp_path, protocol) -> None:  # noqa: ANN001
    cfg = LoadConfig(url=_url(server, protocol), model="mlp", shared_memory="system", concurrency=[2],
                     input_pool_size=1, **FAST)
    target = read_load_target(cfg)
    try:
        assert len(server.app.shm.regions) == 2  # the payload's inputs, the outputs
        (r,) = load(cfg, target=target)
        assert r.metrics.errors.count == 0 and r.metrics.latency_ms.count > 10
        assert r.config.workload.protocol == ("grpc+shm" if protocol == "grpc" else "json+shm")
        keys = target.shm.keys
        x = np.fromfile("/dev/shm" + keys[1], np.float32, count=32).reshape(1, 32)  # the input segment
        y = np.fromfile("/dev/shm" + keys[0], np.float32, count=16).reshape(1, 16)  # the output segment, offset 0
        want = ort.InferenceSession(str(mlp_path)).run(None, {"x": x})[0]
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
        assert b"shared_memory_region" in target.payloads[0] and b'"data"' not in target.payloads[0]  # names only
    finally:
        target.close()
    assert not server.app.shm.regions and not _leftovers()


def test_a_failing_run_still_unregisters_and_unlinks(server, monkeypatch) -> None:  # noqa: ANN001
    import inferperf.loadgen.run as run

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("a step failed")

    monkeypatch.setattr(run, "run_one", boom)
    with pytest.raises(RuntimeError, match="a step failed"):
        load(LoadConfig(url=server.url, model="mlp", shared_memory="system", concurrency=[1], **FAST))
    assert not server.app.shm.regions and not _leftovers()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_server_without_the_flag_is_one_line_naming_it(mlp_path, protocol) -> None:  # noqa: ANN001
    app = prepare(str(mlp_path), BenchConfig.model_validate({"warmup": {"iterations": 1}}), ServeOptions(), name="mlp")
    h = start(app, grpc_port=0)
    try:
        with pytest.raises(UsageError, match="--allow-client-shm"):
            read_load_target(LoadConfig(url=_url(h, protocol), model="mlp", shared_memory="system",
                                        concurrency=[1]))
    finally:
        h.stop()
    assert not _leftovers()


def test_contradictory_flags_are_refused() -> None:
    with pytest.raises(ValueError, match="drop one"):
        LoadConfig(url="http://127.0.0.1:1", model="m", shared_memory="system", protocol="binary", concurrency=[1])
    with pytest.raises(ValueError, match="drop --body"):
        LoadConfig(url="http://127.0.0.1:1", body="b.json", shared_memory="system", concurrency=[1])
