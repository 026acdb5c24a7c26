"""HTTP/2 framing and the few HPACK pieces gRPC over HTTP/2 needs, shared by the load generator's client
(:mod:`inferperf.loadgen.grpc_h2`) and the server's gRPC front (:mod:`inferperf.serve.grpc_h2`).

Sources: RFC 9113 (HTTP/2: section 4.1 frame layout, 6 frame types, 6.5.2 settings, 6.9 flow control), RFC 7541
(HPACK: 5.1 integers, 6.2.2 literals without indexing), grpc/grpc ``doc/PROTOCOL-HTTP2.md`` (gRPC's
length-prefixed messages, ``grpc-status`` / ``grpc-message`` trailers, ``grpc-timeout``).
"""

from __future__ import annotations

import struct
from urllib.parse import quote

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: frame types (RFC 9113 section 6)
DATA, HEADERS, PRIORITY_FRAME, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
#: frame flags
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
#: SETTINGS identifiers (RFC 9113 section 6.5.2)
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 0x1, 0x2, 0x3, 0x4, 0x5
MAX_HEADER_LIST_SIZE = 0x6
#: error codes (RFC 9113 section 7)
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL = 0x0, 0x1, 0x3, 0x6, 0x7, 0x8
COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 0x9, 0xB
#: the largest flow-control window there is (2^31 - 1), and the default a peer starts with
MAX_WINDOW, DEFAULT_WINDOW = 2**31 - 1, 65535
#: the largest frame payload a peer may allow (2^24 - 1), and the default
MAX_FRAME_LIMIT, DEFAULT_FRAME = 2**24 - 1, 16384
U32 = struct.Struct(">I")
#: a gRPC message's prefix: compressed flag (1 byte), length (4 bytes, big-endian)
MESSAGE_PREFIX = struct.Struct(">BI")


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One frame: 24-bit length, type, flags, 31-bit stream id, payload (RFC 9113 section 4.1)."""
    return (len(payload) << 8 | kind).to_bytes(4, "big") + bytes((flags,)) + U32.pack(stream) + payload


def settings(**values: int) -> bytes:
    """A SETTINGS payload of ``NAME=value`` pairs (names as this module's constants, e.g. ``INITIAL_WINDOW_SIZE``)."""
    ids = {"HEADER_TABLE_SIZE": HEADER_TABLE_SIZE, "ENABLE_PUSH": ENABLE_PUSH, "INITIAL_WINDOW_SIZE": INITIAL_WINDOW_SIZE,
           "MAX_CONCURRENT_STREAMS": MAX_CONCURRENT_STREAMS, "MAX_FRAME_SIZE": MAX_FRAME_SIZE,
           "MAX_HEADER_LIST_SIZE": MAX_HEADER_LIST_SIZE}
    return b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items())


def read_settings(payload: bytes) -> dict[int, int]:
    """A SETTINGS payload as ``{identifier: value}`` (a trailing partial entry is ignored)."""
    return dict(struct.unpack_from(">HI", payload, i) for i in range(0, len(payload) - 5, 6))


def hpack_int(n: int, prefix_bits: int) -> bytes:
    """RFC 7541 section 5.1 integer with a ``prefix_bits`` prefix (the high bits left 0: no Huffman flag)."""
    limit = (1 << prefix_bits) - 1
    if n < limit:
        return bytes((n,))
    out, n = bytearray((limit,)), n - limit
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    out.append(n)
    return bytes(out)


def literal(name: bytes, value: bytes) -> bytes:
    """An HPACK literal header field without indexing, new name, no Huffman coding (RFC 7541 section 6.2.2)."""
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def grpc_message_value(text: str) -> bytes:
    """``grpc-message``'s value: UTF-8, percent-encoded outside printable ASCII and ``%`` (PROTOCOL-HTTP2.md)."""
    return quote(text, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~").encode("ascii")


def read_frame(buf: bytearray, pos: int) -> tuple[int, int, int, bytes, int] | None:
    """The frame at ``pos`` of ``buf``: ``(type, flags, stream id, payload, position after it)``, or None when it
    has not all arrived yet."""
    if len(buf) - pos < 9:
        return None
    after = pos + 9 + int.from_bytes(buf[pos:pos + 3], "big")
    if len(buf) < after:
        return None
    return buf[pos + 3], buf[pos + 4], U32.unpack_from(buf, pos + 5)[0] & 0x7FFFFFFF, bytes(buf[pos + 9:after]), after


def strip_padding(flags: int, payload: bytes) -> bytes:
    """A DATA or HEADERS payload without its padding (PADDED flag: 1 byte pad length first, that many at the end).

    Raises:
        ValueError: the pad length is longer than the payload (a PROTOCOL_ERROR).
    """
    if not flags & PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ValueError("padding longer than the frame")
    return payload[1:len(payload) - payload[0]]


__all__ = ["ACK", "CANCEL", "COMPRESSION_ERROR", "ENHANCE_YOUR_CALM", "FLOW_CONTROL_ERROR", "FRAME_SIZE_ERROR", "CONTINUATION", "DATA", "DEFAULT_FRAME", "DEFAULT_WINDOW", "END_HEADERS", "END_STREAM",
           "GOAWAY", "HEADERS", "MAX_FRAME_LIMIT", "MAX_WINDOW", "MESSAGE_PREFIX", "NO_ERROR", "PADDED", "PING",
           "PREFACE", "PRIORITY", "PRIORITY_FRAME", "PROTOCOL_ERROR", "PUSH_PROMISE", "REFUSED_STREAM", "RST_STREAM", "SETTINGS", "U32", "WINDOW_UPDATE",
           "frame", "grpc_message_value", "hpack_int", "literal", "read_frame", "read_settings", "settings", "strip_padding"]
