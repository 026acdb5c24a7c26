"""Write and read Result documents; compute ``case_key``; keep raw samples beside large results.

Raw samples are the source of truth: :func:`load` recomputes the latency
summary from them. Past :data:`SIDECAR_THRESHOLD` samples the arrays go to a
compressed ``NAME.samples.npz`` beside the JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..errors import UsageError, first_error
from ..fsutil import atomic_open, atomic_write_text
from ..stats import latency_summary
from .model import SCHEMA_VERSION, LatencySummary, Result

SIDECAR_THRESHOLD = 100_000
#: JSON files inferperf writes beside Results that are not Results (sweep's index and findings, optimize's
#: summary and sensitivity, runtimes' comparison, tune's study summary): never read as Results from a folder.
SIDE_FILES = frozenset({"index.json", "findings.json", "optimize-summary.json", "comparison.json",
                        "sensitivity.json", "tune.json"})
_SAMPLE_FIELDS = ("latency_ns", "warmup_latency_ns", "start_offsets_ns", "stream_ids", "run_ids")


def case_key(model_sha256: str, config: dict[str, Any]) -> str:
    """Stable 16-hex-digit key of a case: sha256 of the model hash and the normalized config.

    ``config`` is the part of the case config the key covers, as plain data
    (:func:`inferperf.measure.bench.case_key_doc`); keys are sorted so dict order never changes the key. The machine and the repeat
    index are not part of it: resume, trial caches and compare match on it.
    """
    blob = json.dumps({"model": model_sha256, "config": config}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def sidecar_path(json_path: Path) -> Path:
    """``r.json`` -> ``r.samples.npz`` in the same folder."""
    name = json_path.name[: -len(".json")] if json_path.name.endswith(".json") else json_path.name
    return json_path.with_name(name + ".samples.npz")


def save(result: Result, path: str | Path, sidecar_threshold: int = SIDECAR_THRESHOLD) -> Path:
    """Write ``result`` as JSON to ``path``; samples beyond ``sidecar_threshold`` go to an ``.npz`` sidecar.

    Returns:
        The path written.

    Raises:
        UsageError: the folder cannot be created or written.
    """
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        doc = result.model_dump(mode="json")
        if len(result.samples.latency_ns) > sidecar_threshold:
            side = sidecar_path(p)
            arrays = {f: np.asarray(getattr(result.samples, f), dtype=np.int64) for f in _SAMPLE_FIELDS}
            with atomic_open(side, "wb") as fh:
                np.savez_compressed(fh, **arrays)
            for f in _SAMPLE_FIELDS:
                doc["samples"][f] = []
            doc["samples"]["sidecar"] = side.name
        atomic_write_text(p, json.dumps(doc, indent=1))
    except OSError as e:
        raise UsageError(f"cannot write result to '{p}': {e.strerror or e}: choose another --output") from e
    return p


def migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """Bring an older Result document up to :data:`SCHEMA_VERSION` (v1 is the first), in place.

    A v1 document from before ``kind`` existed gets it from :func:`infer_kind`.

    Raises:
        UsageError: a document from a newer inferperf, or not a Result at all.
    """
    version = doc.get("schema_version")
    if not isinstance(version, int):
        raise UsageError("not an inferperf Result (no schema_version): pass a JSON written by inferperf")
    if version > SCHEMA_VERSION:
        raise UsageError(
            f"Result schema v{version} is newer than this inferperf reads (v{SCHEMA_VERSION}): upgrade inferperf"
        )
    if "kind" not in doc:
        doc["kind"] = infer_kind(doc)
    return doc


def infer_kind(doc: dict[str, Any]) -> str:
    """The ``kind`` of a Result written before the field existed, from what its ``run`` block carries.

    ``run.optimize`` -> ``optimize``; ``run.comparison`` -> ``runtimes``; ``run.label`` or ``run.marks``
    (set by sweeps only) -> ``sweep``; else the command's subcommand when it is ``sweep`` or ``optimize``;
    else ``bench``. Used only by :func:`migrate`: new files carry ``kind`` and nothing guesses it.
    """
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    if "optimize" in run:
        return "optimize"
    if "comparison" in run:
        return "runtimes"
    if "label" in run or "marks" in run:
        return "sweep"
    argv = doc.get("command") or []
    sub = argv[1] if isinstance(argv, list) and len(argv) > 1 else None
    return sub if sub in ("sweep", "optimize") else "bench"


def load(path: str | Path, recompute: bool = True) -> Result:
    """Read a Result JSON (and its sidecar), migrating old schemas; recompute the latency summary from samples.

    Raises:
        UsageError: missing or unreadable file, not a Result, a missing sidecar.
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise UsageError(f"result file '{p}' not found: check the path") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"result file '{p}' is not readable JSON ({e}): pass a Result written by inferperf") from e
    if not isinstance(doc, dict):
        raise UsageError(f"'{p}' holds JSON but not an inferperf Result (a {type(doc).__name__}): pass a Result file")
    doc = migrate(doc)
    side = doc.get("samples", {}).get("sidecar")
    if side:
        sp = p.with_name(side)
        if not sp.exists():
            raise UsageError(f"result '{p}' needs its samples file '{sp.name}' beside it: copy it along")
        with np.load(sp) as z:
            for f in _SAMPLE_FIELDS:
                if f in z.files:
                    doc["samples"][f] = z[f].tolist()
    try:
        result = Result.model_validate(doc)
    except ValidationError as e:
        _, where, msg, _ = first_error(e)
        raise UsageError(f"'{p}' is not a valid Result: {where}: {msg}") from None
    if recompute and result.samples.latency_ns:
        method = result.metrics.latency_ms.percentile_method
        result.metrics.latency_ms = LatencySummary(**latency_summary(result.samples.latency_ns, method))
    return result


def is_result_file(path: Path) -> bool:
    """Whether ``path`` is a Result document, the one rule every reader of folders uses: not a side file
    (:data:`SIDE_FILES`), readable, with ``"schema_version"`` in its first 4 KiB (every Result writes it first),
    and not an exported history document (``inferperf-history/1``, which carries series, not a Result). Cheap: the
    file is not parsed."""
    if path.name in SIDE_FILES:
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"schema_version"' in head and b'"inferperf-history/1"' not in head[:200]


def result_files(paths: Iterable[str | Path]) -> list[Path]:
    """The candidate Result files among ``paths``, in order, each once: a folder is searched recursively for
    ``*.json`` without :data:`SIDE_FILES` (sorted per folder); a file is kept as named (even a side file: the
    caller says what a named non-Result means). The one finder behind ``compare``, ``report``, ``history add`` and
    ``plan``; :func:`is_result_file` then tells the Results among them (report also reads history documents).

    Raises:
        UsageError: a path does not exist.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*.json") if f.is_file() and f.name not in SIDE_FILES))
        elif p.is_file():
            out.append(p)
        else:
            raise UsageError(f"'{p}' not found: pass Result files or folders that hold them")
    return list(dict.fromkeys(out))
