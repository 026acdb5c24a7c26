"""The server's own HTTP/2 gRPC front (serve/grpc_h2.py) at its edges: flow control both ways, compressed
messages, frames split and padded, a client that indexes its headers, the server-side deadline, a bad preface,
an unknown RPC, a non-gRPC request, and a stop that lets running calls finish (127.0.0.1, ephemeral ports; every
server stopped by its context manager)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
import pytest
from hpack import Decoder, Encoder

from inferperf.serve.options import ServeOptions
from inferperf.serve.server import serving
from inferperf.workload.h2_frames import (CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, MAX_WINDOW,
                                          PADDED, PREFACE, PRIORITY, SETTINGS, U32, WINDOW_UPDATE, frame, settings)
from inferperf.workload.triton_protos import message
from tests.integration.test_serve_app import StandIn
from tests.integration.test_serve_grpc import Stub, infer_request, outputs_of

INFER = "/inference.GRPCInferenceService/ModelInfer"


@dataclass
class Slow(StandIn):
    """The echo stand-in with a 32 MiB body limit and a delay before it answers."""

    options: ServeOptions = field(default_factory=lambda: ServeOptions(max_batch_size=0, max_body_bytes=32 * 2**20))
    max_batch_size: int = 0
    delay_s: float = 0.0
    started: threading.Event = field(default_factory=threading.Event)  # set when a call reaches the model

    async def infer(self, inputs: dict, rows: int, requested: list[str] | None, is_disconnected: Any = None) -> dict:
        self.started.set()
        await asyncio.sleep(self.delay_s)
        return await super().infer(inputs, rows, requested, is_disconnected)


@pytest.fixture
def served() -> Iterator[tuple[Any, Slow]]:
    model = Slow()
    with serving(model, grpc_port=0) as handle:
        yield handle, model


def _tensors(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"f": rng.standard_normal((rows, 3)).astype(np.float32), "i": rng.integers(0, 9, (rows, 2)),
            "s": np.array([[b"ab"]] * rows, dtype=object)}


def _check(resp: Any, sent: dict[str, np.ndarray]) -> None:
    out = outputs_of(resp)
    np.testing.assert_array_equal(out["f2"], sent["f"] * 2)
    np.testing.assert_array_equal(out["i2"], sent["i"] + 1)
    assert len(out["s2"]) == len(sent["s"]) and out["s2"][0] == b"AB"


@pytest.mark.parametrize("compression", [None, grpc.Compression.Gzip, grpc.Compression.Deflate])
def test_messages_of_megabytes_both_ways_through_flow_control(served, compression) -> None:  # noqa: ANN001
    """3.3 MB each way: far over a client's first 64 KiB windows, so both sides wait for WINDOW_UPDATEs; gzip and
    deflate requests are inflated before they are parsed."""
    handle, _ = served
    sent = _tensors(100_000)
    opts = [("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(f"127.0.0.1:{handle.grpc_port}", options=opts, compression=compression) as ch:
        stub = Stub(ch)
        for _ in range(2):
            _check(stub("ModelInfer", _msg=infer_request("echo", sent)), sent)


# --------------------------------------------------------------------------------------- a client of raw frames
def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    # the largest windows this way (the client here never sends a WINDOW_UPDATE of its own)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0, settings(INITIAL_WINDOW_SIZE=MAX_WINDOW))
              + frame(WINDOW_UPDATE, 0, 0, U32.pack(MAX_WINDOW - 65535)))
    return s


def _frames(sock: socket.socket, until: Any, deadline_s: float = 10.0) -> list[tuple[int, int, int, bytes]]:
    """Frames read until ``until(frame)`` is true or the socket closes."""
    buf, out, end = b"", [], time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            data = sock.recv(1 << 16)
        except TimeoutError:
            break
        if not data:
            break
        buf += data
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
            n = int.from_bytes(buf[:3], "big")
            f = (buf[3], buf[4], U32.unpack_from(buf, 5)[0], buf[9:9 + n])
            buf = buf[9 + n:]
            out.append(f)
            if until(f):
                return out
    return out


def _stream_end(sid: int) -> Any:
    return lambda f: f[2] == sid and f[0] in (HEADERS, DATA) and f[1] & END_STREAM


def _answer(frames: list[tuple[int, int, int, bytes]], sid: int, decoder: Decoder) -> tuple[dict[str, str], bytes]:
    """The stream's headers (all blocks merged) and its DATA bytes."""
    headers: dict[str, str] = {}
    data = b""
    for kind, _, s, payload in frames:
        if s != sid:
            continue
        if kind == HEADERS:
            headers.update(decoder.decode(payload))
        elif kind == DATA:
            data += payload
    return headers, data


