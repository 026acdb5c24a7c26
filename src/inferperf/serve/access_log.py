"""Structured access log: one JSON object per HTTP request (``inferperf serve --access-log FILE|-``).

Fields: ``ts`` (ISO 8601 UTC, ms), ``request_id`` (the ``X-Request-Id`` answered), ``method``, ``path``,
``status``, ``bytes_in`` / ``bytes_out`` (body bytes), ``ms`` (first byte of the request handled to the
last byte of the response sent), ``client`` (``host:port``); infer requests add ``model``, ``version``,
``rows``, ``queue_ms`` and ``compute_ms`` (the batch's model call) when the request reached a batch.
Written as JSON lines with orjson, flushed per line (``-`` = stderr), by a pure-ASGI middleware, so
refused requests (401, 404, 413, 503) are logged too.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import orjson

from ..clock import SYSTEM_CLOCK, Clock, utc_now
from ..errors import UsageError


class AccessLog:
    """Where lines go: a file opened for appending (``path``), or stderr for ``"-"``.

    Raises:
        UsageError: the file cannot be opened for appending (the ``--access-log`` line the CLI prints too).
    """

    def __init__(self, target: str | Path) -> None:
        self._own = str(target) != "-"
        try:
            self._out: TextIO = open(target, "a", buffering=1) if self._own else sys.stderr  # noqa: SIM115
        except OSError as e:
            raise UsageError(f"--access-log '{target}' cannot be written ({e.strerror}): check the path") from None

    def write(self, record: dict[str, Any]) -> None:
        """Write one record as a JSON line."""
        self._out.write(orjson.dumps(record).decode() + "\n")
        self._out.flush()

    def close(self) -> None:
        """Close the file (not stderr)."""
        if self._own:
            self._out.close()


class AccessLogMiddleware:
    """Pure-ASGI middleware writing one :class:`AccessLog` record per HTTP request.

    The app adds infer fields through ``scope["state"]["access"]`` (a dict); the request id comes from
    ``scope["state"]["request_id"]`` (set by the request-id middleware outside this one). ``ms`` is timed on
    ``clock`` (``now_ns``, the app's); ``ts`` is ``wall()`` (UTC) when the request ends.
    """

    def __init__(self, app: Any, log: AccessLog, clock: Clock = SYSTEM_CLOCK,
                 wall: Callable[[], dt.datetime] = utc_now) -> None:  # fmt: skip
        self.app, self.log, self.clock, self.wall = app, log, clock, wall

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = self.clock.now_ns()
        counts = {"in": 0, "out": 0, "status": 0}
        state = scope.setdefault("state", {})
        state["access"] = {}

        async def counting_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                counts["in"] += len(message.get("body", b""))
            return message

        async def counting_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                counts["status"] = message["status"]
            elif message["type"] == "http.response.body":
                counts["out"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, counting_receive, counting_send)
        finally:
            client = scope.get("client")
            rid = state.get("request_id", b"")
            record = {
                "ts": self.wall().isoformat(timespec="milliseconds"),
                "request_id": rid.decode() if isinstance(rid, bytes) else str(rid),
                "method": scope.get("method"), "path": scope.get("path"), "status": counts["status"] or 500,
                "bytes_in": counts["in"], "bytes_out": counts["out"],
                "ms": round((self.clock.now_ns() - t0) / 1e6, 3),
                "client": f"{client[0]}:{client[1]}" if client else None,
                **state.get("access", {}),
            }  # fmt: skip
            self.log.write(record)
