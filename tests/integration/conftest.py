"""Shared integration fixtures."""

from __future__ import annotations

import pytest

from inferperf.config import BenchConfig
from inferperf.serve.server import serving
from tests.models import seeded_mlp_onnx


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``inferperf serve`` of the seeded MLP (input x [n, 32] FP32) in this process on an ephemeral 127.0.0.1
    port, one intra-op thread, batching off; one per test module, stopped gracefully at its end."""
    mlp = seeded_mlp_onnx(tmp_path_factory.mktemp("mlp") / "mlp.onnx")
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    with serving(str(mlp), cfg, name="mlp") as handle:
        yield handle
