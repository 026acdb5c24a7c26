"""Triton's gRPC tools drive `inferperf serve` unchanged (issue 40 item 2): perf_analyzer ``-i grpc`` (plain,
``--async``, ``--streaming``) and Triton's example gRPC clients (tests/fixtures/third_party/triton_clients, unchanged
copies at the commit its README names).

The same venv and servers as tests/e2e/test_triton_clients.py (``scripts/install_triton_clients.sh``; skipped
without it, a failure under ``CI=true``), each server started with an explicit free ``--grpc-port`` and always
stopped in teardown. Two example clients cannot pass unchanged, each for one named step: simple_grpc_health_metadata
checks that the server's name is "triton" (ours is "inferperf"; a copy with only that check changed passes),
and simple_grpc_string_infer_client's second model, simple_identity, a python-backend model (not served).
The streaming example clients need sequence batching or a decoupled model (the sequence issue); ModelStreamInfer
is driven here by perf_analyzer --streaming and in tests/integration/test_serve_grpc.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_triton_clients import (EXAMPLE_CLIENTS, MEASUREMENT_MS, MODEL, PERF_ANALYZER, PYTHON, ROW_SHAPE,
                                           _free_port, _get, _io, _launch, _Server, _split, _start, model_path,
                                           perf_analyzer_shm_passes, pytestmark, shm_examples_pass)

__all__ = ["model_path", "pytestmark"]  # the model fixture and the skip-without-the-venv marks, shared


class _GrpcServer:
    """A server and its gRPC address."""

    def __init__(self, server: _Server, grpc_port: int) -> None:
        self.server, self.grpc = server, f"127.0.0.1:{grpc_port}"


@pytest.fixture(scope="module")
def grpc_server(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_GrpcServer]:
    """tiny-cnn with the done-when flags of test_triton_clients (max 4 rows, 2 ms delay, 2 instances), gRPC on."""
    port = _free_port()
    srv = _start(model_path, tmp_path_factory.mktemp("serve-grpc") / "serve.log", ("--grpc-port", str(port)))
    try:
        yield _GrpcServer(srv, port)
    finally:
        srv.stop()


@pytest.mark.parametrize("mode", ["sync", "async", "streaming"])
def test_perf_analyzer_over_grpc_at_concurrency_1_4_16(grpc_server: _GrpcServer, model_path: Path, mode: str) -> None:
    """perf_analyzer -i grpc (ModelMetadata, ModelConfig, ServerMetadata, then ModelInfer or ModelStreamInfer) at
    concurrency 1 to 16 in steps of 3: no errors, a positive throughput at each, and the server's statistics, which
    it reads through ModelStatistics, count the window's requests (its "Server:" section)."""
    in_name = _io(model_path)[0][0]
    cmd = [str(PERF_ANALYZER), "-m", MODEL, "-u", grpc_server.grpc, "-i", "grpc", "--concurrency-range", "1:16:3",
           "--stability-percentage", "9999", "--measurement-interval", str(MEASUREMENT_MS), "--max-trials", "3",
           "--shape", f"{in_name}:{':'.join(map(str, ROW_SHAPE))}"]
    cmd += {"sync": [], "async": ["--async"], "streaming": ["--streaming"]}[mode]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert not [line for line in output.splitlines() if re.search(r"error|fail", line, re.IGNORECASE)]
    rows = re.findall(r"^Concurrency: (\d+), throughput: ([\d.]+) infer/sec", output, re.MULTILINE)
    assert [int(c) for c, _ in rows] == [1, 4, 7, 10, 13, 16][: len(rows)] and {1, 16} <= {int(c) for c, _ in rows}
    assert all(float(t) > 0 for _, t in rows)
    client = [int(n) for n in re.findall(r"Client: \n\s+Request count: (\d+)", output)]
    server = [int(n) for n in re.findall(r"Server: \n\s+Inference count: \d+\n\s+Execution count: \d+\n\s+"
                                         r"Successful request count: (\d+)", output)]
    # the server's count is the statistics' delta over the window: requests in flight at its edges move it, and so
    # does a statistics call answered late (20 ms at 2,000 req/s is 40 requests on a loaded runner); a request
    # counted twice or not at all would move it by all of them
    assert client and len(server) == len(client)
    assert all(abs(s - c) <= max(32, 0.05 * c) for s, c in zip(server, client, strict=True)), (server, client)
    assert grpc_server.server.proc.poll() is None, "the server died under perf_analyzer"


