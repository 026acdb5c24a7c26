"""Arrival schedules from files and flags: trace files (one offset per line, or a JSONL dataset's timestamps)
and ``--arrival`` names. The schedules themselves are pure and live in :mod:`inferperf.policy.arrivals`
(shared with the planner's simulator); this module adds what reads files.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..policy.arrivals import Schedule, bursty, constant, poisson, trace, validate_offsets

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "": 1_000_000_000}
_LINE = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|ms|s)?\s*$")


def load_trace(path: str | Path) -> np.ndarray:
    """Read a trace file: one send offset per line, a number with an optional unit (``ns``, ``us``, ``ms``,
    ``s``; bare numbers are seconds); blank lines and ``#`` comments are skipped.

    Returns:
        int64 array of offsets in ns.

    Raises:
        UsageError: missing file, an unparsable line, negative or unsorted offsets (one line naming it).
    """
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"trace file {str(p)!r} not found: pass --arrival trace:FILE with an existing file")
    if p.suffix == ".jsonl":  # a token-stream dataset (load --dataset): each row's timestamp_ms
        return _jsonl_trace(p)
    out: list[int] = []
    for lineno, raw in enumerate(p.read_text(errors="replace").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LINE.match(line)
        if not m:
            raise UsageError(f"{p}:{lineno}: {raw.strip()!r} is not an offset: write e.g. 0.25, 250ms or 250000us")
        out.append(round(float(m.group(1)) * _UNITS[m.group(2) or ""]))
    arr = np.asarray(out, dtype=np.int64)
    validate_offsets(arr, str(p))
    return arr


def _jsonl_trace(p: Path) -> np.ndarray:
    """Offsets (ns) from the ``timestamp_ms`` of each non-blank line of a JSONL file.

    Raises:
        UsageError: a line without a numeric ``timestamp_ms``, or negative / unsorted offsets.
    """
    import json

    out: list[int] = []
    for lineno, raw in enumerate(p.read_text(errors="replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            ts = json.loads(raw).get("timestamp_ms")
        except (ValueError, AttributeError):
            ts = None
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            raise UsageError(f"{p}:{lineno}: no numeric timestamp_ms: trace replay of a dataset needs one per row")
        out.append(round(ts * 1_000_000))
    arr = np.asarray(out, dtype=np.int64)
    validate_offsets(arr, str(p))
    return arr


def from_arrival(arrival: str, rate_per_s: float | None, *, seed: int = 0, trace_speed: float = 1.0) -> Schedule:
    """Build the schedule named by ``--arrival`` (``constant``, ``poisson``, ``mmpp`` (:func:`~inferperf.policy.arrivals.bursty`)
    or ``trace:FILE``).

    Raises:
        UsageError: unknown kind, missing rate for constant/poisson, or a bad trace file.
    """
    if arrival.startswith("trace:"):
        path = arrival[len("trace:"):]
        return trace(load_trace(path), speed=trace_speed, source=path)
    if rate_per_s is None:
        raise UsageError(f"--arrival {arrival} needs --request-rate R")
    if arrival == "constant":
        return constant(rate_per_s)
    if arrival == "poisson":
        return poisson(rate_per_s, seed)
    if arrival == "mmpp":
        return bursty(rate_per_s, seed)
    raise UsageError(f"--arrival {arrival!r}: use constant, poisson, mmpp or trace:FILE")




__all__ = ["from_arrival", "load_trace"]
