"""Add Results to the history: idempotent (one Result, one content hash, stored once) and transactional (one
``add`` is one transaction: a failure leaves nothing of it written)."""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from ..errors import UsageError
from ..results.build import content_hash
from ..results.io import is_result_file, load, result_files
from ..results.model import Result
from .store import points as _points
from .store import results as _results
from .store import series as _series
from .series import drafts


@dataclass(frozen=True)
class Provenance:
    """Where a measurement came from: ``commit`` (hex), ``branch``, ``time`` (UTC; ``None`` = the Result's
    ``created_at``)."""

    commit: str | None = None
    branch: str | None = None
    time: _dt.datetime | None = None


@dataclass(frozen=True)
class AddReport:
    """What an ``add`` did: Results stored, Results already there (same content hash), points written."""

    added: int
    duplicates: int
    points: int


def parse_time(text: str) -> _dt.datetime:
    """An ISO-8601 time as naive UTC (a time without an offset is taken as UTC).

    Raises:
        UsageError: not an ISO-8601 time.
    """
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"time {text!r} is not ISO-8601: pass e.g. 2026-12-02T18:00:00Z") from None
    return when.astimezone(_dt.UTC).replace(tzinfo=None) if when.tzinfo else when


def git_provenance(cwd: Path | None = None) -> Provenance:
    """The commit and branch of the git work tree at ``cwd`` (``None`` for each when not in one, or no git)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() or None

    commit = git("rev-parse", "HEAD")
    branch = git("rev-parse", "--abbrev-ref", "HEAD") if commit else None
    return Provenance(commit=commit, branch=None if branch == "HEAD" else branch)


def _skipped_in_folder(path: Path, folder: Path) -> bool:
    """A file a folder add passes over: one in a ``runs/`` folder below ``folder`` (a single run that sweep and
    ``bench --ab`` keep beside the pooled Result, which holds its runs already), or any JSON that is not a Result
    (:func:`inferperf.results.io.is_result_file`: a history export, a soak's ``*.intervals.json``, a tune
    summary)."""
    return "runs" in path.relative_to(folder).parts[:-1] or not is_result_file(path)


def read_results(paths: Iterable[str | Path]) -> list[tuple[Path, Result]]:
    """Every Result under ``paths``, loaded: files as named; folders searched recursively, without side files,
    other JSON that is not a Result, exported history documents and the single runs in ``runs/`` folders (the
    pooled Result beside them is the point).

    Raises:
        UsageError: a missing path, a file that is not a Result, no Result found.
    """
    paths = list(paths)
    files = []
    for p in map(Path, paths):
        files += [f for f in result_files([p]) if not (p.is_dir() and _skipped_in_folder(f, p))]
    found = [(p, load(p)) for p in dict.fromkeys(files)]
    if not found:
        raise UsageError(f"no Result files in {', '.join(map(str, paths))}: pass Result files or folders of them")
    return found


def _chunks(seq: list, n: int = 500):
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def _stored_ids(conn: sa.Connection, hashes: list[str]) -> dict[str, int]:
    """content hash -> stored Result id, for those of ``hashes`` already stored."""
    out: dict[str, int] = {}
    for part in _chunks(hashes):
        q = sa.select(_results.c.content_hash, _results.c.id).where(_results.c.content_hash.in_(part))
        out.update({h: int(i) for h, i in conn.execute(q)})
    return out


def add(engine: sa.Engine, items: Iterable[tuple[str | Path, Result]], provenance: Provenance = Provenance()) -> AddReport:
    """Store each Result and its points, in one transaction.

    A Result whose content hash is already stored (or repeats one earlier in ``items``) is skipped (counted in
    ``duplicates``). A point's time is ``provenance.time``, else the Result's ``created_at``. The statements are
    batched: one multi-row insert of the Results, one lookup of their ids, one multi-row insert of the points.

    Raises:
        UsageError: a Result whose ``created_at`` is not ISO-8601 (nothing of the add is written).
    """
    new: dict[str, tuple[str, Result]] = {}
    total = 0
    for source, result in items:
        total += 1
        new.setdefault(content_hash(result), (str(source), result))
    with engine.begin() as conn:
        for digest in _stored_ids(conn, list(new)):
            del new[digest]
        rows = [dict(content_hash=digest, kind=r.kind, created_at=r.created_at, source=source,
                     document=zlib.compress(json.dumps(r.model_dump(mode="json"), separators=(",", ":")).encode(), 6))
                for digest, (source, r) in new.items()]  # fmt: skip
        if rows:
            conn.execute(_results.insert(), rows)
        ids = _stored_ids(conn, list(new))
        series_ids: dict[str, int] = {}
        point_rows = []
        for digest, (_, result) in new.items():
            when = provenance.time or parse_time(result.created_at)
            for d in drafts(result):
                sid = series_ids.get(d.series_key) or _series_id(conn, d)
                series_ids[d.series_key] = sid
                point_rows.append(dict(series_id=sid, result_id=ids[digest], time=when, commit=provenance.commit,
                                       branch=provenance.branch, values=d.values, median=d.median, lo=d.lo, hi=d.hi,
                                       runtime=d.runtime, env=d.env, verdict=d.verdict))  # fmt: skip
        if point_rows:
            conn.execute(_points.insert(), point_rows)
    return AddReport(added=len(new), duplicates=total - len(new), points=len(point_rows))


def _series_id(conn: sa.Connection, d) -> int:
    row = conn.execute(sa.select(_series.c.id).where(_series.c.key == d.series_key)).first()
    if row:
        return int(row[0])
    return int(conn.execute(_series.insert().values(key=d.series_key, name=d.series_name, metric=d.metric,
                                                     direction=d.direction, machine=d.machine,
                                                     workload=d.workload)).inserted_primary_key[0])


def stored_result(engine: sa.Engine, content_hash_hex: str) -> dict | None:
    """The raw Result document stored under a content hash (``None`` when absent)."""
    with engine.connect() as conn:
        blob = conn.execute(sa.select(_results.c.document).where(_results.c.content_hash == content_hash_hex)).scalar()
    return None if blob is None else json.loads(zlib.decompress(blob))


__all__ = ["AddReport", "Provenance", "add", "git_provenance", "parse_time", "read_results", "stored_result"]
