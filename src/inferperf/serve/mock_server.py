"""Run the mock token server (:mod:`.mock_app`) on uvicorn: blocking for the CLI, or in a thread for tests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from ..clock import SYSTEM_CLOCK
from .mock_app import MockGenerateApp, TrueTimes, open_log
from .mock_engine import MockProfile
from .server import _Server, bind_socket, uvicorn_stack


class _MockServer(uvicorn.Server):
    #: SIGTERM/SIGINT stop it gracefully and are not re-raised afterwards (exit 0), as ``inferperf serve``.
    capture_signals = _Server.capture_signals
    def __init__(self, config: uvicorn.Config, on_started: Callable[[int], None] | None) -> None:
        super().__init__(config)
        self.on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.on_started is not None and sockets and not self.should_exit:
            self.on_started(sockets[0].getsockname()[1])


#: on SIGTERM/SIGINT, seconds the mock waits for open streams before it closes them (a deadline, never a hang)
SHUTDOWN_DEADLINE_S = 5


def _config(app: MockGenerateApp, loop: str, http: str) -> uvicorn.Config:
    lp, hp = uvicorn_stack(loop, http)
    return uvicorn.Config(app, loop=lp, http=hp, log_level="warning", access_log=False, lifespan="on",
                          timeout_graceful_shutdown=SHUTDOWN_DEADLINE_S)


def run_mock(profile: MockProfile, host: str = "127.0.0.1", port: int = 8000, log: Path | None = None,
             on_started: Callable[[int], None] | None = None, loop: str = "auto", http: str = "auto") -> TrueTimes:
    """Serve the mock until SIGINT/SIGTERM; returns the true times recorded (also in ``log``, JSON lines).

    Raises:
        UsageError: the port is in use, or a bad ``loop``/``http`` choice.
    """
    sock = bind_socket(host, port)
    fh = open_log(log)
    try:
        app = MockGenerateApp(profile, SYSTEM_CLOCK, TrueTimes(fh))
        _MockServer(_config(app, loop, http), on_started).run(sockets=[sock])
        return app.times
    finally:
        sock.close()
        if fh is not None:
            fh.close()


@dataclass
class MockHandle:
    """A mock running in a thread (:func:`start_mock`): ``url``, ``app`` (its ``times``), ``stop()``."""

    port: int
    app: MockGenerateApp
    server: _MockServer
    thread: threading.Thread | None = None
    sock: socket.socket | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask uvicorn to exit and join the thread (at most ``timeout_s``)."""
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout_s)
        if self.sock is not None:
            self.sock.close()


def start_mock(profile: MockProfile, ready_timeout_s: float = 10.0, **kwargs: Any) -> MockHandle:
    """Start the mock on an ephemeral 127.0.0.1 port in a thread and wait until it serves.

    Raises:
        RuntimeError: it did not start within ``ready_timeout_s``.
    """
    sock = bind_socket("127.0.0.1", 0)
    app = MockGenerateApp(profile, SYSTEM_CLOCK, TrueTimes())
    config = _config(app, kwargs.get("loop", "asyncio"), kwargs.get("http", "auto"))
    config.load()
    server = _MockServer(config, None)
    handle = MockHandle(sock.getsockname()[1], app, server, sock=sock)

    handle.thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                                     name=f"inferperf-mock-{handle.port}")
    handle.thread.start()
    deadline = SYSTEM_CLOCK.now_ns() + round(ready_timeout_s * 1e9)
    while not server.started:
        if not handle.thread.is_alive() or SYSTEM_CLOCK.now_ns() > deadline:
            handle.stop(2.0)
            sock.close()
            raise RuntimeError(f"mock server did not start within {ready_timeout_s} s")
        SYSTEM_CLOCK.sleep(0.01)
    return handle


__all__ = ["SHUTDOWN_DEADLINE_S", "MockHandle", "run_mock", "start_mock"]
