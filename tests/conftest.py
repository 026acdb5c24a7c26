"""Shared test setup.

Optional extras: a test that needs a runtime the core install lacks (openvino,
torch) carries :func:`requires_extra`, so a plain install skips it with the
``pip install`` that brings it; the ``test`` extra installs them all.

When ``CI=true``, a skipped test counts as a failure: ``.ci/run`` installs every
dependency the suite needs (the ``test`` extra, the PP-OCR models, Chromium),
so a skip there hides a broken install. The hooks below turn such a skip into a
failed test (or a collection error) that names the skip reason. A test whose
dependency ``.ci/run`` does not install is marked ``ci_may_skip`` and may still skip.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]  # tests/unit/test_ci_skips.py runs the CI hook in an inner pytest


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_skip_under_ci(report: pytest.TestReport | pytest.CollectReport, may_skip: bool) -> None:
    if _ci() and report.skipped and not hasattr(report, "wasxfail") and not may_skip:
        reason = _skip_reason(report).removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"CI=true: skipped ({reason}), but .ci/run installs what this test needs: fix the install"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    """Under ``CI=true``, a skipped test (not ``ci_may_skip``, not xfail) is reported as failed."""
    report = yield
    _fail_skip_under_ci(report, item.get_closest_marker("ci_may_skip") is not None)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> pytest.CollectReport:
    """Under ``CI=true``, a module skipped at collection (``pytest.importorskip`` at top level) is an error."""
    report = yield
    _fail_skip_under_ci(report, False)
    return report


def has_module(name: str) -> bool:
    """True when ``import NAME`` can find the module (without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent missing, or sys.modules[name] is None
        return False


def requires_extra(extra: str, module: str | None = None) -> pytest.MarkDecorator:
    """Skip (with the install command as the reason) when extra ``EXTRA``'s runtime is not installed.

    Args:
        extra: the inferperf extra, e.g. ``torch`` or ``openvino``.
        module: the module that extra provides (default: the extra's name).
    """
    module = module or extra
    return pytest.mark.skipif(
        not has_module(module),
        reason=f"needs {module}, not installed: pip install 'inferperf[{extra}]' (the test extra includes it)",
    )


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                    request: pytest.FixtureRequest) -> None:
    """Generated zoo models go to one per-session cache folder, never the user's home; plan validations to one
    file per test (a validation in one test is not another's 'last measured')."""
    cache = tmp_path_factory.getbasetemp() / "zoo-cache"
    monkeypatch.setenv("INFERPERF_CACHE_DIR", str(cache))
    import hashlib

    name = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]
    monkeypatch.setenv("INFERPERF_PLAN_VALIDATIONS", str(tmp_path_factory.getbasetemp() / "validations" / f"{name}.json"))


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


_MAIN_ALTSTACK: list[tuple[int, int, int] | None] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Record the main thread's alternate signal stack (pytest's faulthandler has installed it by now)."""
    from inferperf.backends import altstack

    _MAIN_ALTSTACK[:] = [altstack.current()]


@pytest.fixture(autouse=True)
def _main_thread_signal_stack_kept(request: pytest.FixtureRequest):
    """Every test leaves the main thread's alternate signal stack as the session found it.

    A runtime that swaps it and later unmaps its own (OpenVINO's CPU plugin, dying on another thread)
    made the next signal on the main thread kill the whole test process with SIGSEGV, no test failing
    and faulthandler silent (inferperf/backends/altstack.py). Checked after each test (two syscalls),
    so the test that swapped it is the one that fails.
    """
    import threading

    from inferperf.backends import altstack

    yield
    if threading.current_thread() is not threading.main_thread():
        return
    now = altstack.current()
    if _MAIN_ALTSTACK and now != _MAIN_ALTSTACK[0]:
        _MAIN_ALTSTACK[0] = now  # report once, not for every later test
        pytest.fail(f"{request.node.nodeid} changed the main thread's alternate signal stack to {now}:"
                    " wrap the runtime call in inferperf.backends.altstack.preserve_sigaltstack()")
