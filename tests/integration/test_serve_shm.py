"""Triton's system shared memory on the HTTP server (issue 41 item 1): regions registered from /dev/shm, inputs
read from them and outputs written into them; the opt-in flag, the key rule and every bound refused in one line
(400/403/404) with the server serving on; regions unmapped on unregister and at shutdown, the segment left to
its owner."""

from __future__ import annotations

import mmap
import os
import uuid
from pathlib import Path

import httpx
import numpy as np
import pytest

from inferperf.config import BenchConfig
from inferperf.serve.options import ServeOptions
from inferperf.serve.server import prepare, start
from tests.models import seeded_mlp_onnx

X = np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seeded_mlp_onnx(tmp_path_factory.mktemp("shm") / "mlp.onnx")


def _serve(mlp: Path, allow: bool):
    app = prepare(str(mlp), BenchConfig.model_validate({"warmup": {"iterations": 1}}), ServeOptions(), name="mlp")
    if allow:
        app.allow_client_shm()
    return start(app, "127.0.0.1", 0, ready_timeout_s=60)


@pytest.fixture()
def segment():
    """A 4 KiB POSIX segment (/dev/shm/inferperf-test-*), unlinked by the test (the server never unlinks it)."""
    key = f"/inferperf-test-{uuid.uuid4().hex[:8]}"
    path = "/dev/shm" + key
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    mm = mmap.mmap(fd, 4096)
    os.close(fd)
    try:
        yield key, mm
    finally:
        mm.close()
        os.unlink(path)


def _plain(url: str) -> np.ndarray:
    body = {"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": X.ravel().tolist()}]}
    out = httpx.post(f"{url}/v2/models/mlp/infer", json=body, timeout=10).json()["outputs"][0]
    return np.array(out["data"], np.float32).reshape(out["shape"])


def test_inputs_from_and_outputs_into_a_region_answer_as_the_body_does(mlp: Path, segment) -> None:
    key, mm = segment
    mm[0:128] = X.tobytes()
    h = _serve(mlp, allow=True)
    try:
        url = h.url
        assert "system_shared_memory" in httpx.get(f"{url}/v2", timeout=10).json()["extensions"]
        for name, off, size in (("in", 0, 128), ("out", 1024, 2048)):
            r = httpx.post(f"{url}/v2/systemsharedmemory/region/{name}/register", timeout=10,
                           json={"key": key, "offset": off, "byte_size": size})
            assert r.status_code == 200, r.text
        assert httpx.get(f"{url}/v2/systemsharedmemory/status", timeout=10).json() == [
            {"name": "in", "key": key, "offset": 0, "byte_size": 128},
            {"name": "out", "key": key, "offset": 1024, "byte_size": 2048}]
        body = {"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32",
                            "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 128}}],
                "outputs": [{"name": "y", "parameters": {"shared_memory_region": "out",
                                                         "shared_memory_byte_size": 2048}}]}
        r = httpx.post(f"{url}/v2/models/mlp/infer", json=body, timeout=10)
        assert r.status_code == 200, r.text
        (out,) = r.json()["outputs"]
        assert "data" not in out and "parameters" not in out  # in the region (as Triton's clients expect)
        n = 4 * int(np.prod(out["shape"]))
        got = np.frombuffer(mm[1024:1024 + n], np.float32).reshape(out["shape"])
        np.testing.assert_array_equal(got, _plain(url).reshape(out["shape"]))
        # every bound, each a one-line 400 naming the tensor, and the server serves on
        for params, text in (({"shared_memory_region": "in", "shared_memory_byte_size": 64}, "needs 128 bytes"),
                             ({"shared_memory_region": "in", "shared_memory_byte_size": 128,
                               "shared_memory_offset": 8}, "outside region 'in'"),
                             ({"shared_memory_region": "nope", "shared_memory_byte_size": 128}, "not registered")):
            bad = {"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "parameters": params}]}
            r = httpx.post(f"{url}/v2/models/mlp/infer", json=bad, timeout=10)
            assert r.status_code == 400 and "input 'x'" in r.json()["error"] and text in r.json()["error"], r.text
        for region, doc, text in (("big", {"key": key, "offset": 4000, "byte_size": 200}, "past the end"),
                                  ("evil", {"key": "/../etc/passwd", "offset": 0, "byte_size": 8}, "no path"),
                                  ("evil2", {"key": "a/b", "offset": 0, "byte_size": 8}, "no path"),
                                  ("gone", {"key": "/inferperf-no-such", "offset": 0, "byte_size": 8}, "unable to open"),
                                  ("in", {"key": key, "offset": 0, "byte_size": 8}, "already in manager")):
            r = httpx.post(f"{url}/v2/systemsharedmemory/region/{region}/register", json=doc, timeout=10)
            assert r.status_code == 400 and text in r.json()["error"], (region, r.text)
        assert httpx.get(f"{url}/v2/systemsharedmemory/region/zzz/status", timeout=10).status_code == 404
        assert httpx.post(f"{url}/v2/systemsharedmemory/region/in/unregister", timeout=10).status_code == 200
        assert [r["name"] for r in httpx.get(f"{url}/v2/systemsharedmemory/status", timeout=10).json()] == ["out"]
        mapping = h.app.shm.regions["out"].mapping
        assert np.array_equal(_plain(url), _plain(url))  # still serving
    finally:
        h.stop()
    assert mapping.closed  # unmapped at shutdown
    assert os.path.exists("/dev/shm" + key)  # and never unlinked


def test_without_the_flag_every_route_and_parameter_is_refused(mlp: Path, segment) -> None:
    key, _ = segment
    h = _serve(mlp, allow=False)
    try:
        url = h.url
        assert "system_shared_memory" not in httpx.get(f"{url}/v2", timeout=10).json()["extensions"]
        r = httpx.post(f"{url}/v2/systemsharedmemory/region/in/register", timeout=10,
                       json={"key": key, "offset": 0, "byte_size": 128})
        assert r.status_code == 403 and "--allow-client-shm" in r.json()["error"]
        assert httpx.get(f"{url}/v2/systemsharedmemory/status", timeout=10).status_code == 403
        body = {"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32",
                            "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 128}}]}
        r = httpx.post(f"{url}/v2/models/mlp/infer", json=body, timeout=10)
        assert r.status_code == 403 and "--allow-client-shm" in r.json()["error"]
    finally:
        h.stop()


def test_an_unmap_waits_for_the_last_view() -> None:
    """mmap.close() fails while a numpy view is alive: unregister waits until the view is gone, then unmaps."""
    import asyncio

    asyncio.run(_unmap_waits())


async def _unmap_waits() -> None:
    import asyncio

    from inferperf.serve.shm import SharedMemory

    key = f"/inferperf-test-{uuid.uuid4().hex[:8]}"
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 256)
    os.close(fd)
    try:
        shm = SharedMemory(allowed=True)
        shm.register("r", key, 0, 256)
        view = shm.read("x", {"shared_memory_region": "r", "shared_memory_byte_size": 64}, "FP32", (16,))
        mapping = shm.regions["r"].mapping
        task = asyncio.ensure_future(shm.unregister("r"))
        await asyncio.sleep(0.05)
        assert not task.done() and not mapping.closed and "r" not in shm.regions  # gone for new requests
        del view
        await asyncio.wait_for(task, 2)
        assert mapping.closed
    finally:
        os.unlink("/dev/shm" + key)
