"""``inferperf serve --mock-generate`` and ``inferperf load --api openai-chat`` as subprocesses (issue 30)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferperf", *args], capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ}, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.parametrize(("args", "line"), [
    (["--mock-profile", "p.yaml"], "--mock-profile / --mock-log need --mock-generate"),
    (["--mock-generate", "zoo:tiny"], "drop MODEL"),
    (["--mock-generate", "--mock-profile", "missing.yaml"], "--mock-profile missing.yaml: cannot read it"),
])
def test_mock_refusals_are_one_line_exit_2(args: list[str], line: str) -> None:
    p = _cli("serve", *args)
    assert p.returncode == 2 and line in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_bad_profile_value_names_the_key(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("max_active: 0\n")
    p = _cli("serve", "--mock-generate", "--mock-profile", str(f))
    assert p.returncode == 2 and "'max_active'" in p.stderr and "Traceback" not in p.stderr, p.stderr
