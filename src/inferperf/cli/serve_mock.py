"""``inferperf serve --mock-generate``: the mock token server's CLI path (not a command of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError


def serve_mock(enabled: bool, given: list[str], repository: Any, profile_path: Path | None, log: Path | None,
               host: str, port: int, loop: str, http: str) -> int:  # fmt: skip
    """Serve the MOCK (:mod:`inferperf.serve.mock_app`) until SIGINT/SIGTERM; prints one banner line.

    Raises:
        UsageError: --mock-profile/--mock-log without --mock-generate, a MODEL or a model's flag given too (``given``:
            the names of those set), a bad profile, an unwritable log, or a port in use.
    """
    if not enabled:
        raise UsageError("--mock-profile / --mock-log need --mock-generate")
    if given or repository is not None:  # a model's flags (given: the ones set) mean nothing to the mock
        what = ", ".join([*given, *(["--model-repository"] if repository is not None else [])])
        raise UsageError(f"--mock-generate serves a mock, not a model: drop {what}")
    from ..serve.mock_engine import load_profile
    from ..serve.mock_server import run_mock

    profile = load_profile(profile_path)
    if log is not None:
        try:
            log.open("a").close()
        except OSError as e:
            raise UsageError(f"--mock-log '{log}' cannot be written ({e.strerror}): check the path") from None
    shown = f"[{host}]" if ":" in host else host

    def on_started(bound: int) -> None:
        p = profile
        print(f"MOCK token server (not a model; docs/generate.md) on http://{shown}:{bound}: model"
              f" {p.model_name!r}, prefill {p.prefill_base_ms:g} ms + {p.prefill_per_token_ms:g} ms/token,"
              f" decode step {p.decode_base_ms:g} ms + {p.decode_per_seq_ms:g} ms/active sequence, at most"
              f" {p.max_active} active; /v1/chat/completions /v1/completions /v1/models /health", flush=True)

    run_mock(profile, host, port, log, on_started, loop, http)
    return 0
