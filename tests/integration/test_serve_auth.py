"""``--api-key``: a bearer key on every route but the health probes (and /metrics unless --metrics-auth)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from unittest import mock

import httpx
import pytest

from inferperf.serve.server import prepare_repository, start

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repository"
KEY = "s3cret-key"
X = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}


@pytest.fixture(scope="module")
def keyed():
    """The example repository (explicit mode, 'scale' loaded) behind --api-key, /metrics open."""
    app = prepare_repository(EXAMPLE, mode="explicit", load_models=["scale"])
    app.require_api_key(KEY)
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/v2/models/scale/infer"), ("GET", "/v2/models/scale"), ("GET", "/v2"), ("GET", "/v2/models/stats"),
    ("POST", "/v2/repository/index"), ("POST", "/v2/repository/models/mlp/load"), ("GET", "/openapi.json"),
    ("GET", "/v2/models/nope"),
])
def test_every_route_but_health_needs_the_key(keyed, method: str, path: str) -> None:
    url = keyed.url + path
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": f"Bearer {KEY}x"}):
        r = httpx.request(method, url, json=X if method == "POST" else None, headers=headers, timeout=10)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", (headers, r.text)
        assert "API key" in r.json()["error"]
    r = httpx.request(method, url, json=X if method == "POST" else None, headers={"Authorization": f"Bearer {KEY}"},
                      timeout=60)
    assert r.status_code != 401


def test_health_and_metrics_stay_open(keyed) -> None:
    for path in ("/v2/health/live", "/v2/health/ready", "/metrics"):
        assert httpx.get(keyed.url + path, timeout=10).status_code == 200, path


def test_the_key_is_compared_in_constant_time(keyed) -> None:
    """hmac.compare_digest decides every request (not ==, which stops at the first differing byte)."""
    import hmac

    with mock.patch("inferperf.serve.auth.hmac.compare_digest", wraps=hmac.compare_digest) as spy:
        assert httpx.get(keyed.url + "/v2", headers={"Authorization": f"Bearer {KEY}"}, timeout=10).status_code == 200
        assert httpx.get(keyed.url + "/v2", headers={"Authorization": "Bearer nope"}, timeout=10).status_code == 401
    assert spy.call_count == 2


def test_metrics_auth_protects_metrics(tmp_path: Path) -> None:
    app = prepare_repository(EXAMPLE, mode="explicit", load_models=["scale"])
    app.require_api_key(KEY, metrics_auth=True)
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    try:
        assert httpx.get(handle.url + "/metrics", timeout=10).status_code == 401
        assert httpx.get(handle.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=10).status_code == 200
        assert httpx.get(handle.url + "/v2/health/ready", timeout=10).status_code == 200
    finally:
        handle.stop()


@pytest.mark.parametrize(("args", "env", "text"), [
    (["--api-key", " "], {}, "--api-key is empty"),
    (["--metrics-auth"], {}, "--metrics-auth needs --api-key"),
    ([], {"INFERPERF_API_KEY": " "}, "--api-key is empty"),  # click treats an empty variable as unset
])
def test_auth_flag_errors_exit_2_before_loading(args: list[str], env: dict[str, str], text: str) -> None:
    import os

    proc = subprocess.run([sys.executable, "-m", "inferperf", "serve", "--model-repository", str(EXAMPLE), *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and text in proc.stderr, proc.stderr


def test_access_log_has_one_json_line_per_request(tmp_path: Path) -> None:
    """--access-log: one JSON object per request, refused ones too, with the infer fields on infers."""
    import json

    log = tmp_path / "access.jsonl"
    app = prepare_repository(EXAMPLE, mode="explicit", load_models=["scale"])
    app.require_api_key(KEY)
    app.log_access(log)
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    try:
        ok = httpx.post(f"{handle.url}/v2/models/scale/infer", json=X, timeout=10,
                        headers={"Authorization": f"Bearer {KEY}", "X-Request-Id": "abc-1"})
        assert ok.status_code == 200
        assert httpx.post(f"{handle.url}/v2/models/scale/infer", json=X, timeout=10).status_code == 401
        assert httpx.get(f"{handle.url}/v2/health/ready", timeout=10).status_code == 200
    finally:
        handle.stop()
        app.access_log.close()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    infer = [r for r in lines if r["request_id"] == "abc-1"]
    assert len(infer) == 1
    r = infer[0]
    assert (r["method"], r["path"], r["status"], r["model"], r["version"], r["rows"]) == (
        "POST", "/v2/models/scale/infer", 200, "scale", "1", 1)
    assert r["bytes_in"] == len(ok.request.content) and r["bytes_out"] == int(ok.headers["content-length"])  # as sent (httpx asks gzip: issue 41 item 4)
    assert r["queue_ms"] >= 0 and r["compute_ms"] > 0 and r["ms"] >= r["compute_ms"]
    assert r["client"].startswith("127.0.0.1:") and r["ts"].endswith("+00:00")
    refused = [x for x in lines if x["status"] == 401]
    assert len(refused) == 1 and "model" not in refused[0] and refused[0]["request_id"]
    assert any(x["path"] == "/v2/health/ready" and x["status"] == 200 for x in lines)
