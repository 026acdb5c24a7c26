"""The load generator's bare HTTP/2 gRPC client (loadgen/grpc_h2.py) against scripted server frames: the preface
and SETTINGS, a call's frames, success and refusal by ``grpc-status``, flow control, PING, RST_STREAM, frames split
across reads (RFC 9113; gRPC's PROTOCOL-HTTP2.md)."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import hpack
import pytest

from inferperf.loadgen.grpc_client import code_status
from inferperf.loadgen.grpc_h2 import (DATA, END_HEADERS, END_STREAM, HEADERS, PING, PREFACE, RST_STREAM, SETTINGS,
                                       WINDOW_UPDATE, H2Connection, _frame, request_block)


class Wire:
    """A transport that keeps what the client wrote, parsed into frames."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, b: bytes) -> None:
        self.data += b

    def close(self) -> None:
        self.closed = True

    def frames(self) -> list[tuple[int, int, int, bytes]]:
        buf, out = bytes(self.data), []
        if buf.startswith(PREFACE):
            buf = buf[len(PREFACE):]
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            out.append((buf[3], buf[4], struct.unpack(">I", buf[5:9])[0], buf[9:9 + n]))
            buf = buf[9 + n:]
        self.data.clear()
        return out


def _headers(stream: int, fields: list[tuple[str, str]], end: bool = False) -> bytes:
    enc = hpack.Encoder()
    enc.header_table_size = 0
    return _frame(HEADERS, END_HEADERS | (END_STREAM if end else 0), stream, enc.encode(fields, huffman=True))


async def _connected(settings: bytes = b"") -> tuple[H2Connection, Wire]:
    conn = H2Connection(request_block("/inference.GRPCInferenceService/ModelInfer", "127.0.0.1:8001",
                                      (("authorization", "Bearer k"),)), status_of=code_status)
    wire = Wire()
    conn.connection_made(wire)  # type: ignore[arg-type]
    conn.data_received(_frame(SETTINGS, 0, 0, settings))
    assert conn.ready.done()
    return conn, wire


def test_the_preface_settings_and_the_request_block() -> None:
    async def go() -> None:
        conn, wire = await _connected()
        frames = wire.frames()
        kinds = [(k, f, s) for k, f, s, _ in frames]
        assert kinds == [(SETTINGS, 0, 0), (WINDOW_UPDATE, 0, 0), (SETTINGS, 1, 0)]  # ours, the window, the ACK
        assert dict(struct.iter_unpack(">HI", frames[0][3])) == {1: 0, 2: 0, 4: 2**31 - 1}
        block = dict(hpack.Decoder().decode(conn.block))
        assert block == {":method": "POST", ":scheme": "http", ":path": "/inference.GRPCInferenceService/ModelInfer",
                         ":authority": "127.0.0.1:8001", "content-type": "application/grpc", "te": "trailers",
                         "authorization": "Bearer k"}

    asyncio.run(go())


def _answer(conn: H2Connection, stream: int, body: bytes, status: str = "0", split: bool = False) -> None:
    frames = (_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
              + _frame(DATA, 0, stream, b"\x00" + struct.pack(">I", len(body)) + body)
              + _headers(stream, [("grpc-status", status), ("grpc-message", "")], end=True))
    if split:  # every byte its own read: frames are reassembled
        for i in range(len(frames)):
            conn.data_received(frames[i:i + 1])
    else:
        conn.data_received(frames)


@pytest.mark.parametrize("split", [False, True])
def test_a_call_is_one_stream_and_succeeds_on_grpc_status_0(split: bool) -> None:
    async def go() -> None:
        conn, wire = await _connected()
        wire.frames()
        for stream in (1, 3):  # odd ids, increasing
            task = asyncio.ensure_future(conn.send(b"hello"))
            await asyncio.sleep(0)
            (h, d) = wire.frames()
            assert (h[0], h[1], h[2], h[3]) == (HEADERS, END_HEADERS, stream, conn.block)
            assert (d[0], d[1], d[2], d[3]) == (DATA, END_STREAM, stream, b"\x00\x00\x00\x00\x05hello")
            _answer(conn, stream, b"answer!", split=split)
            r = await task
            assert (r.status, r.body_len, r.error_kind) == (200, 7, None) and r.first_ns > 0

    asyncio.run(go())


