"""The gRPC listener of one ``ServeApp``: :class:`~.grpc_h2.H2ServerConnection` per client on the running event
loop (uvicorn's), stopped with the server's own shutdown (serve/grpc_h2.py's module docstring: the protocol)."""

from __future__ import annotations

import asyncio
from typing import Any

from .grpc_h2 import H2ServerConnection


class GrpcFront:
    """The gRPC server of one ``ServeApp``: :class:`H2ServerConnection` on the running event loop (uvicorn's),
    stopped with the server's own shutdown.

    Args:
        app: the ``ServeApp``.
        host, port: where to listen (port 0: any free port; :attr:`port` is the one bound once started).
        max_message_bytes: the largest request message accepted (gRPC's default is 4 MiB; a batch of 8
            224x224x3 FP32 images is 4.8 MB); 0 = the largest model body limit (``max_body_bytes``) plus 64 KiB, so a
            message a little over a model's limit is refused with that model's words (413, RESOURCE_EXHAUSTED,
            "raise --max-body-bytes") and one far over by the front itself (RESOURCE_EXHAUSTED, gRPC core's
            words). Answers are not limited (Triton sets both to INT32_MAX).
    """

    def __init__(self, app: Any, host: str, port: int, max_message_bytes: int = 0) -> None:
        from .grpc_service import GrpcService

        self.app, self.host, self.port = app, host, port
        limits = [m.options.max_body_bytes for m in app.all_models()] or [64 * 2**20]
        self.max_message_bytes = max_message_bytes or min(2**31 - 1, max(limits) + 65536)
        self.rpcs = GrpcService(app).rpcs()
        self.connections: set[H2ServerConnection] = set()
        self.server: asyncio.AbstractServer | None = None
        self.stopping = False

    async def start(self) -> int:
        """Bind and start serving; returns the port bound.

        Raises:
            RuntimeError: the address could not be bound (a port in use).
        """
        loop = asyncio.get_running_loop()
        try:
            self.server = await loop.create_server(lambda: H2ServerConnection(self), self.host, self.port,
                                                   reuse_address=True)
        except OSError as e:
            raise RuntimeError(f"gRPC could not bind {self.host}:{self.port}: {e.strerror or e}") from None
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self, grace_s: float | None = 30.0) -> None:
        """Refuse new RPCs at once; let those running finish for up to ``grace_s`` s, then cancel them."""
        if self.server is None:
            return
        self.stopping = True
        self.server.close()
        conns = list(self.connections)
        for c in conns:
            c.go_away()
        busy = [c.idle.wait() for c in conns if not c.idle.is_set()]
        if busy:
            try:
                await asyncio.wait_for(asyncio.gather(*busy), grace_s)
            except TimeoutError:
                pass
        for c in list(self.connections):
            c.cancel_all()
        await asyncio.sleep(0)
        self.server = None


__all__ = ["GrpcFront"]
