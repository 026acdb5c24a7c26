"""Model control at run time (issue 14, item 2): Triton's repository extension on ``inferperf serve
--model-repository DIR --model-control-mode explicit``: index, load, unload under traffic on another model."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest

from inferperf.serve.server import prepare_repository, start

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repository"
X = {"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": [0.5] * 32}]}


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A copy of the example repository (tests may break its files)."""
    dst = tmp_path / "repo"
    shutil.copytree(EXAMPLE, dst)
    return dst


@pytest.fixture()
def explicit(repo: Path):
    """The repository served with --model-control-mode explicit, only 'mlp' loaded at start."""
    app = prepare_repository(repo, mode="explicit", load_models=["mlp"])
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    try:
        yield handle, repo
    finally:
        handle.stop()


def _index(url: str) -> dict[tuple[str, str], str]:
    r = httpx.post(f"{url}/v2/repository/index", timeout=10)
    assert r.status_code == 200, r.text
    return {(e["name"], e["version"]): e["state"] for e in r.json()}


def test_index_load_and_unload(explicit) -> None:
    handle, _ = explicit
    url = handle.url
    assert _index(url) == {("mlp", "1"): "READY", ("mlp_triton", ""): "UNAVAILABLE", ("scale", ""): "UNAVAILABLE"}
    assert httpx.post(f"{url}/v2/models/scale/infer", json=X, timeout=10).status_code == 404
    r = httpx.post(f"{url}/v2/repository/models/mlp_triton/load", timeout=120)
    assert r.status_code == 200, r.text
    assert _index(url)[("mlp_triton", "2")] == "READY"
    assert httpx.post(f"{url}/v2/models/mlp_triton/versions/1/infer", json=X, timeout=10).status_code == 200
    r = httpx.post(f"{url}/v2/repository/models/mlp_triton/unload", timeout=120)
    assert r.status_code == 200, r.text
    assert httpx.post(f"{url}/v2/models/mlp_triton/infer", json=X, timeout=10).status_code == 404
    assert httpx.post(f"{url}/v2/repository/models/mlp_triton/unload", timeout=10).status_code == 404
    ready = httpx.post(f"{url}/v2/repository/index", json={"ready": True}, timeout=10).json()
    assert [(e["name"], e["version"], e["state"]) for e in ready] == [("mlp", "1", "READY")]
    assert ready[0]["rss_bytes"] >= 0  # the resident memory its load added


@pytest.mark.parametrize(("name", "status", "text"), [
    ("..", 400, "is not a plain name"), ("%2e%2e", 400, "is not a plain name"), ("a.b..c", 400, "is not a plain name"),
    ("..%2fescaped", 404, "no route"),  # decodes to '../escaped': two path segments, no route matches
])
def test_traversal_names_are_refused_and_never_opened(explicit, name: str, status: int, text: str) -> None:
    """Raw request paths (http.client sends them as given; httpx would normalise '..' away)."""
    import http.client
    import json

    handle, repo = explicit
    (repo.parent / "escaped").mkdir()
    conn = http.client.HTTPConnection("127.0.0.1", handle.port, timeout=10)
    try:
        conn.request("POST", f"/v2/repository/models/{name}/load")
        r = conn.getresponse()
        got, doc = r.status, json.loads(r.read())
    finally:
        conn.close()
    assert got == status and text in doc["error"], (got, doc)
    assert "escaped" not in handle.app.versions


def test_failed_reload_leaves_the_serving_version_untouched(explicit) -> None:
    handle, repo = explicit
    (repo / "mlp" / "model.onnx").write_bytes(b"corrupt")
    r = httpx.post(f"{handle.url}/v2/repository/models/mlp/load", timeout=60)
    assert r.status_code == 400 and "failed to load 'mlp'" in r.json()["error"]
    r = httpx.post(f"{handle.url}/v2/models/mlp/infer", json=X, timeout=10)
    assert r.status_code == 200  # the version loaded at start still answers
    assert _index(handle.url)[("mlp", "1")] == "READY"


