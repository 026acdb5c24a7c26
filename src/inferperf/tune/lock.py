"""One measurement at a time per machine: a file lock keyed by the machine fingerprint.

Several tune workers on one machine (``--storage`` shared, or just two terminals) that measure at the same
time measure each other: 4 workers on 2 CPUs gave 22 samples/s per trial against 139 alone. Every run a
tune makes (trial stages, validation rounds, in-process or served) therefore takes
``<system temp dir>/inferperf-measure-<fingerprint>.lock`` (``fcntl.flock``: held by an open file, so a
worker that dies releases it, and two opens in one process exclude each other too). Workers on other
machines have their own temp dir and fingerprint, so they never wait on each other. The time spent waiting
is counted (:attr:`LockedEvaluator.waited_s`) and printed by the CLI.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..clock import monotonic_s
from ..config import BenchConfig
from ..results.model import Result


def lock_path(key: str, folder: Path | None = None) -> Path:
    """The lock file of ``key`` (a machine fingerprint, or ``FINGERPRINT-STUDY`` for a study's validation) in
    ``folder`` (default: the system temp dir, which is per machine)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
    return Path(folder or tempfile.gettempdir()) / f"inferperf-measure-{safe}.lock"


@contextlib.contextmanager
def held(path: Path) -> Iterator[float]:
    """Hold the exclusive lock on ``path`` for the block; yields the seconds waited for it.

    Raises:
        OSError: the lock file cannot be created (an unwritable temp dir).
    """
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        t0 = monotonic_s()
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield monotonic_s() - t0
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


class LockedEvaluator:
    """An evaluator whose every run holds the machine's measurement lock (see the module docstring).

    Args:
        inner: the evaluator that measures (``run(model, cfg, params, repeat_index)``, ``served``).
        fingerprint: :func:`inferperf.system.machine_fingerprint` of this machine.
        folder: where the lock file lives (default: the system temp dir).

    Attributes:
        path: the lock file. waited_s: seconds spent waiting for it so far (all runs).
    """

    def __init__(self, inner: Any, fingerprint: str, folder: Path | None = None) -> None:
        self.inner = inner
        self.served = getattr(inner, "served", False)
        self.path = lock_path(fingerprint, folder)
        self.waited_s = 0.0

    def run(self, model: str, cfg: BenchConfig, params: dict[str, Any], repeat_index: int) -> Result:
        """The inner evaluator's run, inside the lock (raises what it raises)."""
        with held(self.path) as waited:
            self.waited_s += waited
            return self.inner.run(model, cfg, params, repeat_index)

    def __getattr__(self, name: str) -> Any:  # the inner evaluator's other attributes (runs, seed ...)
        return getattr(self.inner, name)


__all__ = ["LockedEvaluator", "held", "lock_path"]
