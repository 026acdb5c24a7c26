"""Read the history: series and their points (oldest first), change points per series, acks, retention."""

from __future__ import annotations

import datetime as _dt
import fnmatch
import math
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..analysis.changepoints import ChangePoint, change_points
from ..errors import UsageError
from .series import Figures
from .store import acks, points, results, series


@dataclass(frozen=True, kw_only=True)
class Point(Figures):
    """One stored point: its :class:`~.series.Figures` and ``id``, ``time`` (naive UTC), ``commit``, ``branch``,
    ``ack`` (why, or None)."""

    id: int
    time: _dt.datetime
    commit: str | None
    branch: str | None
    ack: str | None = None


@dataclass(frozen=True)
class Series:
    """A series: ``id``, ``key`` (32 hex), ``name`` (what ``--series`` globs match), ``metric``, ``direction``
    (``higher``/``lower`` is better), ``machine`` fingerprint, ``workload`` document."""

    id: int
    key: str
    name: str
    metric: str
    direction: str
    machine: str
    workload: dict[str, Any]


def all_series(engine: sa.Engine, glob: str | None = None) -> list[Series]:
    """Every series whose name matches ``glob`` (fnmatch; None = all), by name."""
    with engine.connect() as c:
        rows = c.execute(sa.select(series).order_by(series.c.name)).all()
    out = [Series(r.id, r.key, r.name, r.metric, r.direction, r.machine, r.workload) for r in rows]
    return [s for s in out if glob is None or fnmatch.fnmatchcase(s.name, glob)]


def find_series(engine: sa.Engine, text: str) -> Series:
    """The one series named ``text``: its full name, its key or a key prefix (>= 6 hex), or a glob matching one.

    Raises:
        UsageError: none or several match.
    """
    every = all_series(engine)
    hits = [s for s in every if s.name == text or s.key == text]
    hits = hits or [s for s in every if len(text) >= 6 and s.key.startswith(text)]
    hits = hits or [s for s in every if fnmatch.fnmatchcase(s.name, text)]
    if len(hits) != 1:
        what = "no series" if not hits else f"{len(hits)} series ({', '.join(s.name for s in hits[:3])}...)"
        raise UsageError(f"{what} match {text!r}: pass a name from `inferperf history ls` or a glob that matches one")
    return hits[0]


def series_points(engine: sa.Engine, series_id: int) -> list[Point]:
    """The series' points, oldest first (by time, then by insertion)."""
    return points_by_series(engine, [series_id]).get(series_id, [])


def points_by_series(engine: sa.Engine, series_ids: list[int] | None = None) -> dict[int, list[Point]]:
    """series id -> its points, oldest first, for ``series_ids`` (None: every series), in one query."""
    q = (sa.select(points, acks.c.why).outerjoin(acks, acks.c.point_id == points.c.id)
         .order_by(points.c.series_id, points.c.time, points.c.id))  # fmt: skip
    if series_ids is not None:
        q = q.where(points.c.series_id.in_(series_ids))
    out: dict[int, list[Point]] = {}
    with engine.connect() as c:
        for r in c.execute(q):
            out.setdefault(r.series_id, []).append(Point(
                id=r.id, time=r.time, commit=r.commit, branch=r.branch, values=r.values, median=r.median, lo=r.lo,
                hi=r.hi, runtime=r.runtime, env=r.env, verdict=r.verdict, ack=r.why))
    return out


def matching(engine: sa.Engine, glob: str | None = None) -> list[tuple[Series, list[Point]]]:
    """Every series matching ``glob`` (None: all) with its points, oldest first: two queries in all."""
    chosen = all_series(engine, glob)
    by_id = points_by_series(engine, None if glob is None else [s.id for s in chosen])
    return [(s, by_id.get(s.id, [])) for s in chosen]


def usable(pts: list[Point]) -> list[Point]:
    """The points the analysis reads: every point but INVALID ones."""
    return [p for p in pts if p.verdict != "INVALID"]


def half_width(p: Point) -> float:
    """Half the point's 95 % interval (``nan`` when it has none)."""
    return (p.hi - p.lo) / 2 if p.lo is not None and p.hi is not None else math.nan


#: the smallest relative change the history calls a change point (the detector's ``min_effect``): a busy-wait
#: latency can be so steady that a 0.02 % step is significant, and nobody would want it marked
MIN_EFFECT = 0.02


