"""Missing extras and backend aliases (issue 10 item 7): one line naming the fix, exit 2; aliases are one case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferperf import BenchConfig, backends
from inferperf.backends import check_available, install_hint
from inferperf.backends.base import canonical_name
from inferperf.errors import BackendUnavailable, UsageError
from tests.conftest import requires_extra

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--warmup", "1", "--iterations", "5", "--duration-s", "0"]
SPEC = "tests.models:seeded_cnn"


def cli(*args: str, block: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``inferperf ARGS`` in a fresh process; ``block`` makes ``import BLOCK`` fail there, as without its extra."""
    code = ("import sys\n"
            + (f"sys.modules[{block!r}] = None  # import {block} raises ImportError, as when not installed\n" if block else "")
            + "from inferperf.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, stdin=subprocess.DEVNULL)


def one_error_line(p: subprocess.CompletedProcess) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ") and "internal error" not in lines[0], lines[0]
    return lines[0]


def test_aliases_are_normalised_when_the_config_is_parsed() -> None:
    for alias, name in (("ort", "onnxruntime"), ("OV", "openvino"), (" PyTorch ", "torch"), ("ONNXRuntime", "onnxruntime")):
        assert BenchConfig(backend=alias).backend == name
        assert BenchConfig(backend=alias) == BenchConfig(backend=name)  # so the same case_key
        assert canonical_name(alias) == name


def test_check_available_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError, as when not installed
    assert not backends.runtime_installed("torch")
    with pytest.raises(BackendUnavailable, match=r"pip install 'inferperf\[torch\]'") as e:
        check_available(["onnxruntime", "pytorch"])
    assert "\n" not in str(e.value) and e.value.exit_code == 2
    monkeypatch.setattr(backends, "runtime_installed", lambda package: package != "torch")
    with pytest.raises(BackendUnavailable, match="exported with PyTorch"):
        check_available(["onnxruntime", "openvino"], SPEC)  # the export to ONNX needs torch too
    check_available(["onnxruntime", "openvino"], "zoo:tiny-cnn")  # nothing asked of torch


def test_module_function_needs_the_torch_backend() -> None:
    for backend in ("onnxruntime", "ov", "null"):
        with pytest.raises(UsageError, match="--backend torch"):
            check_available([backend], SPEC)
    assert install_hint("openvino") == "pip install 'inferperf[openvino]'"


def test_compare_without_torch_is_one_line_naming_the_extra() -> None:
    p = cli("bench", SPEC, "--backend", "onnxruntime,torch", *FAST, block="torch")
    assert p.returncode == 2
    assert "pip install 'inferperf[torch]'" in one_error_line(p)


def test_single_backend_without_torch_is_one_line_naming_the_extra() -> None:
    p = cli("bench", SPEC, "--backend", "pytorch", *FAST, block="torch")
    assert p.returncode == 2
    assert "pip install 'inferperf[torch]'" in one_error_line(p)


def test_module_function_on_onnxruntime_says_use_torch() -> None:
    p = cli("bench", SPEC, *FAST)
    line = one_error_line(p)
    assert p.returncode == 2 and "--backend torch" in line and "not found" not in line


def test_backends_table_shows_the_extra_in_the_pip_hint(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "openvino"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named openvino')\n")
    p = cli("backends", env={"PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(ROOT)])})
    assert p.returncode == 0, p.stderr
    assert "pip install 'inferperf[openvino]'" in p.stdout  # rich markup used to swallow [openvino]


@requires_extra("openvino")
def test_ov_alias_is_the_openvino_case(tmp_path: Path) -> None:
    docs = {}
    for name in ("ov", "openvino"):
        p = cli("bench", "zoo:tiny-cnn", "--backend", name, *FAST, "--json")
        assert p.returncode == 0, p.stderr
        docs[name] = json.loads(p.stdout)
    assert docs["ov"]["config"]["backend"] == "openvino"
    assert docs["ov"]["case_key"] == docs["openvino"]["case_key"]
    assert docs["ov"]["config"]["session"]["effective"]["static_shapes"] == {"x": [1, 3, 32, 32]}  # compiled static
