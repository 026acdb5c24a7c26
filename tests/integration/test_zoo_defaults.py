"""``inferperf zoo`` says which input size a zoo model runs at by default, and bench/sweep then use it."""

from __future__ import annotations

import re

import pytest

from inferperf import BenchConfig, StopOptions, WarmupOptions, WorkloadOptions, bench, zoo
from inferperf.sweep.space import Matrix, expand
from inferperf.system import collect_system


def test_default_shapes_fill_only_what_the_user_left_open() -> None:
    assert zoo.default_shapes("zoo:ppocr-cls") == {"x": [1, 3, 48, 192]}
    assert zoo.default_shapes("zoo:ppocr-rec", batch_size=4) == {"x": [4, 3, 48, 320]}
    assert zoo.default_shapes("zoo:ppocr-det") == {} and zoo.default_shapes("model.onnx") == {}
    filled = zoo.with_default_shapes("zoo:ppocr-cls", BenchConfig(workload=WorkloadOptions(batch_size=2)))
    assert filled.workload.shapes == {"x": [2, 3, 48, 192]}
    given = BenchConfig(workload=WorkloadOptions(shapes={"x": [1, 3, 48, 96]}))
    assert zoo.with_default_shapes("zoo:ppocr-cls", given) is given  # the user's choice wins whole


def test_the_listing_claims_exactly_the_defaults_that_apply() -> None:
    for entry in zoo.entries():
        claimed = re.search(r"default (\d+)x(\d+)", entry.description)
        shapes = zoo.default_shapes(f"zoo:{entry.name}")
        if claimed:
            assert shapes and shapes["x"][2:] == [int(claimed.group(1)), int(claimed.group(2))], entry.name
        else:
            assert "in use" not in entry.description and not shapes, entry.name


def test_bench_and_sweep_run_ppocr_cls_without_shape() -> None:
    if not dict((e.name, ok) for e, ok, _ in zoo.list_models())["ppocr-cls"]:
        pytest.skip("PP-OCR cls needs: pip install --no-deps rapidocr-onnxruntime")
    quick = BenchConfig(warmup=WarmupOptions(iterations=1), stop=StopOptions(min_iterations=3, min_duration_s=0.0),
                        sampler=False)
    r = bench("zoo:ppocr-cls", quick)
    assert r.config.workload.shapes == {"x": [1, 3, 48, 192]} and r.metrics.latency_ms.count >= 3
    cases, _ = expand(Matrix.model_validate({"models": [{"path": "zoo:ppocr-cls"}]}), collect_system())
    assert cases and all(c.config.workload.shapes == {"x": [1, 3, 48, 192]} for c in cases)
