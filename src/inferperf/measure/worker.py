"""Worker process entry point: ``python -m inferperf.measure.worker JOB.json OUT.json``.

The job file holds ``{"model", "config", "repeat_index", "command"}``. The worker
runs :func:`inferperf.measure.bench.run_once` and writes the Result to ``OUT.json``;
an error goes back to the parent through :mod:`inferperf.measure.jobs` (class,
one-line message, traceback), so the parent raises the same class with the same line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text
from .jobs import serve_job


def _measure(job: dict[str, Any], out_path: Path) -> None:
    from ..config import BenchConfig
    from .bench import run_once

    cfg = BenchConfig.model_validate(job["config"]).model_copy(update={"repeat": 1})
    result = run_once(job["model"], cfg, command=job.get("command"), repeat_index=job.get("repeat_index", 0))
    result.config.repeat = job["config"].get("repeat", 1)
    atomic_write_text(out_path, result.model_dump_json())


def main(argv: list[str]) -> int:
    """Run one job; returns the exit code (0 ok, else the error's exit code)."""
    return serve_job(argv, _measure)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