def test_unload_and_load_under_traffic(explicit) -> None:
    """Bounded traffic (<= 2,000 requests each, <= 60 s) to 'mlp' and to 'scale' while 'scale' is loaded and
    unloaded five times: no request to 'mlp' fails; every request to 'scale' gets an answer: 200, 503 (not
    loaded yet / unloading) or 404 (gone), never another error, a dropped connection or a hang."""
    handle, _ = explicit
    url = handle.url
    stop = threading.Event()
    x4 = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    seen: dict[str, list[int]] = {"mlp": [], "scale": []}

    def traffic(name: str, body: dict) -> None:
        with httpx.Client(timeout=10) as c:
            end = time.monotonic() + 60
            while not stop.is_set() and len(seen[name]) < 2000 and time.monotonic() < end:
                seen[name].append(c.post(f"{url}/v2/models/{name}/infer", json=body).status_code)

    threads = [threading.Thread(target=traffic, args=("mlp", X)), threading.Thread(target=traffic, args=("scale", x4))]
    for th in threads:
        th.start()
    try:
        with httpx.Client(timeout=30) as c:
            for _ in range(5):
                assert c.post(f"{url}/v2/repository/models/scale/load").status_code == 200
                assert c.post(f"{url}/v2/models/scale/infer", json=x4).status_code == 200
                # let the traffic reach it: the second answer counted from here was sent after the load, so it
                # is a 200 (by order, not by a sleep that a loaded machine may outlast)
                seen_before, deadline = len(seen["scale"]), time.monotonic() + 30
                while len(seen["scale"]) < seen_before + 2 and time.monotonic() < deadline:
                    time.sleep(0.005)
                assert len(seen["scale"]) >= seen_before + 2, "no traffic to 'scale' within 30 s"
                assert c.post(f"{url}/v2/repository/models/scale/unload").status_code == 200
                assert c.post(f"{url}/v2/models/scale/infer", json=x4).status_code == 404
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=30)
    assert seen["mlp"] and set(seen["mlp"]) == {200}
    assert set(seen["scale"]) <= {200, 503, 404} and 200 in seen["scale"]


def test_two_concurrent_loads_of_one_model_load_it_once(explicit) -> None:
    handle, _ = explicit
    app = handle.app
    results: list[int] = []

    def load() -> None:
        results.append(httpx.post(f"{handle.url}/v2/repository/models/scale/load", timeout=120).status_code)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert results == [200, 200]
    assert list(app.versions["scale"]) == ["1"]
    served = app.versions["scale"]["1"]
    # one load: a second one would have replaced the model object (and closed this one)
    r = httpx.post(f"{handle.url}/v2/models/scale/infer",
                   json={"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]}, timeout=10)
    assert r.status_code == 200 and app.versions["scale"]["1"] is served and served.ready


def test_mode_none_refuses_the_api(repo: Path) -> None:
    app = prepare_repository(repo)
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    try:
        r = httpx.post(f"{handle.url}/v2/repository/models/scale/unload", timeout=10)
        assert r.status_code == 400 and "--model-control-mode explicit" in r.json()["error"]
        assert httpx.post(f"{handle.url}/v2/models/scale/infer",
                          json={"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}]},
                          timeout=10).status_code == 200
    finally:
        handle.stop()


def test_max_loaded_models_unloads_the_least_recently_used_and_index_shows_memory(repo: Path) -> None:
    app = prepare_repository(repo, mode="explicit", load_models=["mlp", "scale"], max_loaded_models=2)
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    x4 = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    try:
        url = handle.url
        assert httpx.post(f"{url}/v2/models/mlp/infer", json=X, timeout=10).status_code == 200
        time.sleep(0.01)
        assert httpx.post(f"{url}/v2/models/scale/infer", json=x4, timeout=10).status_code == 200  # mlp is now LRU
        entries = httpx.post(f"{url}/v2/repository/index", json={"ready": True}, timeout=10).json()
        assert {e["name"] for e in entries} == {"mlp", "scale"}
        assert all(isinstance(e["rss_bytes"], int) and e["rss_bytes"] >= 0 for e in entries)
        assert httpx.post(f"{url}/v2/repository/models/mlp_triton/load", timeout=120).status_code == 200
        assert sorted(app.versions) == ["mlp_triton", "scale"]
        index = {(e["name"], e["state"]) for e in httpx.post(f"{url}/v2/repository/index", timeout=10).json()}
        assert ("mlp", "UNAVAILABLE") in index and ("mlp_triton", "READY") in index
        assert httpx.post(f"{url}/v2/models/mlp/infer", json=X, timeout=10).status_code == 404
    finally:
        handle.stop()
