"""Slow clients (issue 14, item 6): a client trickling one byte every 100 ms delays nobody, and is answered
408 and closed at the request-receipt deadline, though each byte would reset a plain keep-alive timer."""

from __future__ import annotations

import select
import socket
import threading
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


def _trickle(port: int, at_once: bytes, data: bytes, out: dict, replied: threading.Event) -> None:
    """Send ``at_once``, then ``data`` one byte per 100 ms until the server answers (bounded by its length);
    record the reply and how many of the trickled bytes were sent before it came."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    sent = 0
    try:
        if at_once:
            s.sendall(at_once)
        for b in data:
            if select.select([s], [], [], 0.1)[0]:  # a reply (or the close) came: stop sending
                break
            try:
                s.sendall(bytes([b]))
            except OSError:
                break  # the server closed the connection
            sent += 1
        s.settimeout(5)
        chunks = []
        try:
            while chunk := s.recv(4096):
                chunks.append(chunk)
        except OSError:
            pass
        out["reply"], out["sent"] = b"".join(chunks), sent
    finally:
        replied.set()
        s.close()


@pytest.mark.parametrize("part", ["headers", "body"])
def test_trickling_client_gets_408_at_the_deadline_and_delays_nobody(server, part: str) -> None:
    """Order and counts, no wall-clock threshold: other clients are answered while the trickling request is
    still arriving (before its 408), and the 408 comes before the trickled bytes run out (at the receipt
    deadline, not at the end of the request); the exact deadline is checked on fake time in
    tests/unit/test_serve_http_protocol.py."""
    head = (f"POST /v2/models/scale/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n").encode()
    at_once, data = (head, BODY) if part == "body" else (b"", head + BODY)  # body: headers at once, then a byte at a time
    out: dict = {}
    replied = threading.Event()
    t = threading.Thread(target=_trickle, args=(server.port, at_once, data, out, replied))
    t.start()
    answered_before_408 = 0
    with httpx.Client(timeout=10) as c:
        for _ in range(2000):  # other clients, meanwhile (bounded; ends once the trickler got its reply)
            if replied.is_set():
                break
            r = c.post(f"{server.url}/v2/models/scale/infer", content=BODY, headers={"Content-Type": "application/json"})
            assert r.status_code == 200
            answered_before_408 += not replied.is_set()
    t.join(timeout=30)
    assert not t.is_alive()
    assert answered_before_408 >= 1  # served while the trickling request was still arriving
    assert out["reply"].startswith(b"HTTP/1.1 408"), out["reply"][:200]
    assert b"request not received within 1 s" in out["reply"]
    assert out["sent"] < len(data)  # answered at the deadline, before the bytes ran out (~8-15 s of them)
