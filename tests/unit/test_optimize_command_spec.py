"""optimize's spec refuses contradictions through the library call itself (issue 38 item 1): the command only maps
its flags onto :class:`OptimizeSpec`, so a caller of :func:`run_optimize` gets the same one-line refusals, before
any file is written; :func:`gate_message` decides exit 3."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from inferperf.config import BenchConfig
from inferperf.errors import UsageError
from inferperf.optimize.report import gate_message
from inferperf.optimize.run import run_optimize
from inferperf.optimize.spec import OptimizeOptions, OptimizeSpec, parse_accuracy_drop
from inferperf.zoo import default_shapes


@pytest.mark.parametrize(("options", "words"), [
    ({"variants": []}, "--variants names no variant to build"),
    ({"variants": ["fp32"]}, "--variants names no variant to build"),
    ({"variants": ["fp8"]}, "^--variants unknown variant 'fp8'"),
    ({"quant": {"calibration_method": "median"}}, "^--calibration-method "),
    ({"quant": {"activation_type": "int4"}}, "^--activation-type "),
    ({"image": {"std": [0.5, 0.0, 0.5]}}, "^--std --std values must be > 0"),
    ({"calibration_samples": 0}, "^--calibration-samples "),
    ({"max_auto_exclude": 0}, "^--max-auto-exclude "),
    ({"gates": [parse_accuracy_drop("f1:0.1")]}, "names metric 'f1', which no check computes"),
    (OptimizeOptions(variants=[]), "--variants names no variant to build"),
])
def test_run_optimize_refuses(tmp_path: Path, options: object, words: str) -> None:
    """Each refusal names its flag, before the model is read or the output folder made."""
    with pytest.raises(UsageError, match=words):
        run_optimize(OptimizeSpec("zoo:squeezenet", tmp_path / "out", options))
    assert not (tmp_path / "out").exists()


def test_a_good_spec_passes_check(tmp_path: Path) -> None:
    """Plain settings become OptimizeOptions (fp32 dropped: always the reference); a task metric may be gated;
    the zoo model's default shapes fill the bench settings unless --shape says otherwise."""
    spec = OptimizeSpec("zoo:ppocr-cls", tmp_path, {
        "variants": ["fp16", "fp32", "int8-dynamic"], "metric": "mymod:f1", "quant": {"per_channel": True},
        "gates": [parse_accuracy_drop("f1:0.1"), parse_accuracy_drop("cosine:0.01")], "bench": BenchConfig(repeat=2),
    }).check()
    assert isinstance(spec.options, OptimizeOptions)
    assert spec.options.variants == ["fp16", "int8-dynamic"] and spec.options.quant.per_channel is True
    assert spec.options.bench.workload.shapes == default_shapes("zoo:ppocr-cls") and spec.options.bench.repeat == 2
    shaped = BenchConfig.model_validate({"workload": {"shapes": {"x": [1, 3, 32, 100]}}})
    kept = OptimizeSpec("zoo:ppocr-cls", tmp_path, OptimizeOptions(bench=shaped)).check()
    assert kept.options.bench.workload.shapes == {"x": [1, 3, 32, 100]}


def test_gate_message_only_for_gates_the_user_set() -> None:
    rows = [SimpleNamespace(name="fp32", verdict=""), SimpleNamespace(name="int8-static", verdict="REJECT")]
    assert gate_message(SimpleNamespace(gate_failed=True, gates_explicit=False, variants=rows)) is None
    assert gate_message(SimpleNamespace(gate_failed=False, gates_explicit=True, variants=rows)) is None
    msg = gate_message(SimpleNamespace(gate_failed=True, gates_explicit=True, variants=rows))
    assert msg is not None and msg.startswith("accuracy gate failed for int8-static (see the table)")
