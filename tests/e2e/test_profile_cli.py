"""Issue 16 (profile): the CLI as a subprocess: a profile Result written, --diff against itself, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferperf", *args], capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)


def test_profile_writes_result_and_diffs_itself(tmp_path):
    out = tmp_path / "p.json"
    p = _run("profile", "zoo:ppocr-det", "--shape", "x:1x3x160x160", "--runs", "4", "--warmup-runs", "1",
             "--duration-s", "0.3", "--intra-op-num-threads", "1", "--trace-dir", str(tmp_path), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "(outside kernels)" in p.stdout and "Amdahl" in p.stdout and "trace (open in" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["kind"] == "profile" and doc["metrics"]["profile"]["runs"] == 4
    d = _run("profile", "--diff", str(out), "--diff", str(out))
    assert d.returncode == 0, d.stderr
    assert "slower" not in d.stdout and "faster" not in d.stdout
    short = _run("profile", "--diff", str(out), str(out), "--by", "family")  # the `--diff A B` form, by family
    assert short.returncode == 0, short.stderr
    assert "Conv" in short.stdout and "FusedConv" not in short.stdout and "slower" not in short.stdout


def test_profile_usage_errors_exit_2(tmp_path):
    assert _run("profile").returncode == 2
    assert _run("profile", "--diff", str(tmp_path / "missing.json"), "--diff", "x.json").returncode == 2
    assert _run("profile", "zoo:ppocr-det", "--backend", "null").returncode == 2
    bad_by = _run("profile", "--diff", "a.json", "b.json", "--by", "layer")
    assert bad_by.returncode == 2 and "--by layer: use op or family" in bad_by.stderr
