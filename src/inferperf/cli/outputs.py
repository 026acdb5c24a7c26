"""Where a command writes its Results (``--output``): checked writable before anything is measured, and each
Result's file name. Shared by bench, compare, load, pipeline and serve."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from ..errors import UsageError
from ..results.model import Result


def check_writable(output: Path) -> None:
    """Fail before measuring if ``--output`` cannot be written (a file's folder, or the folder itself).

    Raises:
        UsageError: the location cannot be created or written.
    """
    folder = output.parent if output.suffix.lower() == ".json" else output
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".inferperf-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"cannot write results to '{output}' ({e.strerror or e}): choose another --output") from None


def output_path(output: Path, result: Result) -> Path:
    """``--output``: a ``.json`` path is the file; anything else is a folder that gets a generated name."""
    if output.suffix.lower() == ".json":
        return output
    stem = (result.model.zoo_name or Path(result.model.path).stem).replace("/", "_")
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")
    return output / f"{stem}-{result.case_key}-{stamp}.json"


__all__ = ["check_writable", "output_path"]
