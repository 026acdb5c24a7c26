"""The one builder of a Result's envelope, and a Result's content hash.

Every producer (bench's :func:`inferperf.measure.assemble.assemble`, load's step Result, Locust's CSV import,
serve's server-side Result, the pipeline's run) gives :func:`new_result` its own body (``model``, ``config``,
``metrics``, ``samples``, ``validity``, ``run``, ``notes``) and what identifies the case (the model's sha256
and the key document); the envelope (``schema_version``, ``kind``, ``tool``, ``created_at``, ``command``,
``system``, ``case_key``) comes only from here, so the fields a history store keys series by are written the
same way by every command.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import sys
from typing import Any

from .._version import __version__
from .io import case_key
from .model import Result, ResultKind, SystemInfo, ToolInfo


def utc_now() -> str:
    """Now as ``created_at`` writes it: UTC ISO-8601 to the second with its offset (``2026-12-02T17:42:19+00:00``)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def new_result(*, kind: ResultKind, model_sha256: str, key_doc: dict[str, Any], command: list[str] | None = None,
               system: SystemInfo | None = None, created_at: str | None = None, **body: Any) -> Result:  # fmt: skip
    """A Result of ``kind`` with its envelope filled and ``body`` (the other Result fields) as given.

    Args:
        kind: the command that measured it (:data:`~inferperf.results.model.ResultKind`).
        model_sha256: hex sha256 of what was measured (a model file, a pipeline's spec and models; ``""`` when
            unknown, e.g. a remote model without its file).
        key_doc: the plain-data part of the case config the key covers (see :func:`~inferperf.results.io.case_key`).
        command: argv to reproduce the run (default ``sys.argv``).
        system: the machine block (default this machine, :func:`inferperf.system.collect_system`).
        created_at: UTC ISO-8601 time (default :func:`utc_now`).
        body: ``model``, ``config``, ``metrics``, ``samples``, ``validity`` and optionally ``run``, ``notes``.

    Raises:
        pydantic.ValidationError: a body field that does not fit the schema (a programming error).
    """
    if system is None:
        from ..system import collect_system

        system = collect_system()
    return Result(
        kind=kind,
        tool=ToolInfo(version=__version__),
        created_at=created_at or utc_now(),
        command=list(command if command is not None else sys.argv),
        case_key=case_key(model_sha256, key_doc),
        system=system,
        **body,
    )


def content_hash(result: Result) -> str:
    """64-hex-digit sha256 of the Result's canonical JSON: one measurement document, one hash.

    Canonical JSON: ``result.model_dump(mode="json")`` (the derived ``validity.verdict`` included) with keys
    sorted, no whitespace, non-ASCII kept; ``samples.sidecar`` is left out (the file's name depends on where
    it was saved; the arrays themselves are in ``samples`` once :func:`~inferperf.results.io.load` read them).
    Nothing else is left out: the same document saved, copied or loaded again hashes the same; a rerun of
    the same case does not (its ``created_at``, ``run.pid`` and samples differ). An ingest that stores a point
    per hash is idempotent.
    """
    doc = result.model_dump(mode="json", exclude={"samples": {"sidecar"}})
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


__all__ = ["content_hash", "new_result", "utc_now"]
