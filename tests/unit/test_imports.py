"""``import inferperf`` stays light; the curated public API is what __all__ says."""

import subprocess
import sys

import inferperf

HEAVY = ["onnxruntime", "onnx", "scipy", "plotly", "optuna", "locust", "torch", "openvino"]


def test_import_pulls_in_no_runtime():
    code = "import sys, inferperf, inferperf.cli; print(','.join(m for m in %r if m in sys.modules))" % HEAVY
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""


def test_all_is_curated_and_resolvable():
    assert sorted(inferperf.__all__) == sorted(set(inferperf.__all__))
    for name in inferperf.__all__:
        assert hasattr(inferperf, name), name
    assert {"bench", "Result", "load", "save", "BenchConfig", "UsageError"} <= set(inferperf.__all__)


def test_exit_codes_of_the_exception_tree():
    assert inferperf.UsageError("x").exit_code == 2
    assert inferperf.ModelError("x").exit_code == 2
    assert inferperf.BackendUnavailable("x").exit_code == 2
    assert inferperf.RuntimeFailure("x").exit_code == 1
    assert inferperf.GateFailed("x").exit_code == 3