def _grpc_body(msg: Any) -> bytes:
    raw = msg.SerializeToString()
    return b"\x00" + len(raw).to_bytes(4, "big") + raw


def _request_headers(port: int, *extra: tuple[str, str]) -> list[tuple[str, str]]:
    return [(":method", "POST"), (":scheme", "http"), (":path", INFER), (":authority", f"127.0.0.1:{port}"),
            ("content-type", "application/grpc"), ("te", "trailers"), *extra]


def test_split_padded_frames_and_a_client_that_indexes_its_headers(served) -> None:  # noqa: ANN001
    """Two calls on one connection from an encoder with a 4 KiB dynamic table (the second block is mostly indexes
    into it): HEADERS padded, with a priority, continued in CONTINUATION; the message in two padded DATA frames."""
    handle, _ = served
    port = handle.grpc_port
    enc, dec = Encoder(), Decoder()
    sent = _tensors(3)
    body = _grpc_body(infer_request("echo", sent))
    with _connect(port) as s:
        for sid in (1, 3):
            block = enc.encode(_request_headers(port, ("x-trace-bin", "AAEC")))
            head = bytes((4,)) + b"\x00\x00\x00\x00\x10" + block[:5] + b"\x00" * 4  # pad 4, priority 5 bytes
            half = len(body) // 2
            s.sendall(frame(HEADERS, PADDED | PRIORITY, sid, head) + frame(CONTINUATION, END_HEADERS, sid, block[5:])
                      + frame(DATA, PADDED, sid, b"\x02" + body[:half] + b"\x00\x00")
                      + frame(DATA, PADDED | END_STREAM, sid, b"\x01" + body[half:] + b"\x00"))
            headers, data = _answer(_frames(s, _stream_end(sid)), sid, dec)
            assert headers.get("grpc-status") == "0", headers
            _check(message("inference.ModelInferResponse").FromString(data[5:]), sent)


def test_the_server_ends_a_call_at_its_grpc_timeout(served) -> None:  # noqa: ANN001
    """``grpc-timeout: 200m`` on a call the model answers after 2 s: DEADLINE_EXCEEDED from the server at about
    0.2 s (the client here never resets the stream), and the server keeps serving."""
    handle, model = served
    model.delay_s = 2.0
    port = handle.grpc_port
    with _connect(port) as s:
        t0 = time.monotonic()
        s.sendall(frame(HEADERS, END_HEADERS, 1, Encoder().encode(_request_headers(port, ("grpc-timeout", "200m"))))
                  + frame(DATA, END_STREAM, 1, _grpc_body(infer_request("echo", _tensors(1)))))
        headers, _ = _answer(_frames(s, _stream_end(1)), 1, Decoder())
        took = time.monotonic() - t0
    assert headers.get("grpc-status") == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0]), headers
    assert 0.15 < took < 1.5
    model.delay_s = 0.0
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        assert Stub(ch)("ModelInfer", _msg=infer_request("echo", _tensors(1))).outputs


