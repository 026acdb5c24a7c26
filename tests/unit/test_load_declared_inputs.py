"""A model whose metadata lists no inputs (MLServer without ``inputs`` in its model-settings; issue 40 item 3):
``--shape NAME:DIMS`` or ``--input-data`` give them, and nothing else does."""

from __future__ import annotations

import numpy as np
import pytest

from inferperf.errors import UsageError
from inferperf.loadgen.grpc_client import infer_payload
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.target import TargetInfo, payload_arrays


def _bare() -> TargetInfo:
    return TargetInfo(kind="kserve", url="grpc://127.0.0.1:1", model="m", metadata={"name": "m", "inputs": []})


def test_named_shapes_declare_fp32_inputs_and_the_result_records_them() -> None:
    info = _bare()
    arrays = payload_arrays(info, LoadConfig(model="m", concurrency=[1], shapes=["x:1x3x48x192"], input_pool_size=2))
    assert [a["x"].shape for a in arrays] == [(1, 3, 48, 192)] * 2 and arrays[0]["x"].dtype == np.float32
    assert info.metadata["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [1, 3, 48, 192]}]
    assert not np.array_equal(arrays[0]["x"], arrays[1]["x"])  # distinct seeded payloads


def test_input_data_declares_names_and_datatypes(tmp_path) -> None:  # noqa: ANN001
    f = tmp_path / "d.npz"
    np.savez(f, ids=np.arange(12, dtype=np.int64).reshape(3, 4), mask=np.ones((3, 4), np.int32))
    info = _bare()
    arrays = payload_arrays(info, LoadConfig(model="m", concurrency=[1], input_data=str(f)))
    assert len(arrays) == 3 and arrays[1]["ids"].tolist() == [[4, 5, 6, 7]] and arrays[0]["mask"].dtype == np.int32
    assert [(t["name"], t["datatype"]) for t in info.metadata["inputs"]] == [("ids", "INT64"), ("mask", "INT32")]
    payload = infer_payload("m", arrays[1], info.dtypes)
    from inferperf.workload.triton_protos import message

    msg = message("inference.ModelInferRequest").FromString(payload)
    assert [(t.name, t.datatype, list(t.shape)) for t in msg.inputs] == [("ids", "INT64", [1, 4]), ("mask", "INT32", [1, 4])]
    assert np.frombuffer(msg.raw_input_contents[0], np.int64).tolist() == [4, 5, 6, 7]


def test_without_them_it_is_one_line_naming_the_flags() -> None:
    with pytest.raises(UsageError, match="lists no inputs .* --shape NAME:DIMS"):
        payload_arrays(_bare(), LoadConfig(model="m", concurrency=[1]))
    with pytest.raises(UsageError, match="so name it: --shape x:1x3"):
        payload_arrays(_bare(), LoadConfig(model="m", concurrency=[1], shapes=["1x3"]))
