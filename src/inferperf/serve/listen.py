"""Where a server listens: the uvicorn stack (event loop and HTTP parser) and the sockets, checked before any model
loads, so a missing stack or a port in use is one :class:`~inferperf.errors.UsageError` line."""

from __future__ import annotations

import errno
import importlib.util
import socket

from ..errors import UsageError


LOOPS = ("auto", "uvloop", "asyncio")
HTTPS = ("auto", "httptools", "h11")


def uvicorn_stack(loop: str = "auto", http: str = "auto") -> tuple[str, str]:
    """(loop, http) implementations uvicorn will run: ``auto`` = uvloop / httptools when installed (they come
    with ``uvicorn[standard]``), else asyncio / h11; the measured choice is in BENCHMARKS.md ("Serving: the
    ASGI stack").

    Raises:
        UsageError: an unknown name, or one that is not installed (names the flag and the fix).
    """
    if loop not in LOOPS:
        raise UsageError(f"--loop {loop!r}: use one of {', '.join(LOOPS)}")
    if http not in HTTPS:
        raise UsageError(f"--http {http!r}: use one of {', '.join(HTTPS)}")
    for name, flag in ((loop, "--loop"), (http, "--http")):
        if name in ("uvloop", "httptools") and not importlib.util.find_spec(name):
            raise UsageError(f"{flag} {name}: {name} is not installed: pip install {name}, or pass {flag} auto")
    if loop == "auto":
        loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    if http == "auto":
        http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return loop, http


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0 = an ephemeral port).

    Raises:
        UsageError: the port is in use or the address cannot be bound (one line naming the fix).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on accepted sockets whose proto says TCP
    # (base_events._set_nodelay), and without it h11's separate header/body writes stall ~40 ms each on
    # Nagle + delayed ACK (measured: asyncio + h11 at 44 ms p50 for a 5 us model; uvloop sets it anyway)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is already in use: pass --port N (0 = any free port)") from None
        raise UsageError(f"cannot listen on {host}:{port} ({e.strerror}): check --host and --port") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def check_grpc_port(host: str, port: int) -> None:
    """Refuse a gRPC port that is in use now (gRPC binds it later, on the server's loop; port 0 is always free).

    Raises:
        UsageError: the port is in use or cannot be bound (one line naming ``--grpc-port``).
    """
    if port == 0:
        return
    try:
        bind_socket(host, port).close()
    except UsageError:
        raise UsageError(f"gRPC port {port} on {host} is already in use (or cannot be bound): pass --grpc-port N "
                         "(0 = any free port) or --no-grpc") from None


__all__ = ["HTTPS", "LOOPS", "bind_socket", "check_grpc_port", "uvicorn_stack"]
