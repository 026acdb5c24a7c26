"""The validation error last measured for a model and configuration on this machine (DESIGN: a prediction always
carries it, or says ``not validated``).

A JSON file maps a key (this machine's fingerprint, :func:`inferperf.system.machine_fingerprint`; the model's
sha256; the option's ``serve --config`` settings) to the last validation's summary. ``plan --validate`` writes
it; every plan reads it. The file is ``$INFERPERF_PLAN_VALIDATIONS``, else
``$XDG_CACHE_HOME/inferperf/plan-validations.json``, else ``~/.cache/inferperf/plan-validations.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text, json_safe

NOT_VALIDATED = "not validated"


def store_path() -> Path:
    """Where the validations are kept (see the module docstring)."""
    explicit = os.environ.get("INFERPERF_PLAN_VALIDATIONS")
    if explicit:
        return Path(explicit)
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "inferperf" / "plan-validations.json"


def key(fingerprint: str, model_sha256: str, settings: dict[str, Any]) -> str:
    """The store key of a configuration: sha256 over machine fingerprint, model hash and settings (16 hex)."""
    doc = json.dumps({"machine": fingerprint, "model": model_sha256, "settings": settings}, sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def last(k: str, path: Path | None = None) -> dict[str, Any] | None:
    """The last validation stored under ``k`` (``{"measured_at", "summary", "plan"}``), or None."""
    got = _read(path or store_path()).get(k)
    return got if isinstance(got, dict) else None


def remember(k: str, entry: dict[str, Any], path: Path | None = None) -> Path | None:
    """Store ``entry`` under ``k`` (replacing the one before); returns the file. An entry whose summary holds no
    point (nothing was measured) is not stored and replaces nothing: returns None.

    Raises:
        OSError: the file cannot be written.
    """
    if not (entry.get("summary") or {}).get("points"):
        return None
    path = path or store_path()
    doc = _read(path)
    doc[k] = json_safe(entry)  # an error of inf (nothing answered) is stored as null
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True))
    return path


def wrong(entry: dict[str, Any] | None) -> bool:
    """True when a stored validation judged some point wrong (a prediction off by more than its target)."""
    s = (entry or {}).get("summary") or {}
    return bool(s.get("points")) and s.get("right", 0) < s["points"]


def _units(metric: str) -> str:
    return " ms" if metric.endswith("_ms") else "/s"


def misses_text(summary: dict[str, Any], at_most: int = 4) -> str:
    """The figures a validation found wrong, e.g. ``p99 -40 % at 70 % of capacity (predicted 5.2 ms, measured
    8.1-9.0 ms)``, ``; ``-joined (at most ``at_most``, then how many more)."""
    ms = summary.get("misses") or []
    parts = []
    for m in ms[:at_most]:
        name = m["metric"].removesuffix("_ms").removesuffix("_per_s")
        err = "?" if m.get("error") is None else f"{m['error'] * 100:+.0f} %"
        lo, hi = m["interval"]
        parts.append(f"{name} {err} at {m['load'] * 100:.0f} % of capacity (predicted {m['predicted']:.3g}"
                     f"{_units(m['metric'])}, measured {lo:.3g}-{hi:.3g}{_units(m['metric'])})")
    if len(ms) > at_most:
        parts.append(f"{len(ms) - at_most} more")
    return "; ".join(parts)


def describe(entry: dict[str, Any] | None) -> str:
    """One line. A validation that found the prediction wrong says so first: ``PREDICTION WRONG on this machine
    (validated <time>, 1 of 3 points right): p99 -40 % at 70 % of capacity (predicted ..., measured ...); ...``.
    Otherwise ``validation error last measured <time>: p50 +3/-5/+12 %, p99 ..., throughput ... at 50/70/85 % of
    capacity; 3 of 3 points right``, or :data:`NOT_VALIDATED`."""
    if not entry:
        return NOT_VALIDATED
    s = entry["summary"]
    when = entry.get("measured_at", "?")
    if wrong(entry):
        what = misses_text(s)
        return (f"PREDICTION WRONG on this machine (validated {when}, {s['right']} of {s['points']} points right)"
                + (f": {what}" if what else ""))
    loads = list(next(iter(s["error"].values())).keys())
    parts = [f"{m.removesuffix('_ms').removesuffix('_per_s')} "
             + "/".join("-" if v is None else f"{v * 100:+.0f}" for v in errs.values()) + " %" for m, errs in s["error"].items()]
    at = "/".join(f"{float(x) * 100:.0f}" for x in loads)
    return (f"validation error last measured {when}: {', '.join(parts)} at {at} % of "
            f"capacity; {s['right']} of {s['points']} points right")


__all__ = ["NOT_VALIDATED", "describe", "key", "last", "misses_text", "remember", "store_path", "wrong"]