@pytest.fixture(scope="module")
def example_grpc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_GrpcServer]:
    """``inferperf serve --model-repository`` over Triton's example repository, gRPC on a free port."""
    from tests.triton_repository import make_repository

    repo = make_repository(tmp_path_factory.mktemp("triton-grpc-examples") / "model_repository")
    port = _free_port()
    srv = _launch(["--model-repository", str(repo), "--grpc-port", str(port)],
                  tmp_path_factory.mktemp("serve-grpc-repo") / "serve.log")
    try:
        yield _GrpcServer(srv, port)
    finally:
        srv.stop()


def _client(script: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PYTHON), str(script), "-u", url, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("client", ["simple_grpc_infer_client.py", "simple_grpc_async_infer_client.py",
                                    "simple_grpc_aio_infer_client.py",
                                    "simple_grpc_keepalive_client.py", "grpc_explicit_int_content_client.py",
                                    "grpc_explicit_byte_content_client.py", "grpc_explicit_int8_content_client.py"])
def test_tritons_example_grpc_clients_pass_unchanged(example_grpc: _GrpcServer, client: str) -> None:
    """Each checks its sums, differences or identities (raw and typed contents, BYTES, INT8), statistics and the
    unknown-model error where it asks one; it exits 1 on any mismatch."""
    proc = _client(EXAMPLE_CLIENTS / client, example_grpc.grpc)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert example_grpc.server.proc.poll() is None


def test_the_string_client_passes_simple_string_and_stops_at_the_python_backend_model(example_grpc: _GrpcServer) -> None:
    """simple_grpc_string_infer_client checks simple_string (BYTES in and out: 16 sums and differences), then
    simple_identity, a python-backend model the repository marks UNAVAILABLE with its reason."""
    proc = _client(EXAMPLE_CLIENTS / "simple_grpc_string_infer_client.py", example_grpc.grpc)
    assert proc.returncode == 1
    assert len(re.findall(r"^b'\d+' \+ b'1' = b'\d+'$", proc.stdout, re.MULTILINE)) == 16, proc.stdout
    assert "'simple_identity' has no available versions (UNAVAILABLE" in proc.stderr
    assert "the python backend (model.py)" in proc.stderr


def test_health_metadata_fails_only_on_the_servers_name(example_grpc: _GrpcServer, tmp_path: Path) -> None:
    """Unchanged, simple_grpc_health_metadata stops at its check that the server is named "triton"; with only
    that check changed to "inferperf" every other step passes (health, model metadata, the unknown-model words,
    configuration, statistics)."""
    script = EXAMPLE_CLIENTS / "simple_grpc_health_metadata.py"
    proc = _client(script, example_grpc.grpc)
    assert proc.returncode == 1 and proc.stdout.strip().splitlines()[-1] == "FAILED : get_server_metadata", proc.stdout
    text = script.read_text()
    assert text.count('metadata.name == "triton"') == 1
    renamed = tmp_path / script.name
    renamed.write_text(text.replace('metadata.name == "triton"', 'metadata.name == "inferperf"'))
    proc = _client(renamed, example_grpc.grpc)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])


def test_model_control_passes_with_the_load_time_config_override(tmp_path_factory: pytest.TempPathFactory) -> None:
    """simple_grpc_model_control over a repository in explicit mode (issue 41 item 3): the index (8 models), a
    load, the malformed override's refusal ("failed to load"), the override applied (max_batch_size 8 -> 16),
    the unload, a file override whose name is over NAME_MAX refused INTERNAL with "failed to poll from model
    repository" while the server stays live, and an unknown model's "failed to load": exit 0."""
    from tests.triton_repository import make_repository

    repo = make_repository(tmp_path_factory.mktemp("triton-grpc-control") / "model_repository")
    port = _free_port()
    srv = _launch(["--model-repository", str(repo), "--model-control-mode", "explicit", "--grpc-port", str(port)],
                  tmp_path_factory.mktemp("serve-grpc-control") / "serve.log")
    try:
        proc = _client(EXAMPLE_CLIENTS / "simple_grpc_model_control.py", f"127.0.0.1:{port}")
        assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
        assert "PASS: model control" in proc.stdout
        assert srv.proc.poll() is None
    finally:
        srv.stop()