def test_a_bad_preface_is_a_goaway_and_a_close(served) -> None:  # noqa: ANN001
    handle, _ = served
    with socket.create_connection(("127.0.0.1", handle.grpc_port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        got = _frames(s, lambda f: False, deadline_s=5)
    assert [f[0] for f in got][-1] == GOAWAY and b"preface" in got[-1][3]


def test_an_unknown_rpc_is_unimplemented_and_a_non_grpc_request_is_415(served) -> None:  # noqa: ANN001
    handle, _ = served
    port = handle.grpc_port
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        call = ch.unary_unary("/inference.GRPCInferenceService/NoSuchRpc")
        with pytest.raises(grpc.RpcError) as e:
            call(b"", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED and "NoSuchRpc" in e.value.details()
    with _connect(port) as s:
        h = [x for x in _request_headers(port) if x[0] != "content-type"] + [("content-type", "application/json")]
        s.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 1, Encoder().encode(h)))
        headers, _ = _answer(_frames(s, _stream_end(1)), 1, Decoder())
    assert headers[":status"] == "415"


def test_stop_lets_a_running_call_finish_and_refuses_new_ones() -> None:
    """A call the model answers after 0.5 s is running when the server is told to stop: it is answered OK;
    afterwards nothing listens on the gRPC port."""
    model = Slow(delay_s=0.5)
    result: dict[str, Any] = {}
    with serving(model, grpc_port=0) as handle:
        port = handle.grpc_port
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")

        def call() -> None:
            try:
                result["resp"] = Stub(ch)("ModelInfer", _msg=infer_request("echo", _tensors(2)))
            except grpc.RpcError as e:
                result["error"] = e

        t = threading.Thread(target=call)
        t.start()
        assert model.started.wait(10), "the call never reached the model"  # running when the server is told to stop
    t.join(10)
    ch.close()
    assert "error" not in result, result.get("error")
    _check(result["resp"], _tensors(2))
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


# ------------------------------------------------------------------------------------ bounds and stream errors
def _goaway_code(frames: list[tuple[int, int, int, bytes]]) -> int | None:
    return next((U32.unpack_from(p, 4)[0] for k, _, _, p in frames if k == GOAWAY), None)


def test_calls_past_their_deadline_before_they_start_are_answered_and_freed(served) -> None:  # noqa: ANN001
    """``grpc-timeout: 1n``: the deadline fires in the same pass as the request's end, before the call's task took
    a step; every call is still answered DEADLINE_EXCEEDED and no stream is left behind."""
    handle, _ = served
    port = handle.grpc_port
    enc, body = Encoder(), _grpc_body(infer_request("echo", _tensors(4)))
    stream_path = "/inference.GRPCInferenceService/ModelStreamInfer"
    with _connect(port) as s:
        out = b""
        for sid in range(1, 20, 2):
            path = INFER if sid < 17 else stream_path
            h = [x if x[0] != ":path" else (":path", path) for x in _request_headers(port, ("grpc-timeout", "1n"))]
            out += frame(HEADERS, END_HEADERS, sid, enc.encode(h))
            if path == INFER:
                out += frame(DATA, END_STREAM, sid, body)
        s.sendall(out)
        got = _frames(s, lambda f: False, deadline_s=3)
        dec = Decoder()
        status = {}
        for kind, _, sid, payload in got:
            if kind == HEADERS:
                status.setdefault(sid, {}).update(dec.decode(payload))
        assert {sid: h.get("grpc-status") for sid, h in status.items()} == {sid: "4" for sid in range(1, 20, 2)}
    assert all(not c.streams for c in handle.server.grpc.connections)


def test_a_frame_over_the_advertised_size_and_bad_settings_are_connection_errors(served) -> None:  # noqa: ANN001
    handle, _ = served
    with _connect(handle.grpc_port) as s:
        s.sendall(frame(DATA, 0, 1, b"\0" * (2**20 + 1)))
        assert _goaway_code(_frames(s, lambda f: f[0] == GOAWAY)) == 0x6  # FRAME_SIZE_ERROR
    with _connect(handle.grpc_port) as s:
        s.sendall(frame(SETTINGS, 0, 0, b"\x00\x05\x00\x00\x00\x00"))  # SETTINGS_MAX_FRAME_SIZE 0
        assert _goaway_code(_frames(s, lambda f: f[0] == GOAWAY)) == 0x1  # PROTOCOL_ERROR
    with grpc.insecure_channel(f"127.0.0.1:{handle.grpc_port}") as ch:
        assert Stub(ch)("ServerLive").live


def test_one_bad_call_ends_alone_and_a_unary_body_past_the_limit_is_refused_before_its_end(served) -> None:  # noqa: ANN001
    """A corrupt gzip message on stream 3 is INTERNAL on stream 3 while stream 1's call (the model answers after
    0.3 s) is answered OK on the same connection; a unary body that passes the limit without a prefix saying so
    is RESOURCE_EXHAUSTED before END_STREAM."""
    handle, model = served
    model.delay_s = 0.3
    port, enc, dec = handle.grpc_port, Encoder(), Decoder()
    with _connect(port) as s:
        s.sendall(frame(HEADERS, END_HEADERS, 1, enc.encode(_request_headers(port)))
                  + frame(DATA, END_STREAM, 1, _grpc_body(infer_request("echo", _tensors(2))))
                  + frame(HEADERS, END_HEADERS, 3, enc.encode(_request_headers(port, ("grpc-encoding", "gzip"))))
                  + frame(DATA, END_STREAM, 3, b"\x01\x00\x00\x00\x04junk"))
        got = _frames(s, _stream_end(1))
        h3, _ = _answer(got, 3, dec)
        h1, _ = _answer(got, 1, Decoder())
    assert h3.get("grpc-status") == "13" and "inflate" in h3.get("grpc-message", "")
    assert h1.get("grpc-status") == "0"
    model.delay_s = 0.0
    limit = handle.server.grpc.max_message_bytes
    with _connect(port) as s:
        s.sendall(frame(HEADERS, END_HEADERS, 1, Encoder().encode(_request_headers(port))) + frame(DATA, 0, 1, b"\0"))
        chunk = b"\0" * 2**20
        for _ in range(limit // len(chunk) + 2):
            s.sendall(frame(DATA, 0, 1, chunk))
        h, _ = _answer(_frames(s, _stream_end(1)), 1, Decoder())
    assert h.get("grpc-status") == "8" and "larger than max" in h.get("grpc-message", "")


def test_many_stream_messages_in_one_frame_are_all_answered(served) -> None:  # noqa: ANN001
    """5,000 ModelStreamInfer requests in one DATA frame with END_STREAM: parsed at most 1,024 ahead of the
    handler, and every one answered before the trailers."""
    handle, _ = served
    port = handle.grpc_port
    one = _grpc_body(infer_request("echo", _tensors(1)))
    h = [x if x[0] != ":path" else (":path", "/inference.GRPCInferenceService/ModelStreamInfer")
         for x in _request_headers(port)]
    with _connect(port) as s:
        s.sendall(frame(HEADERS, END_HEADERS, 1, Encoder().encode(h)) + frame(DATA, END_STREAM, 1, one * 5000))
        got = _frames(s, _stream_end(1), deadline_s=60)
        headers, data = _answer(got, 1, Decoder())
    assert headers.get("grpc-status") == "0"
    count, pos = 0, 0
    while pos < len(data):
        pos += 5 + int.from_bytes(data[pos + 1:pos + 5], "big")
        count += 1
    assert count == 5000


def test_a_client_that_indexes_gets_its_own_decoder_after_another_filled_the_cache(served) -> None:  # noqa: ANN001
    """The cache of decoded blocks serves only connections whose client emptied its table: a new client that
    indexes (its first block inserts into its table) decodes with its own decoder, and its second block, which
    refers to those entries, still decodes."""
    handle, _ = served
    port = handle.grpc_port
    zero = Encoder()
    zero.header_table_size = 0  # a client that honours our HEADER_TABLE_SIZE 0: its blocks are cached
    indexing = Encoder()
    body = _grpc_body(infer_request("echo", _tensors(1)))
    for enc in (zero, indexing):
        with _connect(port) as s:
            dec = Decoder()
            for sid in (1, 3):
                s.sendall(frame(HEADERS, END_HEADERS, sid, enc.encode(_request_headers(port)))
                          + frame(DATA, END_STREAM, sid, body))
                headers, _ = _answer(_frames(s, _stream_end(sid)), sid, dec)
                assert headers.get("grpc-status") == "0", headers
