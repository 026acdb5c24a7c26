"""optimize: gate parsing, output-agreement statistics, gates, verdicts (pure; no runtime)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inferperf import stats
from inferperf.errors import UsageError
from inferperf.optimize.accuracy import check_gates, compare
from inferperf.optimize.spec import DEFAULT_GATES, OptimizeOptions, parse_accuracy_drop
from inferperf.optimize.verdict import format_speedup, verdict, why_slower


@pytest.mark.parametrize("text", ["3", "0.01", " 2.5 ", "cosine:1.5", "cosine:abc", "150%", "x:-1"])
def test_ambiguous_or_malformed_drop_is_refused(text):
    with pytest.raises(UsageError):
        parse_accuracy_drop(text)


def test_ambiguous_drop_message_names_both_fixes():
    with pytest.raises(UsageError, match=r"3%.*cosine:3"):
        parse_accuracy_drop("3")


@pytest.mark.parametrize(
    ("text", "metric", "kind", "amount"),
    [("cosine:0.01", "cosine", "abs", 0.01), ("top1:0.5%", "top1", "rel", 0.5), ("1%", "*", "rel", 1.0),
     ("TOP5=2%", "top5", "rel", 2.0), ("text_iou:0.05", "text_iou", "abs", 0.05)],
)
def test_drop_with_units_parses(text, metric, kind, amount):
    g = parse_accuracy_drop(text)
    assert (g.metric, g.kind, g.amount, g.explicit) == (metric, kind, amount, True)


def test_unknown_variant_refused_and_fp32_dropped():
    with pytest.raises(ValueError, match="unknown variant"):
        OptimizeOptions(variants=["int4"])
    assert OptimizeOptions(variants=["fp32", "FP16", "fp16"]).variants == ["fp16"]


def test_agreement_exact_for_constant_offset():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 10)).astype(np.float64)
    cand = ref + 0.25
    assert stats.max_abs_error(ref, cand) == pytest.approx(0.25, abs=1e-12)
    assert stats.mean_abs_error(ref, cand) == pytest.approx(0.25, abs=1e-12)
    expected_snr = 10 * math.log10(float(np.sum(ref**2)) / (ref.size * 0.0625))
    assert stats.snr_db(ref, cand) == pytest.approx(expected_snr, rel=1e-12)
    cos = float(np.dot(ref.ravel(), cand.ravel()) / (np.linalg.norm(ref) * np.linalg.norm(cand)))
    assert stats.cosine_similarity(ref, cand) == pytest.approx(cos, rel=1e-12)
    assert stats.topk_agreement(ref, cand, 1) == 1.0  # a constant shift keeps every argmax


def test_agreement_edge_cases():
    z = np.zeros(5)
    assert stats.cosine_similarity(z, z) == 1.0
    assert stats.cosine_similarity(z, np.ones(5)) == 0.0
    assert stats.snr_db(np.ones(3), np.ones(3)) == math.inf
    assert stats.nonfinite_count(np.array([1.0, np.nan, np.inf, -np.inf])) == 3
    ref = np.array([[0.0, 1.0, 0.5], [3.0, 2.0, 1.0]])
    cand = np.array([[1.0, 0.6, 0.5], [3.0, 2.0, 1.0]])
    assert stats.topk_agreement(ref, cand, 1) == 0.5
    assert stats.topk_agreement(ref, cand, 2) == 1.0
    with pytest.raises(ValueError):
        stats.max_abs_error(np.zeros(2), np.zeros(3))


def test_compare_counts_nonfinite_and_never_compares_them():
    ref = [{"y": np.ones((1, 4), np.float32)}]
    bad = [{"y": np.array([[1.0, np.nan, np.inf, 1.0]], np.float32)}]
    acc = compare(ref, bad)
    assert acc["nonfinite_count"] == 2
    assert "cosine" not in acc["outputs"]["y"]
    passed, _, reasons = check_gates(acc, DEFAULT_GATES)
    assert not passed and "2 non-finite" in reasons[0]


def test_default_gates_cosine_and_top1():
    rng = np.random.default_rng(1)
    ref = [{"logits": rng.standard_normal((8, 10)).astype(np.float32)}]
    good = compare(ref, [{"logits": ref[0]["logits"] + np.float32(1e-4)}])
    assert check_gates(good, DEFAULT_GATES)[0]
    worse = compare(ref, [{"logits": -ref[0]["logits"]}])
    passed, records, reasons = check_gates(worse, DEFAULT_GATES)
    assert not passed
    assert {r["metric"] for r in records} == {"cosine", "top1"}
    assert any(r.startswith("cosine") for r in reasons)


def test_explicit_gate_that_applies_nowhere_fails():
    ref = [{"map": np.ones((1, 1, 4, 4), np.float32)}]
    acc = compare(ref, ref)
    assert check_gates(acc, DEFAULT_GATES)[0]  # top1 does not apply to a map: default gate skipped
    passed, _, reasons = check_gates(acc, [parse_accuracy_drop("top1:0.01")])
    assert not passed and "applies to no output" in reasons[0]


def test_relative_gate_in_percent_of_reference():
    ref = [{"y": np.ones((2, 3), np.float32)}]
    acc = compare(ref, ref)
    acc["task_metric"] = {"name": "iou", "reference": 0.8, "candidate": 0.79}
    assert check_gates(acc, [parse_accuracy_drop("iou:2%")])[0]  # 0.01 <= 2% of 0.8 = 0.016
    assert not check_gates(acc, [parse_accuracy_drop("iou:1%")])[0]  # 0.01 > 0.008


def test_speedup_wording_and_verdicts():
    assert format_speedup({"ratio": 0.66, "significant": True, "direction": "slower"}) == "0.66x slower"
    assert format_speedup({"ratio": 1.42, "significant": True, "direction": "faster"}) == "1.42x faster"
    assert format_speedup({"ratio": 0.98, "significant": False}) == "0.98x (within noise)"
    slow = {"ratio": 0.5, "significant": True, "basis": "x"}
    word, reasons = verdict("int8-dynamic", slow, {"passed": True, "predictive": True}, ["avx2", "fma"])
    assert word == "SLOWER" and "no VNNI" in reasons[0]
    word, reasons = verdict("fp16", slow, {"passed": False, "reasons": ["cosine 0.15 < 0.99"]}, ["avx2"])
    assert word == "REJECT" and reasons[0].startswith("cosine")
    assert verdict("fp16", None, None, [], error="does not load")[0] == "FAILED"
    assert "fp16 emulated" in why_slower("fp16", ["avx2", "f16c"])[0]
    assert not any("VNNI" in r for r in why_slower("int8-static", ["avx512_vnni"]))


def test_no_vnni_recommendation_applied_with_note():
    from inferperf.optimize.convert import recommended_quant
    from inferperf.optimize.spec import QuantOptions

    s, notes = recommended_quant(QuantOptions(), ["avx2", "fma"], static=True)
    assert s["reduce_range"] and s["activation_type"] == "uint8" and s["weight_type"] == "int8"
    assert "no VNNI" in notes[0]
    s, notes = recommended_quant(QuantOptions(), ["avx2", "avx512_vnni"], static=True)
    assert not s["reduce_range"] and s["activation_type"] == "int8" and not notes
    s, _ = recommended_quant(QuantOptions(reduce_range=False), ["avx2"], static=True)
    assert s["reduce_range"] is False  # explicit settings win


def test_synthetic_inputs_judge_output_closeness_not_top1():
    """Issue 24 item 14: fp16 with cosine 1.0000 matched fp32's top-1 on 7 of 8 synthetic near-tie inputs and was
    REJECTed. On synthetic inputs the default gates are cosine and max abs error; top-1 is not gated."""
    from inferperf.optimize.spec import SYNTHETIC_GATES

    ref_logits = np.array([[0.5, 0.5 + d] for d in (1e-4, -1e-4, 0.2, -0.2, 0.3, -0.3, 0.1, -0.1)], np.float32)
    cand_logits = ref_logits.copy()
    cand_logits[0, 1] -= np.float32(3e-4)  # a rounding-sized change flips the near-tied first input
    acc = compare([{"p": ref_logits}], [{"p": cand_logits}])
    o = acc["outputs"]["p"]
    assert o["top1"] == 0.875 and o["cosine"] > 0.9999
    assert not check_gates(acc, DEFAULT_GATES)[0]  # the old judgement: a top-1 "drop" of 12.5 %
    passed, records, _ = check_gates(acc, SYNTHETIC_GATES)
    assert passed and {r["metric"] for r in records} == {"cosine", "max_abs_error"}
    assert OptimizeOptions().effective_gates(predictive=False) == list(SYNTHETIC_GATES)
    assert OptimizeOptions().effective_gates(predictive=True) == list(DEFAULT_GATES)
    # must-say-no: one element off by half the peak barely moves the cosine, but max abs error catches it
    rng = np.random.default_rng(0)
    big = rng.standard_normal((8, 1000)).astype(np.float32)
    broken = big.copy()
    broken[0, 0] += np.float32(0.5 * np.abs(big).max())
    acc2 = compare([{"y": big}], [{"y": broken}])
    assert acc2["outputs"]["y"]["cosine"] > 0.99
    passed, _, reasons = check_gates(acc2, SYNTHETIC_GATES)
    assert not passed and reasons[0].startswith("max_abs_error") and "of fp32's peak" in reasons[0]
    gate = parse_accuracy_drop("max_abs_error:10%")
    assert (gate.metric, gate.kind, gate.amount) == ("max_abs_error", "rel", 10.0)
    assert parse_accuracy_drop("max_abs_error:0.05").kind == "abs"
