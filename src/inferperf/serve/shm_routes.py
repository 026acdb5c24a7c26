"""The HTTP routes of Triton's shared-memory extension over one server's :class:`~inferperf.serve.shm.SharedMemory`:
``/v2/systemsharedmemory[/region/NAME]/status``, ``.../region/NAME/register`` (body ``{key, offset, byte_size}``),
``/v2/systemsharedmemory[/region/NAME]/unregister``; and the CUDA ones a CPU server answers (none registered:
status lists none, unregister has nothing to do, register is refused), which tritonclient's examples call.

Sources: triton-inference-server/server ``docs/protocol/extension_shared_memory.md``.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .shm import SharedMemory, ShmError

_JSON = "application/json"


def _json(doc: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status_code=status, media_type=_JSON)


def _error(message: str, status: int) -> Response:
    return _json({"error": message}, status)


def shm_routes(shm: SharedMemory) -> list[Route]:
    """The ten shared-memory routes over ``shm``."""

    async def status(request: Request) -> Response:
        try:
            return _json(shm.status(request.path_params.get("region")))
        except ShmError as e:
            return _error(str(e), e.status)

    async def register(request: Request) -> Response:
        usage = 'register needs a JSON body {"key": str, "offset": int, "byte_size": int}'
        try:
            body = orjson.loads(await request.body() or b"{}")
        except orjson.JSONDecodeError:
            return _error(usage, 400)
        try:
            if not isinstance(body, dict):
                raise ShmError(usage)
            shm.register(request.path_params["region"], body.get("key"), body.get("offset", 0), body.get("byte_size"))
        except ShmError as e:
            return _error(str(e), e.status)
        return _json({})

    async def unregister(request: Request) -> Response:
        try:
            await shm.unregister(request.path_params.get("region"))
        except ShmError as e:
            return _error(str(e), e.status)
        return _json({})

    async def cuda(request: Request) -> Response:
        path = request.url.path
        if path.endswith("/register"):
            return _error("CUDA shared memory is not served (a CPU server): use system shared memory", 400)
        if path.endswith("/status") and "region" in request.path_params:
            return _error(f"Unable to find cuda shared memory region: '{request.path_params['region']}'", 404)
        return _json([] if path.endswith("/status") else {})

    sys_, cuda_ = "/v2/systemsharedmemory", "/v2/cudasharedmemory"
    return [
        Route(f"{sys_}/status", status), Route(f"{sys_}/region/{{region}}/status", status),
        Route(f"{sys_}/region/{{region}}/register", register, methods=["POST"]),
        Route(f"{sys_}/unregister", unregister, methods=["POST"]),
        Route(f"{sys_}/region/{{region}}/unregister", unregister, methods=["POST"]),
        Route(f"{cuda_}/status", cuda), Route(f"{cuda_}/region/{{region}}/status", cuda),
        Route(f"{cuda_}/region/{{region}}/register", cuda, methods=["POST"]),
        Route(f"{cuda_}/unregister", cuda, methods=["POST"]),
        Route(f"{cuda_}/region/{{region}}/unregister", cuda, methods=["POST"]),
    ]  # fmt: skip


__all__ = ["shm_routes"]