def test_perf_analyzer_and_inferperf_load_agree_over_grpc(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 40 item 2: on one server (zoo:squeezenet, 1 instance of 1 intra-op thread, batching off), perf_analyzer
    -i grpc and ``inferperf load grpc://`` at concurrency 1, in interleaved rounds (6 each, A B B A ..., so drift
    falls on both, after a warm-up run), agree on throughput and p50 within 10 % (the median of the per-round
    ratios): a millisecond-scale model, so the clients' own cost (tenths of a millisecond) is inside the tolerance.
    Both send the same input (zeros) and run on CPUs the server does not: with perf_analyzer's random bytes and
    shared CPUs the medians differed by 11-12 % in two of five runs (CI of 2026-12-06), from the model call and the
    CPU share, not from either client's timing.

    Each run's figures are compared as if both clients had met the same server: the server's own time per request
    in that run (the statistics extension's ``success`` ns over its count) is replaced by the median over all runs
    (latency = server time + the client's and transport's share, so the correction is additive). Without it, the
    CI of 2026-12-07 failed on a p50 ratio of 1.153 (per round 0.81, 1.28, 1.12, 1.19: the machine's drift within a
    round, 6.8-9.3 ms for perf_analyzer alone); the raw ratios are in the message."""
    import json

    import numpy as np

    # one input for both clients: perf_analyzer's default random bytes read as FP32 (NaN, Inf, denormals) made the
    # model call itself ~6 % slower than on load's normal values; zeros are what --input-data zero sends
    zeros = tmp_path_factory.mktemp("agree-data") / "zeros.npz"
    np.savez(zeros, data_0=np.zeros((1, 1, 3, 224, 224), np.float32))  # leading axis: samples
    server_cpus, client_cpus = _split()
    pin = None if client_cpus is None else (lambda: os.sched_setaffinity(0, client_cpus))
    port = _free_port()
    srv = _launch(["zoo:squeezenet", "--intra-op-num-threads", "1", "--grpc-port", str(port)],
                  tmp_path_factory.mktemp("serve-agree") / "serve.log", cpus=server_cpus)
    pa, ours = [], []  # (throughput /s, p50 ms, the server's mean time per request in that run ms)

    def server_ms() -> tuple[int, int]:
        status, body = _get(f"http://127.0.0.1:{srv.port}/v2/models/squeezenet/stats")
        assert status == 200, body
        success = json.loads(body)["model_stats"][0]["inference_stats"]["success"]
        return int(success["count"]), int(success["ns"])

    def perf_analyzer(into: list[tuple[float, float, float]]) -> None:
        before = server_ms()
        proc = subprocess.run([str(PERF_ANALYZER), "-m", "squeezenet", "-u", f"127.0.0.1:{port}", "-i", "grpc",
                               "--input-data", "zero", "--concurrency-range", "1", "--measurement-interval", "2000",
                               "--stability-percentage", "9999", "--max-trials", "3"], capture_output=True, text=True,
                              timeout=300, preexec_fn=pin)  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:]
        after = server_ms()
        thr = float(re.search(r"Throughput: ([\d.]+) infer/sec", proc.stdout).group(1))
        p50 = int(re.search(r"p50 latency: (\d+) usec", proc.stdout).group(1)) / 1000
        into.append((thr, p50, (after[1] - before[1]) / (after[0] - before[0]) / 1e6))

    def load() -> None:
        out = tmp_path_factory.mktemp("load-agree")
        before = server_ms()
        run = subprocess.run([sys.executable, "-m", "inferperf", "load", f"grpc://127.0.0.1:{port}", "--model",
                              "squeezenet", "--input-data", str(zeros), "--concurrency", "1", "--duration-s", "4",
                              "--warmup-s", "1", "-o", str(out)], capture_output=True, text=True, timeout=300,
                             preexec_fn=pin)  # fmt: skip
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        after = server_ms()
        (doc,) = [json.loads(p.read_text()) for p in out.glob("*.json")]
        ours.append((doc["metrics"]["throughput"]["queries_per_s"], doc["metrics"]["latency_ms"]["p50"],
                     (after[1] - before[1]) / (after[0] - before[0]) / 1e6))

    try:
        perf_analyzer([])  # warm-up: the server's first calls (allocations, the runtime's first runs) are slower
        for r in range(6):  # A B, B A, ...: a drift during a pair falls on each client as often
            for run in (lambda: perf_analyzer(pa), load) if r % 2 == 0 else (load, lambda: perf_analyzer(pa)):
                run()
    finally:
        srv.stop()
    # the same server time for every run (the median over all), the client's and transport's share kept as measured;
    # then the median of the per-round ratios (each round's pair ran back to back)
    server = float(np.median([r[2] for r in pa + ours]))

    def as_if_same_server(r: tuple[float, float, float]) -> tuple[float, float]:
        return 1e3 / (1e3 / r[0] - r[2] + server), r[1] - r[2] + server

    same = [(as_if_same_server(o), as_if_same_server(p)) for o, p in zip(ours, pa, strict=True)]
    thr = float(np.median([o[0] / p[0] for o, p in same]))
    p50 = float(np.median([o[1] / p[1] for o, p in same]))
    raw = [round(o[1] / p[1], 3) for o, p in zip(ours, pa, strict=True)]
    assert abs(thr - 1) <= 0.10 and abs(p50 - 1) <= 0.10, (thr, p50, "raw p50 ratios", raw, pa, ours)


def test_tritons_grpc_shm_client_and_perf_analyzer_grpc_shared_memory_pass(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 41 item 1 over gRPC: simple_grpc_shm_client.py (unchanged: it registers /dev/shm regions through the
    SystemSharedMemory RPCs, infers simple's sums and differences with inputs and outputs in them, reads the
    status, unregisters) exits 0 on `serve --model-repository ... --allow-client-shm --grpc-port`; perf_analyzer
    -i grpc --shared-memory system drives simple through regions with no error, and the server keeps serving."""
    from tests.triton_repository import make_repository

    repo = make_repository(tmp_path_factory.mktemp("triton-grpc-shm") / "model_repository")
    port = _free_port()
    srv = _launch(["--model-repository", str(repo), "--allow-client-shm", "--grpc-port", str(port)],
                  tmp_path_factory.mktemp("serve-grpc-shm") / "serve.log")
    try:
        proc = _client(EXAMPLE_CLIENTS / "simple_grpc_shm_client.py", f"127.0.0.1:{port}")
        assert proc.returncode == 0 and "PASS: system shared memory" in proc.stdout, (proc.stdout[-3000:],
                                                                                     proc.stderr[-3000:])
        shm_examples_pass(f"127.0.0.1:{port}", "grpc")
        perf_analyzer_shm_passes(f"127.0.0.1:{port}", "grpc")
        assert srv.proc.poll() is None
    finally:
        srv.stop()


@pytest.mark.parametrize("client", ["simple_http_sequence_sync_infer_client.py", "simple_grpc_sequence_sync_infer_client.py",
                                    "simple_grpc_sequence_stream_infer_client.py",
                                    "simple_grpc_aio_sequence_stream_infer_client.py"])
def test_tritons_sequence_clients_pass_unchanged_on_simple_sequence(example_grpc: _GrpcServer, client: str) -> None:
    """Issue 42: each sends three sequences to simple_sequence (two integer ids, one string id) with START on the
    first request and END on the last, synchronously or on one ModelStreamInfer stream (all requests sent before
    any answer), and checks every answer: READY * (INPUT + START). Exit 0 and its "PASS" line."""
    url = example_grpc.server.url.removeprefix("http://") if "http" in client else example_grpc.grpc
    proc = _client(EXAMPLE_CLIENTS / client, url)
    assert proc.returncode == 0 and "PASS" in proc.stdout, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert example_grpc.server.proc.poll() is None


@pytest.mark.parametrize(("model", "protocol"), [("simple_sequence", "http"), ("simple_dyna_sequence", "grpc")])
def test_perf_analyzer_drives_the_sequence_models(example_grpc: _GrpcServer, model: str, protocol: str) -> None:
    """Issue 42: perf_analyzer reads sequence_batching from the served configuration and sends sequences (its
    --sequence-length 20 default) at concurrency 2: no error, a positive throughput."""
    url = example_grpc.grpc if protocol == "grpc" else example_grpc.server.url.removeprefix("http://")
    proc = subprocess.run([str(PERF_ANALYZER), "-m", model, "-u", url, "-i", protocol, "--concurrency-range", "2",
                           "--measurement-interval", str(MEASUREMENT_MS), "--stability-percentage", "9999",
                           "--max-trials", "3"], capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert re.search(r"Concurrency: 2, throughput: [1-9][\d.]* infer/sec", out), out[-3000:]