def analyse(pts: list[Point], min_effect: float = MIN_EFFECT) -> list[ChangePoint]:
    """Change points of ``pts`` (already :func:`usable`), indices into ``pts``, environment cuts included;
    changes under ``min_effect`` (relative; default :data:`MIN_EFFECT`, 2 %) are not reported."""
    return change_points([p.median for p in pts], env=[p.env for p in pts], half_widths=[half_width(p) for p in pts],
                         min_effect=min_effect)


def established(pts: list[Point], min_effect: float = MIN_EFFECT) -> list[ChangePoint]:
    """The change points a series has established (:func:`analyse`) over every point but the newest: the newest is
    what the gate judges, and one slow newest point would widen the last segment's spread, so the merge would drop
    a real change before it. ls, show, export (what report draws), the gate and ``compare --baseline history:``
    all read the series through this one rule; they show the newest point apart."""
    return analyse(pts[:-1], min_effect) if len(pts) > 1 else []


#: the shortest commit abbreviation taken, as ``git rev-parse`` takes (``core.abbrev``'s minimum)
MIN_COMMIT_PREFIX = 4


def resolve_commit(ref: str) -> str | None:
    """The full commit ``git rev-parse`` gives for ``ref`` (a branch, a tag, ``HEAD~2``) in the current directory's
    repository, or None (no git, no repository, no such ref)."""
    import subprocess

    try:
        p = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], capture_output=True,
                           text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() or None if p.returncode == 0 else None


def _matches(p: Point, point: str, full: str | None) -> bool:
    if str(p.id) == point:
        return True
    if not p.commit:
        return False
    if full is not None and p.commit == full:
        return True
    return len(point) >= MIN_COMMIT_PREFIX and p.commit.startswith(point.lower())


def ack(engine: sa.Engine, s: Series, point: str, why: str) -> Point:
    """Accept the change at ``point`` of ``s``: its id, ``latest``, its commit or a commit prefix of >= 4 hex
    (:data:`MIN_COMMIT_PREFIX`), or any ref ``git rev-parse`` resolves here (a branch, a tag, ``HEAD~1``).

    Raises:
        UsageError: an empty ``why``, a point that is not in the series or not unique.
    """
    if not why.strip():
        raise UsageError("--why is empty: say why the change is intended (it is kept with the point)")
    pts = series_points(engine, s.id)
    if point == "latest":
        hits = pts[-1:]
    else:
        full = None if point.isdigit() else resolve_commit(point)
        hits = [p for p in pts if _matches(p, point, full)]
    if len(hits) != 1:
        raise UsageError(f"{'no' if not hits else len(hits)} points of {s.name} match {point!r}: pass a point id or "
                         "commit from `inferperf history show`, or latest")
    with engine.begin() as c:
        c.execute(acks.delete().where(acks.c.point_id == hits[0].id))
        c.execute(acks.insert().values(point_id=hits[0].id, why=why.strip(),
                                       created_at=_dt.datetime.now(_dt.UTC).replace(tzinfo=None)))
    return series_points(engine, s.id)[pts.index(hits[0])]


def remove(engine: sa.Engine, glob: str | None, older_than: _dt.datetime | None) -> tuple[int, int]:
    """Delete the points of the series matching ``glob`` (None: all) older than ``older_than`` (None: all of
    them), then the series and Results no point refers to any more. One transaction.

    Returns:
        ``(points removed, Results removed)``.
    """
    ids = [s.id for s in all_series(engine, glob)]
    with engine.begin() as c:
        cond = points.c.series_id.in_(ids)
        if older_than is not None:
            cond = cond & (points.c.time < older_than)
        gone = [r[0] for r in c.execute(sa.select(points.c.id).where(cond)).all()]
        for chunk in range(0, len(gone), 500):
            part = gone[chunk:chunk + 500]
            c.execute(acks.delete().where(acks.c.point_id.in_(part)))
            c.execute(points.delete().where(points.c.id.in_(part)))
        c.execute(series.delete().where(~series.c.id.in_(sa.select(points.c.series_id))))
        n_results = c.execute(results.delete().where(~results.c.id.in_(sa.select(points.c.result_id)))).rowcount
    return len(gone), int(n_results or 0)


__all__ = ["MIN_COMMIT_PREFIX", "Point", "Series", "ack", "all_series", "analyse", "established", "find_series", "MIN_EFFECT", "half_width", "matching", "points_by_series",
           "remove", "resolve_commit", "series_points", "usable"]
