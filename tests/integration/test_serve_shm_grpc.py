"""Triton's system shared memory over gRPC (issue 41 item 1): the SystemSharedMemory RPCs over the same registry as
the HTTP routes, ModelInfer inputs read from regions and outputs written into them (raw contents carrying only the
other inputs, an empty raw entry for each output in a region, as Triton's gRPC server answers), every refusal in
one line with its status code, and the CUDA RPCs answering a CPU server's empty state (127.0.0.1, ephemeral ports,
servers always stopped; segments made and unlinked by the test)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import numpy as np
import pytest

from inferperf.config import BenchConfig
from inferperf.serve.options import ServeOptions
from inferperf.serve.server import prepare, start
from inferperf.workload.triton_protos import message
from tests.integration.test_serve_app import StandIn
from tests.integration.test_serve_grpc import Stub, infer_request, outputs_of
from tests.integration.test_serve_shm import segment

F = np.arange(6, dtype=np.float32).reshape(2, 3)
I64 = np.array([[1, 2], [3, 4]], np.int64)
S = np.array([[b"a"], [b"b"]], dtype=object)


__all__ = ["segment"]  # the /dev/shm segment fixture, shared with the HTTP tests


@contextmanager
def _stub(allow: bool) -> Iterator[Stub]:
    """A stub on a served echo stand-in (``--allow-client-shm`` when ``allow``), the server always stopped."""
    app = prepare(StandIn(), BenchConfig(), ServeOptions())
    if allow:
        app.allow_client_shm()
    h = start(app, grpc_port=0)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{h.grpc_port}") as ch:
            yield Stub(ch)
    finally:
        h.stop()


def _param(p: Any, value: Any) -> None:
    if isinstance(value, str):
        p.string_param = value
    else:
        p.int64_param = value


def _in_region(msg: Any, tensor: Any, region: str, size: int, offset: int | None = None) -> None:
    _param(tensor.parameters["shared_memory_region"], region)
    _param(tensor.parameters["shared_memory_byte_size"], size)
    if offset is not None:
        _param(tensor.parameters["shared_memory_offset"], offset)


def _shm_request() -> Any:
    """f from region "in"; i and s in raw_input_contents (two entries for three inputs); f2 asked into "out"."""
    msg = infer_request("echo", {"i": I64, "s": S})
    f = msg.inputs.add(name="f", datatype="FP32", shape=[2, 3])
    _in_region(msg, f, "in", F.nbytes)
    for name in ("f2", "i2", "s2"):
        o = msg.outputs.add(name=name)
        if name == "f2":
            _in_region(msg, o, "out", 64, offset=8)
    return msg


def _refused(stub: Stub, code: grpc.StatusCode, words: str, rpc: str = "ModelInfer", **fields: Any) -> None:
    with pytest.raises(grpc.RpcError) as e:
        stub(rpc, **fields)
    assert e.value.code() == code and words in e.value.details(), (e.value.code(), e.value.details())


def test_inputs_from_and_outputs_into_regions_over_grpc(segment) -> None:  # noqa: ANN001
    key, mm = segment
    mm[0:F.nbytes] = F.tobytes()
    with _stub(allow=True) as stub:
        stub("SystemSharedMemoryRegister", name="in", key=key, offset=0, byte_size=1024)
        stub("SystemSharedMemoryRegister", name="out", key=key, offset=1024, byte_size=1024)
        status = stub("SystemSharedMemoryStatus").regions
        assert {n: (r.key, r.offset, r.byte_size) for n, r in status.items()} == {
            "in": (key, 0, 1024), "out": (key, 1024, 1024)}
        assert list(stub("SystemSharedMemoryStatus", name="out").regions) == ["out"]
        resp = stub("ModelInfer", _msg=_shm_request())
        assert [o.name for o in resp.outputs] == ["f2", "i2", "s2"]
        assert resp.raw_output_contents[0] == b""  # in the region; one raw entry per output, as Triton's
        assert list(resp.outputs[0].shape) == [2, 3] and resp.outputs[0].datatype == "FP32"
        got = np.frombuffer(mm, np.float32, count=6, offset=1024 + 8).reshape(2, 3)
        np.testing.assert_array_equal(got, F * 2)
        raw = message("inference.ModelInferResponse")(outputs=resp.outputs[1:],
                                                      raw_output_contents=resp.raw_output_contents[1:])
        out = outputs_of(raw)
        np.testing.assert_array_equal(out["i2"], I64 + 1)
        assert list(out["s2"]) == [b"A", b"B"]
        stub("SystemSharedMemoryUnregister", name="in")
        assert list(stub("SystemSharedMemoryStatus").regions) == ["out"]
        stub("SystemSharedMemoryUnregister")  # every region
        assert not stub("SystemSharedMemoryStatus").regions
        assert not stub("CudaSharedMemoryStatus").regions


def test_every_bound_and_bad_form_is_refused_in_one_line_and_the_server_serves_on(segment) -> None:  # noqa: ANN001
    key, mm = segment
    with _stub(allow=True) as stub:
        inv = grpc.StatusCode.INVALID_ARGUMENT
        _refused(stub, inv, "must name one segment", "SystemSharedMemoryRegister", name="x", key="/../etc",
                 byte_size=8)
        _refused(stub, inv, "past the end of segment", "SystemSharedMemoryRegister", name="x", key=key,
                 offset=4000, byte_size=200)
        stub("SystemSharedMemoryRegister", name="in", key=key, offset=0, byte_size=16)
        _refused(stub, inv, "already in manager", "SystemSharedMemoryRegister", name="in", key=key, byte_size=8)
        _refused(stub, grpc.StatusCode.NOT_FOUND, "Unable to find system shared memory region: 'nope'",
                 "SystemSharedMemoryStatus", name="nope")
        stub("SystemSharedMemoryRegister", name="out", key=key, offset=1024, byte_size=1024)
        over = _shm_request()  # f needs 24 bytes, region "in" holds 16
        _refused(stub, inv, "input 'f': shared_memory_offset 0 + shared_memory_byte_size 24 lies outside "
                            "region 'in' (16 bytes)", _msg=over)
        unknown = _shm_request()
        unknown.inputs[2].parameters["shared_memory_region"].string_param = "gone"
        _refused(stub, inv, "input 'f': shared memory region 'gone' is not registered", _msg=unknown)
        mm[0:F.nbytes] = F.tobytes()
        stub("SystemSharedMemoryUnregister", name="in")
        stub("SystemSharedMemoryRegister", name="in", key=key, offset=0, byte_size=1024)
        small = _shm_request()
        small.outputs[0].parameters["shared_memory_byte_size"].int64_param = 8
        _refused(stub, inv, "output 'f2': 24 bytes do not fit shared_memory_byte_size 8", _msg=small)
        extra = _shm_request()
        extra.raw_input_contents.append(b"\0" * 24)  # one per input: Triton counts only those not in a region
        _refused(stub, inv, "3 raw_input_contents for 2 inputs not in shared memory", _msg=extra)
        orphan = infer_request("echo", {"f": F, "i": I64, "s": S})
        orphan.inputs[0].parameters["shared_memory_offset"].int64_param = 0
        _refused(stub, inv, "'shared_memory_offset' can not be specified without 'shared_memory_region'",
                 _msg=orphan)
        _refused(stub, inv, "CUDA shared memory is not served", "CudaSharedMemoryRegister", name="c",
                 byte_size=8)
        _refused(stub, grpc.StatusCode.NOT_FOUND, "Unable to find cuda shared memory region: 'c'",
                 "CudaSharedMemoryStatus", name="c")
        assert stub("ModelInfer", _msg=_shm_request()).outputs  # still serving, the same regions


def test_without_the_flag_the_rpcs_and_the_parameters_are_refused(segment) -> None:  # noqa: ANN001
    key, _ = segment
    with _stub(allow=False) as stub:
        denied = grpc.StatusCode.PERMISSION_DENIED
        _refused(stub, denied, "--allow-client-shm", "SystemSharedMemoryRegister", name="in", key=key,
                 byte_size=16)
        _refused(stub, denied, "--allow-client-shm", "SystemSharedMemoryStatus")
        _refused(stub, denied, "--allow-client-shm", _msg=_shm_request())
        assert stub("ModelInfer", _msg=infer_request("echo", {"f": F, "i": I64, "s": S})).outputs


def test_bytes_tensors_through_regions_in_tritons_layout(segment) -> None:  # noqa: ANN001
    """BYTES in a region: each element behind its 4-byte little-endian length (as tritonclient's shared_memory
    utilities serialize it); read in, and s2 written out in the same layout; a span that the elements do not
    fill exactly is refused naming the input."""
    key, mm = segment
    blob = b"".join(len(b).to_bytes(4, "little") + b for b in (b"ab", b"xyz"))
    mm[0:len(blob)] = blob
    with _stub(allow=True) as stub:
        stub("SystemSharedMemoryRegister", name="in", key=key, offset=0, byte_size=1024)
        stub("SystemSharedMemoryRegister", name="out", key=key, offset=1024, byte_size=1024)
        msg = infer_request("echo", {"f": F, "i": I64})
        s = msg.inputs.add(name="s", datatype="BYTES", shape=[2, 1])
        _in_region(msg, s, "in", len(blob))
        o = msg.outputs.add(name="s2")
        _in_region(msg, o, "out", 64)
        resp = stub("ModelInfer", _msg=msg)
        assert [t.name for t in resp.outputs] == ["s2"] and resp.raw_output_contents[0] == b""
        want = b"".join(len(b).to_bytes(4, "little") + b for b in (b"AB", b"XYZ"))
        assert mm[1024:1024 + len(want)] == want
        s.parameters["shared_memory_byte_size"].int64_param = len(blob) + 3  # 3 stray bytes after the elements
        with pytest.raises(grpc.RpcError) as e:
            stub("ModelInfer", _msg=msg)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "input 's'" in e.value.details()
