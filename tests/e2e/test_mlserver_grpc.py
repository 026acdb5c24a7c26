"""``inferperf load grpc://`` drives MLServer's gRPC endpoint (issue 40 item 3: any KServe v2 gRPC server), a
server without ModelConfig whose metadata lists no inputs: ``--shape`` supplies them.

MLServer lives in its own venv (``scripts/install_mlserver.sh``; ``.ci/run`` calls it) with the ONNX Runtime
runtime of benchmarks/serve_peers/mlserver/; without the venv this skips with a reason naming the script (a
failure under ``CI=true``). The server is started on free 127.0.0.1 ports, waited for with a deadline, and always
stopped in teardown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.run import load
from tests.e2e.test_triton_clients import _free_port
from tests.models import seeded_mlp_onnx

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("INFERPERF_MLSERVER_VENV", ROOT / ".venv-mlserver"))
RUNTIME = ROOT / "benchmarks" / "serve_peers" / "mlserver"

pytestmark = pytest.mark.skipif(not (VENV / "bin" / "mlserver").exists(),
                                reason=f"MLServer is not installed in {VENV}: run bash scripts/install_mlserver.sh")


@pytest.fixture(scope="module")
def mlserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """MLServer serving the seeded MLP (x [n, 32] FP32) as ``mlp``; yields its gRPC port."""
    repo = tmp_path_factory.mktemp("mlserver-repo")
    (repo / "mlp").mkdir()
    seeded_mlp_onnx(repo / "mlp" / "mlp.onnx")
    http, grpc_port, metrics = _free_port(), _free_port(), _free_port()
    (repo / "settings.json").write_text(json.dumps({"http_port": http, "grpc_port": grpc_port, "metrics_port": metrics,
                                                    "host": "127.0.0.1", "parallel_workers": 0,
                                                    "load_models_at_startup": True}))
    (repo / "mlp" / "model-settings.json").write_text(json.dumps({
        "name": "mlp", "implementation": "onnx_runtime.OnnxRuntime", "parameters": {"uri": str(repo / "mlp" / "mlp.onnx")}}))
    log = (repo / "mlserver.log").open("w")
    proc = subprocess.Popen([str(VENV / "bin" / "mlserver"), "start", str(repo)], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(RUNTIME)}, cwd=repo)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (repo / "mlserver.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "MLServer not ready within 120 s"
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/models/mlp/ready", timeout=2).status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        yield grpc_port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.mark.parametrize("mode", ["closed", "open"])
def test_load_drives_mlservers_grpc_with_declared_inputs(mlserver: int, mode: str) -> None:
    steps = {"concurrency": [2]} if mode == "closed" else {"request_rate": [100], "arrival": "poisson"}
    (r,) = load(LoadConfig(url=f"grpc://127.0.0.1:{mlserver}", model="mlp", shapes=["x:1x32"], warmup_s=0.5,
                           duration_s=2.0, measurement_interval_ms=500, **steps))
    assert r.metrics.errors.count == 0 and r.metrics.latency_ms.count > 50
    assert r.config.workload.shapes == {"x": [1, 32]} and r.config.backend == "grpc"
    assert [(t.name, t.dtype) for t in r.model.inputs] == [("x", "fp32")]  # declared by --shape, recorded
    assert r.metrics.server is None  # MLServer serves no ModelStatistics over gRPC: no server block, not a wrong one
