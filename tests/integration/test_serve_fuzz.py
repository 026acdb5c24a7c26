"""Fuzzing (issue 14): schemathesis generates requests from ``/openapi.json`` for every route, a bounded
number per route, against a server of float-input models; none may get a 5xx, and the server must still
be ready and answer a valid request afterwards."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from inferperf.serve.server import prepare_repository, start

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repository"
MAX_EXAMPLES = 30  # per route: ~20 routes, well under a minute here


@pytest.fixture(scope="module")
def fuzz_server():
    """The example repository (explicit mode: 'scale' and 'mlp' loaded) on an ephemeral 127.0.0.1 port."""
    app = prepare_repository(EXAMPLE, mode="explicit", load_models=["scale", "mlp"])
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    try:
        yield handle
    finally:
        handle.stop()


def _pin_targets(case) -> None:
    """Aim the generated path parameters at real models: the fuzz reaches each model's own validation
    (not only the 404 of a random name), and load/unload only touch a third model."""
    params = dict(case.path_parameters or {})
    if case.path.startswith("/v2/repository/models/"):
        params["model_name"] = "mlp_triton"
    elif "model_name" in params:
        params["model_name"] = "mlp"
        if "model_version" in params:
            params["model_version"] = "1"
    case.path_parameters = params


def test_no_request_gets_a_server_error(fuzz_server) -> None:
    """Every operation of /openapi.json, MAX_EXAMPLES generated requests each (hypothesis, derandomized):
    no 5xx. Driven through schemathesis' strategies, not its pytest plugin, so it runs on any pytest."""
    from hypothesis import given

    schema = schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15  # every route the server documents

    failures: list[str] = []
    for op in operations:
        @given(case=op.as_strategy())
        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
        def run(case) -> None:
            _pin_targets(case)
            response = case.call(timeout=30)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:200]}")

        run()
    assert failures == []


def test_still_ready_and_answering_after_the_fuzz(fuzz_server) -> None:
    assert httpx.get(f"{fuzz_server.url}/v2/health/ready", timeout=10).status_code == 200
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    r = httpx.post(f"{fuzz_server.url}/v2/models/scale/infer", json=body, timeout=10)
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [2.0, 4.0, 6.0, 8.0]
