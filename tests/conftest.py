"""Shared test setup.

When ``CI=true``, a skipped test counts as a failure: every dependency the
suite needs is installed by ``.ci/run``, so a skip there hides a broken install.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_SKIPPED: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("CI", "").lower() == "true" and _SKIPPED:
        print(f"\nCI=true: {len(_SKIPPED)} skipped test(s) count as failures: {_SKIPPED[:5]}", file=sys.stderr)
        session.exitstatus = 1


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated zoo models go to one per-session cache folder, never the user's home."""
    cache = tmp_path_factory.getbasetemp() / "zoo-cache"
    monkeypatch.setenv("INFERPERF_CACHE_DIR", str(cache))


def light_model(name: str) -> Path:
    """Path of one of the onnx package's light models (constant weights: speed only)."""
    import importlib.util

    spec = importlib.util.find_spec("onnx")
    assert spec and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


def ort_dataset(name: str) -> Path:
    """Path of a tiny model shipped in ``onnxruntime/datasets``."""
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")
    assert spec and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / "datasets" / name


def erf_double_model(path: Path) -> Path:
    """A valid model whose op (Erf on float64) has no CPU kernel in ONNX Runtime: node 'erf0', opset 13."""
    from onnx import TensorProto, helper, save

    g = helper.make_graph(
        [helper.make_node("Erf", ["a"], ["c"], name="erf0")],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.DOUBLE, [2])],
        [helper.make_tensor_value_info("c", TensorProto.DOUBLE, [2])],
    )
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path
