"""Worker process entry point: ``python -m inferperf.measure.worker JOB.json OUT.json``.

The job file holds ``{"model", "config", "repeat_index", "command"}``. The worker
runs :func:`inferperf.measure.bench.run_once` and writes either the Result, or
``{"error": {"type", "message", "exit_code"}}`` so the parent can raise the same
class with the same one-line message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..fsutil import atomic_write_text


def main(argv: list[str]) -> int:
    """Run one job; returns the exit code (0 ok, else the error's exit code)."""
    job_path, out_path = Path(argv[0]), Path(argv[1])
    job = json.loads(job_path.read_text())
    try:
        from ..config import BenchConfig
        from ..errors import InferperfError
        from .bench import run_once

        cfg = BenchConfig.model_validate(job["config"]).model_copy(update={"repeat": 1})
        result = run_once(job["model"], cfg, command=job.get("command"), repeat_index=job.get("repeat_index", 0))
        result.config.repeat = job["config"].get("repeat", 1)
        atomic_write_text(out_path, result.model_dump_json())
        return 0
    except Exception as e:  # reported to the parent as data, never as a traceback
        code = getattr(e, "exit_code", 1) if isinstance(e, InferperfError) else 1
        msg = str(e) if isinstance(e, InferperfError) else f"{type(e).__name__}: {e}"
        error = {"type": type(e).__name__, "message": msg, "exit_code": code}
        atomic_write_text(out_path, json.dumps({"error": error}))
        return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
