"""A library server refuses what ``inferperf serve`` refuses, with the same line (issue 25 item 2).

Connection limits, the listening port and grace, the API key and the model-control mode are checked by the
library (:class:`~inferperf.serve.options.ConnectionLimits`, :class:`~inferperf.serve.options.ListenOptions`,
:func:`~inferperf.serve.server.start` / ``run_server``, ``ServeApp.require_api_key``,
:func:`~inferperf.serve.server.prepare_repository`); the CLI calls the same checks before any model loads
and prints their line (tests/e2e/test_serve_cli.py, tests/integration/test_serve_auth.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from inferperf.errors import UsageError, settings_message
from inferperf.serve.app import ServeApp
from inferperf.serve.options import ConnectionLimits, ListenOptions
from inferperf.serve.server import prepare_repository, run_server, start


def _line(make: Any) -> str:
    with pytest.raises(ValidationError) as e:
        make()
    return settings_message(e.value)


@pytest.mark.parametrize("kw,expect", [
    ({"request_receipt_timeout_s": -2.0}, "--request-receipt-timeout-s -2: use seconds >= 0 (0 = no deadline)"),
    ({"timeout_keep_alive_s": 0}, "--timeout-keep-alive-s 0: use seconds >= 1"),
    ({"limit_concurrency": -1}, "--limit-concurrency -1: use 0 (no limit) or more"),
])
def test_connection_limits_refuse_out_of_range(kw: dict[str, Any], expect: str) -> None:
    assert _line(lambda: ConnectionLimits(**kw)) == expect


def test_connection_limits_accept_the_edges() -> None:
    c = ConnectionLimits(request_receipt_timeout_s=0.0, timeout_keep_alive_s=1, limit_concurrency=0)
    assert (c.request_receipt_timeout_s, c.timeout_keep_alive_s, c.limit_concurrency) == (0.0, 1, 0)


@pytest.mark.parametrize("kw,expect", [
    ({"port": 70000}, "--port 70000 is not a TCP port: use 0..65535"),
    ({"port": -1}, "--port -1 is not a TCP port: use 0..65535"),
    ({"grace_s": -1.0}, "--grace-s -1: use seconds >= 0"),
])
def test_listen_options_refuse_a_bad_port_or_grace(kw: dict[str, Any], expect: str) -> None:
    assert _line(lambda: ListenOptions(**kw)) == expect


def test_listen_options_accept_the_edges() -> None:
    assert ListenOptions(port=0).port == 0 and ListenOptions(port=65535, grace_s=0.0).grace_s == 0.0


def test_start_and_run_server_refuse_before_binding() -> None:
    app = ServeApp([])  # never reached: the refusal comes before anything is bound or served
    with pytest.raises(ValidationError, match="--port 70000 is not a TCP port"):
        start(app, "127.0.0.1", 70000)
    with pytest.raises(ValidationError, match="--grace-s -1: use seconds >= 0"):
        run_server(app, "127.0.0.1", 0, grace_s=-1.0)


@pytest.mark.parametrize("key", ["", "  "])
def test_an_empty_api_key_is_refused_by_the_app(key: str) -> None:
    with pytest.raises(UsageError, match=r"^--api-key is empty: give a key \(or unset INFERPERF_API_KEY\)$"):
        ServeApp([]).require_api_key(key)


def test_an_unknown_model_control_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--model-control-mode 'poll': use none or explicit$"):
        prepare_repository(tmp_path, mode="poll")


def test_an_access_log_that_cannot_be_written_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "access.jsonl"
    with pytest.raises(UsageError, match=r"^--access-log '.*access.jsonl' cannot be written \(No such file"):
        ServeApp([]).log_access(target)
