"""The infer front (issue 29): it takes exactly the paths Starlette's infer routes take, and nothing else."""

from __future__ import annotations

import pytest
from starlette.routing import Match, Route

from inferperf.serve.infer_route import infer_path_params

ROUTES = [Route("/v2/models/{model_name}/infer", lambda r: None, methods=["POST"]),
          Route("/v2/models/{model_name}/versions/{model_version}/infer", lambda r: None, methods=["POST"])]


def _starlette(path: str) -> dict[str, str] | None:
    scope = {"type": "http", "method": "POST", "path": path, "root_path": ""}
    for route in ROUTES:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return child["path_params"]
    return None


@pytest.mark.parametrize("path", [
    "/v2/models/m/infer", "/v2/models/stats/infer", "/v2/models/m/versions/2/infer", "/v2/models/a.b-c/versions/x/infer",
    "/v2/models//infer", "/v2/models/m/infer/", "/v2/models/m/versions//infer", "/v2/models/m/v/2/infer",
    "/v2/models/m/versions/2/3/infer", "/v2/models/infer", "/v2/model/m/infer", "/v2/models/m/ready", "/v2/models/m",
])  # fmt: skip
def test_the_front_takes_the_paths_starlette_routes_to_infer(path: str) -> None:
    assert infer_path_params(path) == _starlette(path)


def test_the_front_takes_the_infer_paths_and_refuses_others() -> None:
    assert infer_path_params("/v2/models/m/versions/2/infer") == {"model_name": "m", "model_version": "2"}
    assert infer_path_params("/v2/models/m/infer") == {"model_name": "m"}
    assert infer_path_params("/v2/models/m/config") is None
