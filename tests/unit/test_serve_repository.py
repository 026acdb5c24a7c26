"""Model repository scanning (serve/repository.py) and Triton's config.pbtxt mapping (serve/triton_config.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inferperf.errors import UsageError
from inferperf.serve.repository import check_name, scan
from inferperf.serve.triton_config import TritonConfigError, parse

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repository"


def _onnx(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not opened by scan")
    return path


def test_triton_config_maps_batching_instances_versions_and_names_what_it_ignores() -> None:
    c = parse('''
        name: "det" backend: "onnxruntime" max_batch_size: 8
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] format: FORMAT_NCHW } ]
        output [ { name: "y" data_type: TYPE_FP32 dims: [ 1, -1, -1 ] } ]
        dynamic_batching { max_queue_delay_microseconds: 2000 preferred_batch_size: [ 4, 8 ]
                           default_queue_policy { max_queue_size: 16 default_timeout_microseconds: 5 timeout_action: DELAY }
                           preserve_ordering: true }
        instance_group [ { count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_GPU gpus: [ 0 ] } ]
        version_policy: { specific: { versions: [ 3, 1 ] } }
        optimization { execution_accelerators { cpu_execution_accelerator : [ { name : "openvino" } ] } }
        parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
    ''')
    assert c.serve == {"max_batch_size": 8, "dynamic_batching": True, "max_queue_delay_us": 2000,
                       "preferred_batch_size": [4, 8], "max_queue_size": 16, "instance_count": 2}
    assert c.version_policy == ("specific", [1, 3]) and c.model_filename == "model.onnx"
    assert [t.name for t in c.inputs] == ["x"] and [t.name for t in c.outputs] == ["y"]
    assert c.inputs[0].format == "FORMAT_NCHW" and c.inputs[0].dims == (3, -1, -1)
    assert c.ignored == ["dynamic_batching.default_queue_policy.default_timeout_microseconds",
                         "dynamic_batching.default_queue_policy.timeout_action",
                         "dynamic_batching.preserve_ordering", "instance_group (KIND_GPU/KIND_MODEL groups)",
                         "optimization", "parameters"]


def test_triton_queue_timeout_with_reject_maps_to_request_timeout_ms() -> None:
    c = parse('dynamic_batching { default_queue_policy { default_timeout_microseconds: 2500 } }')
    assert c.serve["request_timeout_ms"] == 3 and c.ignored == []  # REJECT is the default action; ms rounded up


def test_triton_config_defaults_and_refusals() -> None:
    c = parse('name: "m"')
    assert c.serve == {"max_batch_size": 0} and c.version_policy == ("latest", 1) and c.ignored == []
    assert parse('version_policy { latest { num_versions: 2 } }').version_policy == ("latest", 2)
    assert parse('version_policy { all { } }').version_policy == ("all", None)
    with pytest.raises(TritonConfigError, match="'tensorrt_plan' is not ONNX Runtime"):
        parse('platform: "tensorrt_plan"')
    with pytest.raises(TritonConfigError, match="not a Triton model configuration"):
        parse('max_batch_size: "eight"')
    with pytest.raises(TritonConfigError, match="max_batch_size -1 is negative"):
        parse('max_batch_size: -1')
    with pytest.raises(TritonConfigError, match="every instance_group is KIND_GPU"):
        parse('instance_group [ { kind: KIND_GPU } ]')


def test_example_repository_scans_to_its_three_models() -> None:
    models = {m.name: m for m in scan(EXAMPLE)}
    assert sorted(models) == ["mlp", "mlp_triton", "scale"]
    assert models["mlp"].layout == "inferperf" and models["mlp"].serve.max_batch_size == 8
    assert models["mlp"].serve.dynamic_batching and models["mlp"].config.session.intra_op_num_threads == 1
    t = models["mlp_triton"]
    assert t.layout == "triton" and sorted(t.versions) == ["1", "2"]
    assert (t.serve.max_batch_size, t.serve.max_queue_delay_us, t.serve.preferred_batch_size, t.serve.instance_count) == (4, 500, [4], 2)
    assert t.warnings and t.warnings[0].endswith("inferperf ignores model_warmup")


def test_version_policy_picks_versions(tmp_path: Path) -> None:
    for v in (1, 2, 7):
        _onnx(tmp_path / "m" / str(v) / "model.onnx")
    (tmp_path / "m" / "config.pbtxt").write_text('name: "m"')
    assert list(scan(tmp_path)[0].versions) == ["7"]  # latest 1 by default
    (tmp_path / "m" / "config.pbtxt").write_text('version_policy { latest { num_versions: 2 } }')
    assert list(scan(tmp_path)[0].versions) == ["2", "7"]
    (tmp_path / "m" / "config.pbtxt").write_text('version_policy { specific { versions: [1, 3] } }')
    with pytest.raises(UsageError, match=r"version_policy names versions \[3\]"):
        scan(tmp_path)


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "/etc", "%2e%2e", "", ".hidden"])
def test_names_that_are_not_plain_folder_names_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match="is not a plain name"):
        check_name(name)


def test_symlinks_out_of_the_repository_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _onnx(outside / "model.onnx")
    (outside / "model.yaml").write_text("serve: {max_batch_size: 2}\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    os.symlink(outside, repo / "escaped")  # a model folder that is a link out
    with pytest.raises(UsageError, match="outside the model repository"):
        scan(repo)
    (repo / "escaped").unlink()
    (repo / "inside").mkdir()
    (repo / "inside" / "model.yaml").write_text("")
    os.symlink(outside / "model.onnx", repo / "inside" / "model.onnx")  # a model file that is a link out
    with pytest.raises(UsageError, match="model 'inside' file .* outside the model repository"):
        scan(repo)


def test_malformed_repositories_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not a folder"):
        scan(tmp_path / "missing")
    with pytest.raises(UsageError, match="holds no model folder"):
        scan(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="neither model.yaml .* nor config.pbtxt"):
        scan(tmp_path)
    (tmp_path / "empty" / "model.yaml").write_text("serve: {max_batch_size: -3}\n")
    _onnx(tmp_path / "empty" / "model.onnx")
    with pytest.raises(UsageError, match=r"model.yaml: max_batch_size: Input should be greater than or equal to 0"):
        scan(tmp_path)
    (tmp_path / "empty" / "model.yaml").unlink()
    (tmp_path / "empty" / "config.pbtxt").write_text('name: "other"')
    with pytest.raises(UsageError, match="name 'other' differs from its folder 'empty'"):
        scan(tmp_path)
