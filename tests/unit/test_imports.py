"""``import inferperf`` stays light; the curated public API is what __all__ says."""

import subprocess
import sys

import inferperf

#: DESIGN: `import inferperf` imports no runtime (onnxruntime, openvino, torch), nor scipy, plotly, optuna,
#: locust or sqlalchemy (the history store), so worker processes start fast; onnx and pynvml are loaded only by the functions that need them.
HEAVY = ["onnxruntime", "onnx", "openvino", "torch", "scipy", "plotly", "optuna", "locust", "pynvml", "sqlalchemy"]
#: the modules every process imports first: the package, the CLI, and the base pieces a worker reads
LIGHT = ["inferperf", "inferperf.cli", "inferperf.zoo", "inferperf.system", "inferperf.config", "inferperf.results"]


def test_import_stays_light():
    """The one "import stays light" check: importing each module in turn pulls in none of HEAVY."""
    code = (
        "import importlib, sys\n"
        f"for m in {LIGHT!r}:\n"
        "    importlib.import_module(m)\n"
        f"    print(m, sorted(set({HEAVY!r}) & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    heavy = [line for line in out.stdout.splitlines() if not line.endswith(" []")]
    assert heavy == [], f"first module that pulled a heavy import in: {heavy[:1]}"


def test_all_is_curated_and_resolvable():
    assert sorted(inferperf.__all__) == sorted(set(inferperf.__all__))
    for name in inferperf.__all__:
        assert hasattr(inferperf, name), name
    assert {"bench", "Result", "load", "save", "BenchConfig", "UsageError"} <= set(inferperf.__all__)
    assert {"history_add", "history_check"} <= set(inferperf.__all__)


def test_exit_codes_of_the_exception_tree():
    assert inferperf.UsageError("x").exit_code == 2
    assert inferperf.ModelError("x").exit_code == 2
    assert inferperf.BackendUnavailable("x").exit_code == 2
    assert inferperf.RuntimeFailure("x").exit_code == 1
    assert inferperf.GateFailed("x").exit_code == 3
