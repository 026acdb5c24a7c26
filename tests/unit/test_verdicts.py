"""Speed verdicts from interleaved runs (issue 10 item 9, issue 11): separated intervals decide, overlapping ones
do not, too few runs say so with the rounds paired, and intervals are printed raw, never clipped at 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferperf.cli.runtimes import verdict as runtime_verdict
from inferperf.measure.speedup import compare_throughput, describe, format_ci, raw_ci, sig
from inferperf.optimize.verdict import format_speedup, speedup, verdict
from inferperf.results.io import load
from inferperf.results.model import Result

RT = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "rt"
ACCURATE = {"passed": True, "predictive": True}


def result_with_runs(per_run: list[float]) -> Result:
    """A pooled Result (the runtime comparison fixture) with its run-level throughputs replaced."""
    r = load(next(RT.glob("onnxruntime-*.json")))
    tp = r.metrics.throughput
    tp.per_run = list(per_run)
    tp.queries_per_s = sum(per_run) / len(per_run)
    tp.queries_per_s_ci95 = [max(0.0, x) for x in raw_ci(per_run)]  # as aggregate() stored them: clipped
    return r


def test_separated_intervals_are_faster_and_slower():
    ref = result_with_runs([100.0, 102.0, 98.0, 101.0, 99.0])
    fast = result_with_runs([150.0, 149.0, 152.0, 151.0, 148.0])
    slow = result_with_runs([60.0, 61.0, 59.0, 62.0, 58.0])
    s = speedup(ref, fast)
    assert s["significant"] and s["direction"] == "faster" and s["ratio"] == pytest.approx(1.5)
    assert verdict("int8-static", s, ACCURATE, ["avx2"]) == ("FASTER", [])
    assert format_speedup(s) == "1.50x faster"
    s = speedup(ref, slow)
    assert s["significant"] and s["direction"] == "slower" and s["slower_rounds"] == 5
    word, reasons = verdict("int8-static", s, ACCURATE, ["avx2"])
    assert word == "SLOWER" and "no VNNI" in reasons[0]
    assert format_speedup(s) == "0.60x slower"


def test_overlapping_intervals_with_enough_runs_are_within_noise():
    ref = result_with_runs([100.0, 120.0, 90.0, 110.0])
    var = result_with_runs([95.0, 125.0, 85.0, 105.0])
    s = speedup(ref, var)
    assert not s["significant"] and not s["too_few_runs"] and s["runs"] == 4
    assert s["slower_rounds"] == 3 and s["faster_rounds"] == 1  # paired by round, not by sorted value
    word, reasons = verdict("fp16", s, ACCURATE, ["avx2"])
    assert word == "NO GAIN" and "within noise" in reasons[0] and "slower in 3 of 4 rounds" in reasons[0]
    assert format_speedup(s) == "0.98x (within noise; slower in 3 of 4 rounds)"


def test_two_runs_slower_in_both_rounds_is_too_few_not_within_noise():
    """The reported case: a runtime 4-8x slower in every round printed as '0.16x (CIs overlap)'."""
    ref = result_with_runs([100.0, 60.0])
    var = result_with_runs([12.0, 15.0])
    s = speedup(ref, var)
    assert not s["significant"] and s["too_few_runs"] and (s["slower_rounds"], s["runs"]) == (2, 2)
    text = describe(s)
    assert text == "0.17x (too few runs to decide: slower in 2 of 2 rounds; use --repeat >= 3)"
    assert "CIs overlap" not in runtime_verdict(var, ref) and "slower in 2 of 2 rounds" in runtime_verdict(var, ref)
    word, reasons = verdict("int8-static", s, ACCURATE, ["avx2"])
    assert word == "UNDECIDED" and "within noise" not in reasons[0]
    assert "slower in 2 of 2 rounds" in reasons[0] and "--repeat >= 3" in reasons[0]


def test_one_run_each_cannot_decide():
    s = compare_throughput([100.0], [50.0])
    assert not s["significant"] and s["too_few_runs"] and s["ref_ci95"] == []
    assert describe(s) == "0.50x (1 run: no interval; use --repeat >= 3)"
    assert verdict("fp16", s, ACCURATE, [])[0] == "UNDECIDED"


def test_interval_printed_raw_or_called_too_wide_never_clipped():
    assert format_ci([100.0, 60.0]) == "interval too wide (n=2)"  # raw low is about -174: no 0.0 printed
    lo, hi = raw_ci([100.0, 102.0, 98.0])
    assert lo > 0 and format_ci([100.0, 102.0, 98.0]) == f"[{lo:.4g}, {hi:.4g}]"
    assert format_ci([100.0]) == ""
    assert raw_ci([100.0, 60.0])[0] < 0  # the raw interval is kept as computed


def test_significant_digits_for_raw_floats():
    assert sig(1.1492520570755005e-06, 3) == "1.15e-06"
    assert sig(0.0) == "0" and sig(None) == "-" and sig(1234.5678) == "1235"


def test_speedup_stored_before_runs_were_counted_still_formats():
    assert format_speedup({"ratio": 0.98, "significant": False, "basis": "x"}) == "0.98x (within noise)"
    assert format_speedup({"ratio": float("nan"), "significant": False}) == "-"
