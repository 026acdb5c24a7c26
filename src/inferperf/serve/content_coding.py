"""HTTP content codings of the infer route: compressed request bodies (``Content-Encoding: gzip | deflate``, as
Triton's clients send them with ``request_compression_algorithm``) and compressed answers (``Accept-Encoding``,
their ``response_compression_algorithm``).

A compressed request's ``Inference-Header-Content-Length`` counts the JSON header *after* decompression (Triton's
clients compress the whole body, header and binary tensors together), so the body is decompressed before the
binary extension splits it. Decompression is bounded by the model's body limit (``--max-body-bytes``): a body
that inflates past it is refused with 413 as soon as it does, without inflating the rest (a decompression bomb
costs at most the limit in memory). ``deflate`` is the zlib format (RFC 9110 section 8.4.1.2, what tritonclient's
``zlib.compress`` sends); a raw deflate stream is accepted too, as most servers do.

Sources: RFC 9110 sections 8.4 and 12.5.3 (content codings, Accept-Encoding with q-values); tritonclient's
``http/_client.py`` (``Content-Encoding`` / ``Accept-Encoding`` and the header length it sends); Python's
``zlib`` (``decompressobj`` with ``max_length``).
"""

from __future__ import annotations

import zlib

from .tensor_types import ProtocolError

#: the codings served, in the order an answer prefers them
CODINGS = ("gzip", "deflate")


def decompress(body: bytes, coding: str | None, limit: int) -> bytes:
    """``body`` decoded from ``coding`` (a ``Content-Encoding`` value; None or ``identity``: as it is).

    Raises:
        ProtocolError: 415 for a coding not served (names those served), 400 for a body that is not valid in its
            coding (or is cut short), 413 when the decoded body would exceed ``limit`` bytes.
    """
    c = (coding or "identity").strip().lower()
    if c == "identity":
        return body
    if c not in CODINGS:
        raise ProtocolError(f"Content-Encoding {coding!r} is not served: send gzip, deflate or identity", 415)
    wbits = 31 if c == "gzip" else 15  # gzip header / zlib header; a raw deflate stream is tried below
    try:
        return _inflate(body, wbits, limit)
    except zlib.error:
        if c == "deflate":
            try:
                return _inflate(body, -15, limit)
            except zlib.error:
                pass
    raise ProtocolError(f"request body is not valid {c} data (Content-Encoding: {c})", 400)


def _inflate(body: bytes, wbits: int, limit: int) -> bytes:
    d = zlib.decompressobj(wbits)
    out = d.decompress(body, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise ProtocolError(f"decompressed request body is over the limit ({limit} bytes): raise --max-body-bytes",
                            413)
    if not d.eof:
        raise zlib.error("truncated stream")
    return out


def accepted(accept_encoding: str | None) -> str | None:
    """The coding to answer in for an ``Accept-Encoding`` value: the served coding with the highest q-value
    (ties: gzip first), None for none (no header, only ``identity``, or every served coding at q=0).

    ``*`` stands for any coding not named. An unparsable q-value counts as q=0 (RFC 9110: the weight is a
    number from 0 to 1)."""
    if not accept_encoding:
        return None
    q: dict[str, float] = {}
    for part in accept_encoding.split(","):
        name, _, params = part.strip().partition(";")
        weight = 1.0
        for p in params.split(";"):
            k, _, v = p.strip().partition("=")
            if k.strip().lower() == "q":
                try:
                    weight = min(1.0, max(0.0, float(v)))
                except ValueError:
                    weight = 0.0
        if name.strip():
            q[name.strip().lower()] = weight
    star = q.get("*", 0.0)
    best = max(CODINGS, key=lambda c: (q.get(c, star), -CODINGS.index(c)))
    return best if q.get(best, star) > 0 else None


def compress(data: bytes, coding: str) -> bytes:
    """``data`` in ``coding`` (``gzip`` or ``deflate``: zlib's default level 6, as Triton's server uses)."""
    if coding == "gzip":
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    return zlib.compress(data, 6)


__all__ = ["CODINGS", "accepted", "compress", "decompress"]
