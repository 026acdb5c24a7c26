"""API-key authentication for ``inferperf serve --api-key KEY`` (or ``INFERPERF_API_KEY``).

Every route needs ``Authorization: Bearer KEY`` except ``/v2/health/*`` (probes of orchestrators carry
no credentials) and ``/metrics`` (Prometheus scrapes; ``--metrics-auth`` protects it too). The key is
compared with :func:`hmac.compare_digest` (constant time in the length of the inputs: no timing leak of
how many leading bytes matched). A missing or wrong key is 401 with ``WWW-Authenticate: Bearer`` (RFC
6750 section 3) and a ``{"error": ...}`` body; nothing else about the request is read.
"""

from __future__ import annotations

import hmac
from typing import Any

import orjson

from ..errors import UsageError

OPEN_PREFIXES = ("/v2/health/",)


def check_api_key(key: str) -> str:
    """``key`` if it can be an API key (not empty, not only blanks).

    Raises:
        UsageError: an empty key (the ``--api-key`` line the CLI prints too).
    """
    if not key or not key.strip():
        raise UsageError("--api-key is empty: give a key (or unset INFERPERF_API_KEY)")
    return key


class ApiKeyMiddleware:
    """Pure-ASGI middleware refusing HTTP requests without the bearer ``key`` (see the module docstring)."""

    def __init__(self, app: Any, key: str, metrics_auth: bool = False) -> None:
        check_api_key(key)
        self.app = app
        self._expected = f"Bearer {key}".encode()
        self._open_paths = () if metrics_auth else ("/metrics",)

    def _open(self, path: str) -> bool:
        return path.startswith(OPEN_PREFIXES) or path in self._open_paths

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self._open(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        what = "missing" if not given else "wrong"
        body = orjson.dumps({"error": f"{what} API key: send Authorization: Bearer <key> (the server's --api-key)"})
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                (b"content-length", str(len(body)).encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})
