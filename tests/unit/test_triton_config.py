"""Triton's config.pbtxt through Triton's own ModelConfig message (serve/triton_config.py; issue 24, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from inferperf.serve.triton_config import TritonConfigError, message_class, parse

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "triton_model_repository"
CONFIGS = sorted(p.parent.name for p in FIXTURE.glob("*/config.pbtxt"))


def test_the_fixture_holds_every_example_config() -> None:
    assert CONFIGS == ["densenet_onnx", "inception_onnx", "simple", "simple_dyna_sequence", "simple_identity",
                       "simple_int8", "simple_sequence", "simple_string"]


@pytest.mark.parametrize("name", CONFIGS)
def test_every_example_config_parses_as_triton_model_config(name: str) -> None:
    msg = text_format.Parse((FIXTURE / name / "config.pbtxt").read_text(), message_class()())
    assert msg.name == name


def test_lists_of_messages_maps_and_enums_are_read_in_full() -> None:
    """simple_dyna_sequence: ``control_input [ {...}, ... ]`` nested lists, ``parameters`` (a map), enums."""
    msg = text_format.Parse((FIXTURE / "simple_dyna_sequence" / "config.pbtxt").read_text(), message_class()())
    sb = msg.sequence_batching
    assert [c.name for c in sb.control_input] == ["START", "END", "READY", "CORRID"]
    assert list(sb.control_input[0].control[0].int32_false_true) == [0, 1]
    assert sb.oldest.max_candidate_sequences == 1024 and sb.max_sequence_idle_microseconds == 10_000_000
    assert msg.parameters["execute_delay_ms"].string_value == "3"
    assert msg.instance_group[0].count == 2


@pytest.mark.parametrize(("name", "reason"), [
    ("simple_identity", "the python backend (model.py)"),
])
def test_what_inferperf_does_not_do_is_refused_with_the_reason(name: str, reason: str) -> None:
    with pytest.raises(TritonConfigError, match="inferperf cannot serve this model") as e:
        parse((FIXTURE / name / "config.pbtxt").read_text(), name)
    assert str(e.value).startswith(f"{name}: ") and reason in str(e.value)


def test_sequence_batching_is_mapped_and_its_faults_refused() -> None:
    """Issue 42: direct (simple_sequence) and oldest (simple_dyna_sequence) with their control inputs; the
    strategy's queue delay drives the batcher across sequences; faults are refused naming the field."""
    from inferperf.serve.sequences import Control

    direct = parse((FIXTURE / "simple_sequence" / "config.pbtxt").read_text())
    assert direct.sequence is not None and direct.sequence.strategy == "direct" and direct.sequence.idle_us == 1_000_000
    assert [c.kind for c in direct.sequence.controls] == ["START", "READY"]
    assert direct.serve["dynamic_batching"] is True
    dyna = parse((FIXTURE / "simple_dyna_sequence" / "config.pbtxt").read_text())
    assert dyna.sequence.strategy == "oldest" and dyna.sequence.max_candidate_sequences == 1024
    assert dyna.sequence.controls[3] == Control("CORRID", "CORRID", "UINT64")
    assert dyna.serve["max_queue_delay_us"] == 10000 and dyna.sequence.idle_us == 10_000_000
    assert dyna.sequence.hidden_inputs == {"START", "END", "READY", "CORRID"}
    base = 'name: "m" max_batch_size: 4 input [{name: "x" data_type: TYPE_INT32 dims: [1]}] output [{name: "y" data_type: TYPE_INT32 dims: [1]}] '
    for extra, reason in (
        ('sequence_batching { control_input [{name: "S" control [{kind: CONTROL_SEQUENCE_START}]}] }',
         "needs exactly one of int32_false_true"),
        ('sequence_batching { control_input [{name: "C" control [{kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32}]}] }',
         "CORRID data_type must be"),
        ("sequence_batching { oldest { max_candidate_sequences: 0 } }", "max_candidate_sequences must be >= 1"),
        ("sequence_batching {} dynamic_batching {}", "another member of oneof"),
        ('sequence_batching { state [{input_name: "a" output_name: "b" data_type: TYPE_INT32 dims: [-1]}] }',
         "needs input_name, output_name, data_type and fixed dims"),
    ):
        with pytest.raises(TritonConfigError, match=reason):
            parse(base + extra)
    state = parse(base + 'sequence_batching { state [{input_name: "a" output_name: "b" data_type: TYPE_FP32 dims: [2, 3]}] }')
    assert state.sequence.states[0].dims == (2, 3) and state.sequence.hidden_outputs == {"b"}


def test_the_wire_contract_fields_are_mapped() -> None:
    dense = parse((FIXTURE / "densenet_onnx" / "config.pbtxt").read_text())
    (i,), (o,) = dense.inputs, dense.outputs
    assert (i.name, i.datatype, i.dims, i.reshape, i.format) == ("data_0", "FP32", (3, 224, 224), (1, 3, 224, 224),
                                                                 "FORMAT_NCHW")
    assert (o.name, o.dims, o.reshape, o.label_filename) == ("fc6_1", (1000,), (1, 1000, 1, 1), "densenet_labels.txt")
    assert dense.ignored == [] and dense.serve == {"max_batch_size": 0}
    s = parse((FIXTURE / "simple_string" / "config.pbtxt").read_text())
    assert [(t.name, t.datatype, t.dims) for t in s.inputs] == [("INPUT0", "BYTES", (16,)), ("INPUT1", "BYTES", (16,))]


@pytest.mark.parametrize(("text", "reason"), [
    ('platform: "ensemble" ensemble_scheduling { step [ { model_name: "a" model_version: -1 } ] }', "an ensemble"),
    ('backend: "pytorch"', "'pytorch' is not ONNX Runtime"),
    ('max_batch_size: 4 input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 3 ] } } ]',
     "different size for dims [4] and reshape [3]"),
    ('input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 4, 4 ] } ]', "require 3 dims"),
    ('input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]', "is optional"),
    ('input [ { name: "x" data_type: TYPE_FP32 dims: [ 0 ] } ]', "each dim must be >= 1"),
    ('input [ { name: "x" dims: [ 2 ] } ]', "must specify 'data_type'"),
    ('output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] is_shape_tensor: true } ]', "shape tensor"),
    ('model_transaction_policy { decoupled: true }', "decoupled"),
    ('batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "n" data_type: TYPE_FP32 source_input: "x" } ]',
     "batch_input"),
])
def test_refusals_name_each_reason(text: str, reason: str) -> None:
    with pytest.raises(TritonConfigError, match="inferperf cannot serve this model") as e:
        parse(text)
    assert reason in str(e.value)


@pytest.mark.parametrize("text", [
    'max_batch_sise: 8',  # a field Triton does not have
    'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ',  # unterminated list
    'input [ { name: "x" data_type: TYPE_FLOAT dims: [ 4 ] } ]',  # not a DataType
])
def test_configs_triton_would_not_parse_are_refused(text: str) -> None:
    with pytest.raises(TritonConfigError, match="not a Triton model configuration"):
        parse(text)


def test_fields_that_keep_the_wire_contract_are_ignored_by_name() -> None:
    c = parse('''
        max_batch_size: 4  # comment
        input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
        model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]
        response_cache { enable: true }
        dynamic_batching { priority_levels: 2 }
    ''')
    assert c.ignored == ["dynamic_batching.priority_levels", "input.allow_ragged_batch", "model_warmup",
                         "response_cache"]
