"""bench's spec refuses contradictions through the library call itself (issue 38 item 1), and the one flag ->
setting table (``cli/options.SETTING_OF``) maps every parameter a command passes."""

from __future__ import annotations

import pytest

from inferperf.cli.options import FLAG_OF, build_config, config_flags
from inferperf.config import BenchConfig
from inferperf.errors import UsageError
from inferperf.measure.spec import BenchSpec, gate_message, run_bench


@pytest.mark.parametrize(("kw", "words"), [
    ({"model": "  "}, "empty model"),
    ({"fail_on_leak": True}, "--fail-on-leak needs --soak-s"),
    ({"soak_s": 0.0}, "--soak-s"),
    ({"soak_s": 3.0, "cfg": BenchConfig(sampler=False)}, "sampler"),
    ({"history": True, "ab": ("a.onnx", "b.onnx")}, "--history"),
    ({"history": True, "backends": "onnxruntime,null"}, "--history"),
    ({"pre": "m:f", "pre_input": "d", "backends": "onnxruntime,null"}, "--pre/--post"),
    ({"post": "m:f", "ab": ("a.onnx", "b.onnx")}, "--pre/--post"),
])
def test_run_bench_refuses(kw: dict, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        run_bench(BenchSpec(**kw))


def test_run_bench_refuses_several_results() -> None:
    """An A/B pair or a comparison is several Results: not the one-Result library call."""
    with pytest.raises(UsageError, match="several"):
        run_bench(BenchSpec(backends="onnxruntime,null"))


def test_run_bench_soaks_and_gates() -> None:
    """A short soak on the null backend: exactly the soak's seconds, a soak block, and the gates say no for a
    VALID Result without a leak verdict, yes for an INVALID one with --fail-on-invalid."""
    spec = BenchSpec("zoo:squeezenet", BenchConfig(backend="null", null_latency_ms=[1.0], warmup={"iterations": 1}),
                     soak_s=1.0, fail_on_leak=True, fail_on_invalid=True)
    result = run_bench(spec)
    soak = result.metrics.resources.soak
    assert soak["rss_source"] == "psutil" and soak["verdict"] != "leak"
    assert spec.cfg.stop.min_duration_s == spec.cfg.stop.max_duration_s == 1.0
    result.validity.valid = False
    result.validity.reasons = ["made up for the test"]
    assert "INVALID (made up for the test)" in gate_message(spec, result)
    result.validity.valid = True
    assert gate_message(spec, result) is None
    soak["verdict"], soak["rss"] = "leak", {"reason": "grows 5 MiB/h"}
    assert gate_message(spec, result) == "--fail-on-leak: grows 5 MiB/h"


def test_config_flags_maps_every_setting_once() -> None:
    """Parameters set their settings, switches only when on, unknown names are skipped, overrides win; every
    setting's flag is named in errors."""
    flags = config_flags({"intra_op_num_threads": 2, "shape": ["1x3x8x8"], "disable_mem_pattern": True,
                          "force": False, "output": "x.json", "warmup": None}, backend="null")
    assert flags == {"session.intra_op_num_threads": 2, "workload.shapes": ["1x3x8x8"],
                     "session.enable_mem_pattern": False, "backend": "null"}
    cfg = build_config(flags)
    assert cfg.session.intra_op_num_threads == 2 and cfg.session.enable_mem_pattern is False
    assert FLAG_OF["stop.min_duration_s"] == "--duration-s" and FLAG_OF["warmup.iterations"] == "--warmup"
    with pytest.raises(UsageError, match="^--iterations"):
        build_config(config_flags({"iterations": -1}))
