"""Triton's own clients drive `inferperf serve` unchanged (issue 12, item 3).

tritonclient 2.40.0 and perf_analyzer live in their own venv (their pins clash with ours), made by
``scripts/install_triton_clients.sh`` (``.ci/run`` calls it). Without that venv these tests skip with a
reason naming the script; under ``CI=true`` a skip is a failure (tests/conftest.py).

One server (``zoo:tiny-cnn``, seeded weights, dynamic batching on) is started as a subprocess on a free
127.0.0.1 port for the module and always stopped in teardown.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("INFERPERF_TRITON_VENV", ROOT / ".venv-triton"))
PYTHON = VENV / "bin" / "python"
PERF_ANALYZER = VENV / "bin" / "perf_analyzer-env"
MODEL = "tiny"
READY_DEADLINE_S = 90.0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (PYTHON.exists() and PERF_ANALYZER.exists()),
        reason=f"Triton's clients are not installed in {VENV}: run bash scripts/install_triton_clients.sh",
    ),
]


def _free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (the server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, bytes]:
    """GET ``url``: (status, body); connection errors give status 0."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


class _Server:
    """A running ``inferperf serve`` subprocess."""

    def __init__(self, proc: subprocess.Popen[str], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log
        self.url = f"127.0.0.1:{port}"

    def stop(self) -> None:
        """SIGTERM (graceful shutdown), then SIGKILL after 20 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _start(model_path: Path, log: Path) -> _Server:
    """Start the server on a free port and wait for /v2/health/ready (deadline READY_DEADLINE_S)."""
    port = _free_port()
    cmd = [sys.executable, "-m", "inferperf", "serve", str(model_path), "--model-name", MODEL,
           "--port", str(port), "--max-batch-size", "4", "--max-queue-delay-us", "2000", "--instance-count", "2",  # done-when flags
           ]
    out = log.open("w")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    server = _Server(proc, port, log)
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"inferperf serve exited {proc.returncode}: {log.read_text()[-2000:]}")
        if _get(f"http://{server.url}/v2/health/ready")[0] == 200:
            return server
        time.sleep(0.2)
    server.stop()
    raise AssertionError(f"inferperf serve not ready within {READY_DEADLINE_S} s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """zoo:tiny-cnn (x float32 [batch,3,32,32] -> logits [batch,10]), built into a module temp folder."""
    from inferperf import zoo

    old = os.environ.get("INFERPERF_CACHE_DIR")
    os.environ["INFERPERF_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton-zoo"))
    try:
        return zoo.resolve("zoo:tiny-cnn")
    finally:
        if old is None:
            os.environ.pop("INFERPERF_CACHE_DIR", None)
        else:
            os.environ["INFERPERF_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def server(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    """``inferperf serve`` with tiny-cnn, the done-when flags (max 4 rows, 2 ms delay, 2 instances)."""
    srv = _start(model_path, tmp_path_factory.mktemp("serve") / "serve.log")
    try:
        yield srv
    finally:
        srv.stop()


CLIENT_SCRIPT = r'''
import json, sys
import numpy as np
import tritonclient.http as httpclient

url, model, in_path, out_path = sys.argv[1:5]
x = np.load(in_path)
c = httpclient.InferenceServerClient(url=url, connection_timeout=30, network_timeout=60)
report = {
    "live": c.is_server_live(), "ready": c.is_server_ready(), "model_ready": c.is_model_ready(model),
    "server": c.get_server_metadata(), "model": c.get_model_metadata(model), "config": c.get_model_config(model),
}
outs = {}
for binary in (False, True):
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    req_out = httpclient.InferRequestedOutput("logits", binary_data=binary)
    r = c.infer(model, [inp], outputs=[req_out], request_id="req-%d" % binary)
    outs["binary" if binary else "json"] = r.as_numpy("logits")
    report["response_" + ("binary" if binary else "json")] = r.get_response()
report["stats"] = c.get_inference_statistics(model)
np.savez(out_path, **outs)
print(json.dumps(report))
'''


def test_tritonclient_metadata_config_and_infer(server: _Server, model_path: Path, tmp_path: Path) -> None:
    import onnxruntime as ort

    x = np.random.default_rng(7).standard_normal((3, 3, 32, 32)).astype(np.float32)
    expected = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.save(tmp_path / "x.npy", x)
    script = tmp_path / "client.py"
    script.write_text(CLIENT_SCRIPT)
    proc = subprocess.run([str(PYTHON), str(script), server.url, MODEL, str(tmp_path / "x.npy"),
                           str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])

    assert report["live"] and report["ready"] and report["model_ready"]
    assert "binary_tensor_data" in report["server"]["extensions"]
    meta = report["model"]
    assert meta["name"] == MODEL
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [("x", "FP32", [-1, 3, 32, 32])]
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["outputs"]] == [("logits", "FP32", [-1, 10])]
    config = report["config"]
    assert config["max_batch_size"] == 4
    assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in config["input"]] == [
        ("x", "TYPE_FP32", [3, 32, 32])]
    assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in config["output"]] == [
        ("logits", "TYPE_FP32", [10])]
    assert report["response_json"]["id"] == "req-0" and report["response_binary"]["id"] == "req-1"

    got = np.load(tmp_path / "out.npz")
    for kind in ("json", "binary"):
        assert got[kind].dtype == np.float32 and got[kind].shape == (3, 10), kind
        np.testing.assert_allclose(got[kind], expected, rtol=1e-5, atol=1e-5, err_msg=kind)
    # binary output is the exact bytes the model produced; JSON goes through decimal text
    np.testing.assert_array_equal(got["binary"], expected)
    stats = report["stats"]["model_stats"]
    assert [s["name"] for s in stats] == [MODEL]
    assert int(stats[0]["inference_stats"]["success"]["count"]) >= 2


def test_perf_analyzer_concurrency_1_to_4(server: _Server) -> None:
    cmd = [str(PERF_ANALYZER), "-m", MODEL, "-u", server.url, "-i", "http", "--concurrency-range", "1:4",
           "--stability-percentage", "9999", "--measurement-interval", "1000", "--max-trials", "3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    errors = [line for line in output.splitlines() if re.search(r"error|fail", line, re.IGNORECASE)]
    assert not errors, errors[:10]
    # one summary row per concurrency 1..4, each with a positive throughput
    rows = re.findall(r"^Concurrency: (\d+), throughput: ([\d.]+) infer/sec", output, re.MULTILINE)
    assert [int(c) for c, _ in rows] == [1, 2, 3, 4], output[-3000:]
    assert all(float(t) > 0 for _, t in rows)
    assert server.proc.poll() is None, "the server died under perf_analyzer"
