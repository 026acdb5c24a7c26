"""Compressed request bodies and answers on the infer route (issue 41 item 4), as Triton's HTTP clients send
them: the whole body (JSON header and binary tensors) in gzip or deflate, ``Inference-Header-Content-Length``
counting the decoded header; answers compressed on ``Accept-Encoding``; a decompression bomb a 413."""

from __future__ import annotations

import gzip
import json
import shutil
import zlib
from pathlib import Path

import httpx
import numpy as np
import pytest

from inferperf.serve.server import prepare_repository, start

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repository"
LIMIT = 1 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """The example repository's ``scale`` model (x [N, 4] FP32), with a 1 MiB body limit."""
    repo = tmp_path_factory.mktemp("compression") / "repo"
    shutil.copytree(EXAMPLE, repo)
    (repo / "scale" / "model.yaml").write_text(f"session:\n  intra_op_num_threads: 1\nserve:\n  max_batch_size: 4\n"
                                               f"  max_body_bytes: {LIMIT}\n")
    handle = start(prepare_repository(repo, mode="explicit", load_models=["scale"]), "127.0.0.1", 0,
                   ready_timeout_s=60)
    try:
        yield handle
    finally:
        handle.stop()


def _binary_body(x: np.ndarray) -> tuple[bytes, int]:
    header = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    return header + x.tobytes(), len(header)


def _plain(url: str, x: np.ndarray) -> list:
    body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
    return httpx.post(f"{url}/v2/models/scale/infer", json=body, timeout=10).json()["outputs"]


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_binary_request_is_answered_as_the_plain_one(server, coding: str) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    body, header_len = _binary_body(x)
    packed = gzip.compress(body) if coding == "gzip" else zlib.compress(body)
    r = httpx.post(f"{server.url}/v2/models/scale/infer", content=packed, timeout=10,
                   headers={"Content-Encoding": coding, "Inference-Header-Content-Length": str(header_len)})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"] == _plain(server.url, x)


@pytest.mark.parametrize(("accept", "coding"), [("gzip", "gzip"), ("deflate", "deflate"),
                                                ("deflate;q=0.5, gzip", "gzip"), ("identity", None)])
def test_the_answer_is_compressed_as_accept_encoding_asks(server, accept: str, coding: str | None) -> None:
    x = np.ones((1, 4), np.float32)
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]}
    # httpx would decode the answer itself: read the raw bytes
    with httpx.Client(timeout=10) as c:
        req = c.build_request("POST", f"{server.url}/v2/models/scale/infer", json=body,
                              headers={"Accept-Encoding": accept})
        r = c.send(req, stream=True)
        raw = b"".join(r.iter_raw())
    assert r.status_code == 200
    assert r.headers.get("content-encoding") == coding
    assert int(r.headers["content-length"]) == len(raw)
    plain = {"gzip": gzip.decompress, "deflate": zlib.decompress, None: bytes}[coding](raw)
    assert json.loads(plain)["outputs"] == _plain(server.url, x)


def test_a_decompression_bomb_is_a_413_and_the_server_keeps_serving(server) -> None:
    bomb = gzip.compress(b" " * (50 * LIMIT))  # 50 MiB of spaces in ~50 kB, under the limit as sent
    assert len(bomb) < LIMIT
    r = httpx.post(f"{server.url}/v2/models/scale/infer", content=bomb, timeout=10,
                   headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    assert r.status_code == 413 and "decompressed request body is over the limit" in r.json()["error"]
    other = httpx.post(f"{server.url}/v2/models/scale/infer", content=b"{}", timeout=10,
                       headers={"Content-Encoding": "br"})
    assert other.status_code == 415 and "gzip, deflate or identity" in other.json()["error"]
    assert len(_plain(server.url, np.ones((1, 4), np.float32))) == 1
