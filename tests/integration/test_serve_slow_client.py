"""Slow clients (issue 14, item 6): a client trickling one byte every 100 ms delays nobody, and is answered
408 and closed at the request-receipt deadline, though each byte would reset a plain keep-alive timer."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from inferperf.serve.options import ConnectionLimits
from inferperf.serve.server import prepare_repository, start

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repository"
DEADLINE_S = 1.0
BODY = b'{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'


@pytest.fixture(scope="module")
def server():
    app = prepare_repository(EXAMPLE, mode="explicit", load_models=["scale"])
    app.limits = ConnectionLimits(request_receipt_timeout_s=DEADLINE_S)
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    try:
        yield handle
    finally:
        handle.stop()


def _trickle(port: int, at_once: bytes, data: bytes, out: dict) -> None:
    """Send ``at_once``, then ``data`` one byte per 100 ms (bounded by its length); record the reply and
    the seconds from the first trickled byte to the end of the reply."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        if at_once:
            s.sendall(at_once)
        t0 = time.monotonic()
        for b in data:
            try:
                s.sendall(bytes([b]))
            except OSError:
                break  # the server closed the connection
            time.sleep(0.1)
        s.settimeout(5)
        chunks = []
        try:
            while chunk := s.recv(4096):
                chunks.append(chunk)
        except OSError:
            pass
        out["reply"], out["s"] = b"".join(chunks), time.monotonic() - t0
    finally:
        s.close()


@pytest.mark.parametrize("part", ["headers", "body"])
def test_trickling_client_gets_408_at_the_deadline_and_delays_nobody(server, part: str) -> None:
    head = (f"POST /v2/models/scale/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n").encode()
    at_once, data = (head, BODY) if part == "body" else (b"", head + BODY)  # body: headers at once, then a byte at a time
    out: dict = {}
    t = threading.Thread(target=_trickle, args=(server.port, at_once, data, out))
    t.start()
    latencies = []
    with httpx.Client(timeout=10) as c:
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:  # other clients, meanwhile: answered at their usual speed
            t0 = time.monotonic()
            r = c.post(f"{server.url}/v2/models/scale/infer", content=BODY, headers={"Content-Type": "application/json"})
            latencies.append(time.monotonic() - t0)
            assert r.status_code == 200
    t.join(timeout=20)
    assert latencies and max(latencies) < 0.5, max(latencies)
    assert out["reply"].startswith(b"HTTP/1.1 408"), out["reply"][:200]
    assert b"request not received within 1 s" in out["reply"]
    assert DEADLINE_S * 0.9 <= out["s"] < 5.0  # answered at the deadline, not when the bytes ran out (~8 s)
