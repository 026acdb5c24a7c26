"""The listening socket of ``inferperf serve`` (serve/listen.py ``bind_socket``)."""

from __future__ import annotations

import asyncio
import socket

from inferperf.serve.server import bind_socket


def test_connections_accepted_by_asyncio_get_tcp_nodelay() -> None:
    """asyncio sets TCP_NODELAY only on accepted sockets whose proto is IPPROTO_TCP; a listening socket
    made with proto 0 gave h11 (separate header and body writes) ~40 ms Nagle / delayed-ACK stalls."""
    sock = bind_socket("127.0.0.1", 0)
    assert sock.proto == socket.IPPROTO_TCP
    port = sock.getsockname()[1]
    seen: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            s = transport.get_extra_info("socket")
            seen.append(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
            for _ in range(100):  # bounded: the server side runs connection_made on its next loop pass
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())
    assert seen and seen[0] != 0
