"""Compressed request bodies and answers (issue 41 item 4): the codings Triton's clients send, the bound on a
decompression bomb, and Accept-Encoding's q-values."""

from __future__ import annotations

import gzip
import zlib

import pytest

from inferperf.serve.content_coding import accepted, compress, decompress
from inferperf.serve.tensor_types import ProtocolError

DATA = b'{"inputs": []}' * 100


@pytest.mark.parametrize(("coding", "body"), [("gzip", gzip.compress(DATA)), ("deflate", zlib.compress(DATA)),
                                              ("deflate", zlib.compress(DATA)[2:-4]),  # raw deflate
                                              ("GZIP", gzip.compress(DATA)), ("identity", DATA), (None, DATA)])
def test_each_coding_decodes_to_the_body(coding: str | None, body: bytes) -> None:
    assert decompress(body, coding, 10_000) == DATA


def test_a_bomb_is_refused_at_the_limit_without_inflating_the_rest() -> None:
    bomb = gzip.compress(b"\0" * 50_000_000)  # 50 MB of zeros in ~49 kB
    assert len(bomb) < 100_000
    with pytest.raises(ProtocolError) as e:
        decompress(bomb, "gzip", 1_000_000)
    assert e.value.status == 413 and "raise --max-body-bytes" in str(e.value)
    assert decompress(gzip.compress(b"x" * 1000), "gzip", 1000) == b"x" * 1000  # exactly the limit passes


@pytest.mark.parametrize(("coding", "body", "status"), [("br", DATA, 415), ("gzip", b"not gzip", 400),
                                                        ("gzip", gzip.compress(DATA)[:-12], 400),
                                                        ("deflate", b"\xff\xfe", 400)])
def test_a_coding_not_served_or_a_broken_body_is_refused(coding: str, body: bytes, status: int) -> None:
    with pytest.raises(ProtocolError) as e:
        decompress(body, coding, 10_000)
    assert e.value.status == status


@pytest.mark.parametrize(("header", "chosen"), [(None, None), ("", None), ("identity", None), ("gzip", "gzip"),
                                                ("deflate", "deflate"), ("gzip, deflate", "gzip"),
                                                ("deflate;q=1, gzip;q=0.5", "deflate"), ("gzip;q=0", None),
                                                ("*", "gzip"), ("*;q=0, deflate", "deflate"), ("br", None),
                                                ("gzip;q=abc, deflate;q=0.1", "deflate")])
def test_accept_encoding_chooses_by_q_value(header: str | None, chosen: str | None) -> None:
    assert accepted(header) == chosen


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_an_answer_compressed_decodes_back(coding: str) -> None:
    assert decompress(compress(DATA, coding), coding, len(DATA)) == DATA
