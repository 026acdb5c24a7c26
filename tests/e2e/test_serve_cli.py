"""``inferperf serve`` as a subprocess: banner, infer, graceful stop (exit 0), Result, exit-2 cases, YAML settings."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from inferperf.cli.options import build_config
from inferperf.errors import UsageError
from tests.models import seeded_mlp_onnx


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    return seeded_mlp_onnx(tmp_path_factory.mktemp("serve-cli") / "mlp.onnx")


def _start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "inferperf", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip


def _banner(proc: subprocess.Popen, deadline_s: float = 90.0) -> str:
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if sel.select(timeout=0.5):
            line = proc.stdout.readline()
            if line.startswith("inferperf serve: "):
                return line
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"no banner; stderr: {proc.communicate()[1]}")


def _url(banner: str) -> str:
    return banner.split()[2]


def test_serve_answers_then_stops_on_sigterm_with_exit_0_and_result(mlp: Path, tmp_path: Path) -> None:
    out = tmp_path / "serve.json"
    proc = _start(str(mlp), "--port", "0", "--max-batch-size", "4", "--max-queue-delay-us", "2000",
                  "--instance-count", "2", "--intra-op-num-threads", "1", "--output", str(out))  # fmt: skip
    try:
        banner = _banner(proc)
        assert "model 'mlp' max_batch_size=4 dynamic_batching=on (max_queue_delay_us=2000" in banner
        assert "instances=2" in banner
        url = _url(banner)
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 32], "data": [0.5] * 64}]}
        for _ in range(5):
            r = httpx.post(f"{url}/v2/models/mlp/infer", json=body, timeout=10)
            assert r.status_code == 200 and r.json()["outputs"][1]["data"] == [16.0, 16.0]
        assert "inferperf_batch_size_bucket" in httpx.get(f"{url}/metrics", timeout=10).text
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    doc = json.loads(out.read_text())
    assert doc["kind"] == "serve"
    server = doc["metrics"]["server"]
    assert server["batch_sizes"] == {"2": 5} and server["request_ms"]["count"] == 5
    assert server["queue_ms"]["count"] == 5 and server["compute_ms"]["count"] == 5
    assert server["decode_ms"]["count"] == 5 and server["encode_ms"]["count"] == 5
    assert doc["metrics"]["throughput"]["samples_per_s"] > 0 and server["inference_count"] == 10


def test_asyncio_and_h11_stack_serves_and_the_banner_names_it(mlp: Path) -> None:
    """``--loop asyncio --http h11`` (uvicorn's pure-Python stack) answers like the default one."""
    proc = _start(str(mlp), "--port", "0", "--loop", "asyncio", "--http", "h11", "--intra-op-num-threads", "1")
    try:
        banner = _banner(proc)
        assert "(uvicorn, asyncio, h11)" in banner
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": [0.5] * 32}]}
        r = httpx.post(f"{_url(banner)}/v2/models/mlp/infer", json=body, timeout=10)
        assert r.status_code == 200 and r.json()["outputs"][1]["data"] == [16.0]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_port_in_use_is_one_line_exit_2(mlp: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = _start(str(mlp), "--port", str(port), "--warmup", "1")
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [f"error: port {port} on 127.0.0.1 is already in use: pass --port N (0 = any free port)"]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--max-batch-size", "0", "--dynamic-batching"], "dynamic batching needs a batch dimension"),
        (["--preferred-batch-size", "8", "--max-batch-size", "4"], "exceeds --max-batch-size 4"),
        (["--instance-count", "0"], "--instance-count"),
        (["--port", "70000"], "not a TCP port"),
        (["--loop", "tokio"], "--loop 'tokio': use one of auto, uvloop, asyncio"),
        (["--json-nonfinite", "null"], "--json-nonfinite: Input should be 'error' or 'literal'"),
        # the settings' own checks (issue 25 item 2), the library's lines (tests/unit/test_serve_settings.py)
        (["--grace-s", "-1"], "error: --grace-s -1: use seconds >= 0"),
        (["--timeout-keep-alive-s", "0"], "error: --timeout-keep-alive-s 0: use seconds >= 1"),
        (["--request-receipt-timeout-s", "-2"], "error: --request-receipt-timeout-s -2: use seconds >= 0"),
        (["--limit-concurrency", "-1"], "error: --limit-concurrency -1: use 0 (no limit) or more"),
        (["--latency-buckets", "0.1,abc"], "error: --latency-buckets '0.1,abc': give comma-separated seconds"),
        (["--latency-buckets", "0.1,0.05"], "error: --latency-buckets 0.1,0.05: give increasing positive seconds"),
        (["--slo-ms", "0"], "error: --slo-ms 0.0: give the latency SLO in milliseconds"),
        (["--access-log", "/nonexistent-inferperf-dir/a.jsonl"],
         "error: --access-log '/nonexistent-inferperf-dir/a.jsonl' cannot be written (No such file or directory)"),
    ],
)
def test_bad_flags_exit_2_with_one_line(mlp: Path, args: list[str], text: str) -> None:
    proc = _start(str(mlp), *args)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and text in err, err


