"""benchmarks/plan.py validate's arm selector (issue 27): ``--batching`` runs one arm of the matrix so a long-step
run splits under the exclusive lock; a bad value is refused before anything is measured."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "plan.py"


def _mod():
    spec = importlib.util.spec_from_file_location("plan_benchmark", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_batching_arms_are_parsed_and_bad_ones_refused() -> None:
    arms = _mod()._arms
    assert arms("off,on") == ["off", "on"] and arms("on") == ["on"] and arms(" off ") == ["off"]
    for bad in ("", "yes", "off,maybe"):
        with pytest.raises(SystemExit) as e:
            arms(bad)
        assert e.value.code == 2


def test_a_bad_arm_exits_2_with_one_line_before_measuring() -> None:
    p = subprocess.run([sys.executable, str(SCRIPT), "validate", "--models", "zoo:no-such-model", "--batching", "both"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == ["--batching takes off, on or off,on (got 'both')"]
