"""The load client's HTTP/1.1 response side against a real local server that sends every framing form (issue 23, item 6).

A scripted raw-socket server (asyncio, 127.0.0.1, ephemeral port, its own thread and loop, stopped in the
fixture's teardown) answers each request it reads with the next scripted response, written piece by piece:
header spellings the old substring search missed (``Transfer-Encoding:chunked``, ``Transfer-Encoding: gzip,
chunked``, ``Connection:close``), a body that ends at connection close, interim 1xx answers, 204 and a 304 that
carries a ``Content-Length`` but no body, a truncated body, garbage. Keep-alive cases send a second request on
the same connection: a mis-framed first answer would corrupt the second.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from inferperf.loadgen.transport import DISCONNECTED, HttpTransport, Response, build_request

CLOSE = object()  # script step: close the connection


@dataclass
class WaitFor:
    """Script step: wait (at most 10 s) until the client sets ``event``."""

    event: threading.Event = field(default_factory=threading.Event)


class ScriptedServer:
    """Raw HTTP server on 127.0.0.1: request k (over all connections) gets ``responses[k]`` (a list of steps)."""

    def __init__(self) -> None:
        self.responses: list[list[object]] = []
        self.requests_per_connection: list[int] = []
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stop: asyncio.Event | None = None

    def _run(self) -> None:
        self.loop.run_until_complete(self._main())
        self.loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        n = len(self.requests_per_connection)
        self.requests_per_connection.append(0)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = [int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                          if line.startswith(b"content-length:")]  # fmt: skip
                if length:
                    await reader.readexactly(length[0])
                self.requests_per_connection[n] += 1
                for step in self.responses.pop(0):
                    if step is CLOSE:
                        return
                    if isinstance(step, WaitFor):
                        await self.loop.run_in_executor(None, step.event.wait, 10.0)
                    else:
                        writer.write(step)  # type: ignore[arg-type]
                        await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, IndexError):
            return
        finally:
            writer.close()

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(10.0), "scripted server did not start in 10 s"

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10.0)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer()
    s.start()
    try:
        yield s
    finally:
        s.stop()


def exchange(server: ScriptedServer, responses: list[list[object]], n: int | None = None,
             sink: object = None) -> tuple[list[Response], bool]:  # fmt: skip
    """Send ``n`` (default: one per scripted response) requests on ONE connection; (responses, still open)."""
    server.responses = list(responses)
    transport = HttpTransport(f"http://127.0.0.1:{server.port}")
    req = build_request(transport.endpoint, "POST", "/v2/models/m/infer", b'{"inputs":[]}')

    async def go() -> tuple[list[Response], bool]:
        conn = await transport.connect()
        out = []
        try:
            for _ in range(len(responses) if n is None else n):
                async with asyncio.timeout(10):
                    out.append(await (conn.send(req, sink) if sink is not None else conn.send(req)))
            return out, conn.open
        finally:
            conn.close()

    return asyncio.run(go())


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok!"


@pytest.mark.parametrize("te", [b"Transfer-Encoding:chunked", b"Transfer-Encoding: gzip, chunked",
                                b"transfer-encoding: CHUNKED ", b"Transfer-Encoding:  chunked"])  # fmt: skip
def test_chunked_bodies_in_every_spelling_leave_the_next_answer_intact(server: ScriptedServer, te: bytes) -> None:
    chunked = [b"HTTP/1.1 200 OK\r\n" + te + b"\r\n\r\n", b"5\r\nhello\r\n", b"6;ext=1\r\n world\r\n0\r\n\r\n"]
    got, still_open = exchange(server, [chunked, [OK]])
    assert got == [Response(200, 11), Response(200, 3)]
    assert still_open and server.requests_per_connection == [2]


@pytest.mark.parametrize("close", [b"Connection:close", b"connection: Close", b"Connection: keep-alive, close"])
def test_connection_close_in_any_spelling_closes_after_the_answer(server: ScriptedServer, close: bytes) -> None:
    got, still_open = exchange(server, [[b"HTTP/1.1 200 OK\r\n" + close + b"\r\nContent-Length: 2\r\n\r\nhi"]])
    assert got == [Response(200, 2)] and not still_open


def test_a_body_that_ends_at_connection_close_is_a_complete_answer(server: ScriptedServer) -> None:
    got, still_open = exchange(server, [[b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"abc", b"def", CLOSE]])
    assert got == [Response(200, 6)] and not still_open


def test_a_truncated_body_is_disconnected_not_an_answer(server: ScriptedServer) -> None:
    got, still_open = exchange(server, [[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", CLOSE]])
    assert got == [Response(0, 0, DISCONNECTED)] and not still_open
    got, _ = exchange(server, [[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", CLOSE]])
    assert got == [Response(0, 0, DISCONNECTED)]


def test_interim_1xx_answers_are_skipped_for_the_final_one(server: ScriptedServer) -> None:
    interim = [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n",
               b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\ndone"]  # fmt: skip
    got, still_open = exchange(server, [interim, [OK]])
    assert got == [Response(201, 4), Response(200, 3)] and still_open


def test_204_and_304_have_no_body_even_with_a_content_length(server: ScriptedServer) -> None:
    no_body = [[b"HTTP/1.1 204 No Content\r\n\r\n"], [b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n"], [OK]]
    got, still_open = exchange(server, no_body)
    assert got == [Response(204, 0), Response(304, 0), Response(200, 3)] and still_open
    assert server.requests_per_connection == [3]


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nX-Note: a\r\n folded\r\nContent-Length: 2\r\n\r\nhi",  # obs-fold: a user agent MUST accept it
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nhi",  # bare LF line ends (RFC 9112 section 2.2)
], ids=["obs-fold", "bare-lf"])  # fmt: skip
def test_folded_headers_and_bare_lf_lines_are_answers(server: ScriptedServer, answer: bytes) -> None:
    got, still_open = exchange(server, [[answer], [OK]])  # were 'disconnected', and the connection dropped
    assert got == [Response(200, 2), Response(200, 3)] and still_open


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!",
], ids=["cl-and-te", "two-cl"])  # fmt: skip
def test_ambiguous_framing_stays_refused(server: ScriptedServer, answer: bytes) -> None:
    got, still_open = exchange(server, [[answer]])  # RFC 9112 section 6.3: no guessing where the body ends
    assert got == [Response(0, 0, DISCONNECTED)] and not still_open


def test_errors_and_garbage(server: ScriptedServer) -> None:
    got, still_open = exchange(server, [[b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy"], [OK]])
    assert got == [Response(503, 4, "http_503"), Response(200, 3)] and still_open
    chunked_400 = [b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding:chunked\r\n\r\n", b"6\r\nshape \r\n",
                   b"5\r\nwrong\r\n0\r\n\r\n"]  # fmt: skip
    got, still_open = exchange(server, [chunked_400, [OK]])  # a 4xx body is kept, whatever its framing
    assert got == [Response(400, 11, "http_400", b"shape wrong"), Response(200, 3)] and still_open
    got, still_open = exchange(server, [[b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]])
    assert got == [Response(0, 0, DISCONNECTED)] and not still_open


class Recorder:
    """A stream sink that records (t_ns, status, headers) and (t_ns, chunk), and sets ``got_first`` on chunk 1."""

    def __init__(self) -> None:
        self.heads: list[tuple[int, int, list[tuple[bytes, bytes]]]] = []
        self.chunks: list[tuple[int, bytes]] = []
        self.got_first = threading.Event()

    def head(self, t_ns: int, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.heads.append((t_ns, status, headers))

    def chunk(self, t_ns: int, data: bytes) -> None:
        self.chunks.append((t_ns, bytes(data)))
        self.got_first.set()


def test_body_chunks_reach_the_sink_as_they_arrive_timestamped(server: ScriptedServer) -> None:
    sink = Recorder()
    wait = WaitFor(sink.got_first)  # the server sends the second event only after the client saw the first
    sse = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
           b"9\r\ndata: 1\n\n\r\n", wait, b"9\r\ndata: 2\n\n\r\n0\r\n\r\n"]  # fmt: skip
    from inferperf.clock import SYSTEM_CLOCK

    t0 = SYSTEM_CLOCK.now_ns()
    got, still_open = exchange(server, [sse, [OK]], n=2, sink=sink)
    t1 = SYSTEM_CLOCK.now_ns()
    assert got == [Response(200, 18), Response(200, 3)] and still_open
    assert [c for _, c in sink.chunks[:2]] == [b"data: 1\n\n", b"data: 2\n\n"]
    assert [c for _, c in sink.chunks[2:]] == [b"ok!"]
    (h_ns, status, headers), _ = sink.heads
    assert status == 200 and (b"content-type", b"text/event-stream") in headers
    stamps = [h_ns, *(t for t, _ in sink.chunks)]
    assert stamps == sorted(stamps) and t0 <= stamps[0] and stamps[-1] <= t1
    assert sink.chunks[0][0] < sink.chunks[1][0]  # two socket reads: the second came after the client saw the first


def test_an_answer_carries_when_its_first_bytes_were_read(server: ScriptedServer) -> None:
    """``first_ns`` is the read that carried the answer's head, not its last piece: a body held back by the server
    until the test says so arrives later than the head, so the client's read time (first bytes to complete)
    is visible; each answer of a kept connection gets its own."""
    from inferperf.clock import SYSTEM_CLOCK

    hold = threading.Event()
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"
    released: list[int] = []

    def release() -> None:
        released.append(SYSTEM_CLOCK.now_ns())
        hold.set()

    threading.Timer(0.5, release).start()
    t0 = SYSTEM_CLOCK.now_ns()
    got, _ = exchange(server, [[head, WaitFor(hold), b"ok!"], [OK]])
    t1 = SYSTEM_CLOCK.now_ns()
    assert got == [Response(200, 3), Response(200, 3)]
    first, second = got
    # the head was read before the body was let go, the second answer's head after it (judged against the moment
    # of release itself, not a fixed gap a stalled runner could shrink)
    assert t0 < first.first_ns < released[0] <= second.first_ns < t1
