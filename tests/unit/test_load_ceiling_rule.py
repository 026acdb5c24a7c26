"""The decision rule of benchmarks/load_ceiling.py (issue 29): per-round ratios, met / not met / inconclusive."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "load_ceiling.py"


def _verdict():
    spec = importlib.util.spec_from_file_location("load_ceiling", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.verdict


def test_every_round_at_the_target_is_met() -> None:
    assert _verdict()([0.5, 0.61, 0.55, 0.52, 0.7], 0.5) == "met"


def test_a_median_below_the_target_is_not_met() -> None:
    assert _verdict()([0.45, 0.49, 0.6, 0.3, 0.48], 0.5) == "not met"


def test_a_median_at_the_target_with_a_round_below_is_inconclusive() -> None:
    assert _verdict()([0.49, 0.5, 0.6, 0.55, 0.51], 0.5) == "inconclusive"