def test_unloadable_model_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    for model in (str(bad), str(tmp_path / "missing.onnx")):
        proc = _start(model, "--port", "0")
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, err


def test_yaml_settings_file_feeds_serve_and_bench_ignores_serve_section(mlp: Path, tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "settings.yaml"
    cfg.write_text("session:\n  intra_op_num_threads: 1\nwarmup:\n  iterations: 2\n"
                   "serve:\n  max_batch_size: 8\n  preferred_batch_size: [4]\n  instance_count: 1\n")  # fmt: skip
    section: dict = {}
    bench_cfg = build_config({}, cfg, serve_section=section)
    assert bench_cfg.session.intra_op_num_threads == 1 and section["preferred_batch_size"] == [4]
    assert capsys.readouterr().err == ""
    build_config({}, cfg)  # bench: the shared part, with a note about serve:
    assert "the serve: section is for `inferperf serve`; ignored here" in capsys.readouterr().err
    proc = _start(str(mlp), "--port", "0", "--config", str(cfg))
    try:
        banner = _banner(proc)
        assert "max_batch_size=8 dynamic_batching=on" in banner and "preferred=[4]" in banner
        cfg_doc = httpx.get(f"{_url(banner)}/v2/models/mlp/config", timeout=10).json()
        assert cfg_doc["dynamic_batching"]["preferred_batch_size"] == [4] and cfg_doc["input"][0]["dims"] == [32]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    for text, msg in (("serve: 3\n", "the serve: section must be a mapping"), ("session: [x\n", "does not parse")):
        (tmp_path / "odd.yaml").write_text(text)
        with pytest.raises(UsageError, match=msg):
            build_config({}, tmp_path / "odd.yaml", serve_section={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("serve:\n  max_batch_sise: 8\n")
    proc = _start(str(mlp), "--config", str(bad))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "unknown serve setting 'max_batch_sise'" in err


def test_sigterm_under_load_answers_every_accepted_request_then_exits_0(mlp: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    proc = _start(str(mlp), "--port", "0", "--max-batch-size", "8", "--max-queue-delay-us", "2000000",
                  "--intra-op-num-threads", "1", "--warmup", "1")  # fmt: skip
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": [1.0] * 32}]}
    sent = False
    try:
        url = _url(_banner(proc))
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(httpx.post, f"{url}/v2/models/mlp/infer", json=body, timeout=30) for _ in range(4)]
            deadline, queued = time.monotonic() + 10, False
            while not queued and time.monotonic() < deadline:  # all four accepted, waiting in the batcher's queue
                queued = 'inferperf_queue_depth{model="mlp"} 4' in httpx.get(f"{url}/metrics", timeout=5).text
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            sent = True
            codes = [f.result().status_code for f in futures]
    finally:
        if not sent and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        # one SIGTERM only: a second one may land while the process is already exiting (Python restores the
        # default handlers at finalization) and kill it with -15; kill only if it is still up after 60 s
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=30)
    assert queued and codes == [200, 200, 200, 200]
    assert proc.returncode == 0, err


def test_a_string_model_serves_with_input_data_or_warmup_0_and_refuses_without(tmp_path: Path) -> None:
    """``--input-data`` (and ``workload.input_data`` in --config) warms a BYTES model up; ``--warmup 0`` serves
    it without data and the banner says so; neither: exit 2 naming both; ``--warmup -1``: exit 2."""
    import numpy as np

    from tests.integration.test_serve_path import string_identity_onnx

    model = string_identity_onnx(tmp_path / "strings.onnx")
    data = tmp_path / "words.npz"
    np.savez(data, s=np.array([["a", "b"]]))
    cfg = tmp_path / "settings.yaml"
    cfg.write_text(f"workload:\n  input_data: {data}\nserve:\n  max_batch_size: 2\n")
    body = {"inputs": [{"name": "s", "datatype": "BYTES", "shape": [1, 2], "data": ["héllo", "w"]}]}
    for args, warm in ((["--input-data", str(data)], True), (["--config", str(cfg)], True), (["--warmup", "0"], False)):
        proc = _start(str(model), "--port", "0", "--intra-op-num-threads", "1", *args)
        try:
            banner = _banner(proc)
            assert ("warm-up off (--warmup 0)" in banner) is (not warm), banner
            r = httpx.post(f"{_url(banner)}/v2/models/strings/infer", json=body, timeout=30)
            assert r.status_code == 200 and r.json()["outputs"][0]["data"] == ["héllo", "w"], r.text
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    for args, text in (([], "pass --input-data FILE.npz (arrays by input name) for the warm-up, or --warmup 0"),
                       (["--warmup", "-1"], "--warmup -1: use 0")):
        proc = _start(str(model), "--port", "0", *args)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and text in err, err
