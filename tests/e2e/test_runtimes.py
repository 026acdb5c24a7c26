"""The CLI across runtimes: ``bench --backend a,b,c`` comparisons, ``backends``, and a missing extra."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import requires_extra

ROOT = Path(__file__).resolve().parents[2]
NEEDS_OPENVINO, NEEDS_TORCH = requires_extra("openvino"), requires_extra("torch")
FAST = ["--warmup", "1", "--iterations", "5", "--duration-s", "0"]


def cli(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inferperf", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", **(env or {})}, stdin=subprocess.DEVNULL,
    )


def fake_missing(tmp_path: Path, package: str) -> dict[str, str]:
    """An environment where ``import PACKAGE`` fails, as on an install without the extra."""
    pkg = tmp_path / "shadow" / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"raise ImportError('No module named {package}')\n")
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(ROOT)])}


@NEEDS_OPENVINO
@NEEDS_TORCH
def test_three_runtimes_on_the_seeded_model_agree(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    p = cli("bench", "tests.models:seeded_cnn", "--backend", "onnxruntime,openvino,torch", "--repeat", "2",
            *FAST, "--json", "--output", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["backends"] == ["onnxruntime", "openvino", "torch"] and doc["reference"] == "onnxruntime"
    for name in doc["backends"]:
        a = doc["agreement"][name]
        assert a["agrees"] and a["cosine_min"] > 0.9999 and a["max_abs_error"] < 1e-3, (name, a)
        r = doc["results"][name]
        assert r["config"]["backend"] == name and r["config"]["repeat"] == 2
        assert len(r["metrics"]["throughput"]["per_run"]) == 2 and r["metrics"]["throughput"]["queries_per_s_ci95"]
        assert r["metrics"]["accuracy"]["output_agreement"]["reference_backend"] == "onnxruntime"
        assert r["config"]["workload"]["shapes"] == {"x": [1, 3, 32, 32]}
    assert doc["results"]["openvino"]["metrics"]["cold_start"]["phases"]["compile_ms"] > 0
    assert doc["models"]["torch"] == "tests.models:seeded_cnn" and doc["models"]["openvino"].endswith(".onnx")
    pids = {r["run"]["pids"][0] for r in doc["results"].values()}
    assert len(pids) == 3  # each runtime in its own process
    assert (out / "comparison.json").is_file() and len(list(out.glob("*-*.json"))) == 3
    assert "round 2/2" in p.stderr and "agrees with onnxruntime" in p.stderr
    # figures in significant digits, not raw floats such as 1.1492520570755005e-06 (issue 11)
    assert "max abs err" in p.stderr and not re.search(r"\d{7,}", p.stderr.replace(str(out), "")), p.stderr
    for name in ("openvino", "torch"):  # 2 runs: decided only if the intervals separate, else "too few runs"
        s = doc["vs_reference"][name]
        assert s["runs"] == 2 and (s["significant"] or s["too_few_runs"])


@NEEDS_TORCH
def test_onnx_file_with_the_torch_program_beside_it(tmp_path: Path) -> None:
    import torch

    from inferperf.backends.torch_backend import export_onnx, load_callable

    onnx_path = export_onnx("tests.models:seeded_cnn", tmp_path / "m.onnx")
    module, named = load_callable("tests.models:seeded_cnn")
    torch.export.save(torch.export.export(module, tuple(named.values())), str(tmp_path / "m.pt2"))
    p = cli("bench", str(onnx_path), "--backend", f"ort,torch={tmp_path / 'm.pt2'}", *FAST)
    assert p.returncode == 0, p.stderr
    assert "onnxruntime (ref)" in p.stdout and "agree" in p.stdout and "max abs error" in p.stdout
    p = cli("bench", str(onnx_path), "--backend", "onnxruntime,torch", *FAST)
    assert p.returncode == 2 and "torch=MODEL.pt2" in p.stderr and len(p.stderr.strip().splitlines()) == 1


@NEEDS_OPENVINO
def test_ppocr_det_onnxruntime_vs_openvino_side_by_side() -> None:
    p = cli("bench", "zoo:ppocr-det", "--shape", "x:1x3x96x96", "--backend", "onnxruntime,openvino",
            "--repeat", "2", "--warmup", "1", "--iterations", "3", "--duration-s", "0")
    assert p.returncode == 0, p.stderr
    for word in ("queries/s", "95 % CI", "p99 ms", "session create ms", "compile", "peak RSS MiB", "cosine (min)"):
        assert word in p.stdout, word
    assert "agree" in p.stdout


def test_missing_extra_names_the_install_command(tmp_path: Path) -> None:
    env = fake_missing(tmp_path, "openvino")
    p = cli("bench", "zoo:tiny-cnn", "--backend", "openvino", *FAST, env=env)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'inferperf[openvino]'" in lines[0]
    p = cli("bench", "zoo:tiny-cnn", "--backend", "onnxruntime,openvino", *FAST, env=env)
    assert p.returncode == 2 and "pip install 'inferperf[openvino]'" in p.stderr
    p = cli("backends", "--json", env=env)
    assert p.returncode == 0, p.stderr
    status = {s["name"]: s for s in json.loads(p.stdout)}
    assert not status["openvino"]["available"] and status["openvino"]["install"] == "pip install 'inferperf[openvino]'"
    assert status["onnxruntime"]["available"]


@NEEDS_OPENVINO
@NEEDS_TORCH
def test_backends_lists_versions_and_devices() -> None:
    p = cli("backends")
    assert p.returncode == 0, p.stderr
    for word in ("onnxruntime", "openvino", "torch", "CPUExecutionProvider", "available"):
        assert word in p.stdout
    p = cli("backends", "--json")
    status = {s["name"]: s for s in json.loads(p.stdout)}
    assert status["torch"]["available"] and "cpu" in status["torch"]["devices"] and status["torch"]["version"]
    assert status["openvino"]["available"] and "CPU" in status["openvino"]["devices"]


def test_bad_runtime_lists_exit_2() -> None:
    for spec, words in (("onnxruntime,tensorflow", "unknown runtime"), ("onnxruntime,ort", "twice"),
                        ("onnxruntime,null", "unknown runtime")):
        p = cli("bench", "zoo:tiny-cnn", "--backend", spec, *FAST)
        assert p.returncode == 2 and words in p.stderr, (spec, p.stderr)