def test_a_trailers_only_refusal_is_counted_by_its_code_with_its_message() -> None:
    async def go() -> None:
        conn, wire = await _connected()
        task = asyncio.ensure_future(conn.send(b"x"))
        await asyncio.sleep(0)
        conn.data_received(_headers(1, [(":status", "200"), ("content-type", "application/grpc"),
                                        ("grpc-status", "14"), ("grpc-message", "queue%20is%20full")], end=True))
        r = await task
        assert (r.status, r.body_len, r.error_kind, r.error_body) == (503, 0, "grpc_unavailable", b"queue is full")
        assert conn.open  # a refusal is not the end of the connection

    asyncio.run(go())


def test_flow_control_waits_for_the_windows_and_splits_by_frame_size() -> None:
    """The server allows 10 bytes a stream and frames of 16 bytes: a 30-byte message (35 with its prefix) goes as
    10, then (after a stream WINDOW_UPDATE of 20) 16 + 4, then (after 5 more) the last 5 with END_STREAM."""

    async def go() -> None:
        conn, wire = await _connected(struct.pack(">HI", 0x4, 10) + struct.pack(">HI", 0x5, 16))
        wire.frames()
        task = asyncio.ensure_future(conn.send(b"m" * 30))
        await asyncio.sleep(0)
        sent = [(k, f, len(p)) for k, f, _, p in wire.frames()]
        assert sent == [(HEADERS, END_HEADERS, len(conn.block)), (DATA, 0, 10)]
        conn.data_received(_frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 20)))
        await asyncio.sleep(0)
        assert [(k, f, len(p)) for k, f, _, p in wire.frames()] == [(DATA, 0, 16), (DATA, 0, 4)]
        conn.data_received(_frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 5)))
        await asyncio.sleep(0)
        assert [(k, f, len(p)) for k, f, _, p in wire.frames()] == [(DATA, END_STREAM, 5)]
        _answer(conn, 1, b"ok")
        assert (await task).status == 200

    asyncio.run(go())


def test_ping_is_answered_and_a_reset_stream_is_a_disconnected_request() -> None:
    async def go() -> None:
        conn, wire = await _connected()
        wire.frames()
        conn.data_received(_frame(PING, 0, 0, b"12345678"))
        assert wire.frames() == [(PING, 1, 0, b"12345678")]
        task = asyncio.ensure_future(conn.send(b"x"))
        await asyncio.sleep(0)
        conn.data_received(_frame(RST_STREAM, 0, 1, struct.pack(">I", 2)))
        r = await task
        assert r.error_kind == "disconnected" and b"RST_STREAM" in r.error_body
        conn.connection_lost(None)
        assert (await conn.send(b"y")).error_kind == "disconnected" and not conn.open

    asyncio.run(go())


def test_a_cancelled_call_closes_the_connection() -> None:
    async def go() -> Any:
        conn, wire = await _connected()
        task = asyncio.ensure_future(conn.send(b"x"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert wire.closed and not conn.open

    asyncio.run(go())


def test_goaway_ends_the_connection_and_an_unreadable_block_is_a_client_error() -> None:
    from inferperf.loadgen.grpc_h2 import GOAWAY

    async def go() -> None:
        conn, wire = await _connected()
        task = asyncio.ensure_future(conn.send(b"x"))
        await asyncio.sleep(0)
        conn.data_received(_frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0)))  # stream 1 is still answered
        assert not conn.open and not wire.closed
        _answer(conn, 1, b"ok")
        assert (await task).status == 200 and wire.closed
        conn2, wire2 = await _connected()
        task = asyncio.ensure_future(conn2.send(b"x"))
        await asyncio.sleep(0)
        conn2.data_received(_frame(HEADERS, END_HEADERS, 1, b"\xbf"))  # dynamic-table index 63: the table is empty
        r = await task
        assert r.error_kind == "client_error" and wire2.closed

    asyncio.run(go())
