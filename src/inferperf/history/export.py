"""The history as documents: the JSON series document (what ``report`` reads: the report reads documents, never
the database) and a flat CSV, one row per point."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import sqlalchemy as sa

from .._version import __version__
from .query import Point, Series, established, matching, usable

#: the ``format`` field of the JSON series document
FORMAT = "inferperf-history/1"
CSV_FIELDS = ["series", "metric", "direction", "machine", "point", "time", "commit", "branch", "median", "lo", "hi",
              "runs", "values", "runtime", "verdict", "ack"]


def _nan_none(v: float) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def _point_doc(p: Point) -> dict[str, Any]:
    return {"id": p.id, "time": p.time.isoformat() + "Z", "commit": p.commit, "branch": p.branch,
            "median": p.median, "lo": p.lo, "hi": p.hi, "values": p.values, "runtime": p.runtime, "env": p.env,
            "verdict": p.verdict, "ack": p.ack}


def series_doc(s: Series, pts: list[Point]) -> dict[str, Any]:
    """One series with its points (oldest first), its change points established before the newest point
    (:func:`~.query.established`, with the commit and point id at each) and ``newest_apart``: the newest point's id,
    left out of the detection (the gate judges it)."""
    use = usable(pts)
    changes = [{"index": c.index, "point": use[c.index].id, "commit": use[c.index].commit, "kind": c.kind,
                "mean_before": c.mean_before, "mean_after": c.mean_after, "rel_change": c.rel_change,
                "pvalue": _nan_none(c.pvalue), "env_before": c.env_before, "env_after": c.env_after}
               for c in established(use)]  # fmt: skip
    return {"name": s.name, "key": s.key, "metric": s.metric, "direction": s.direction, "machine": s.machine,
            "workload": s.workload, "points": [_point_doc(p) for p in use], "change_points": changes,
            "newest_apart": use[-1].id if len(use) > 1 else None,
            "invalid_points": [_point_doc(p) for p in pts if p not in use]}


def export_json(engine: sa.Engine, glob: str | None = None) -> dict[str, Any]:
    """The JSON series document: ``{"format", "tool", "series": [series_doc, ...]}`` for the matching series.

    Change-point indices count the series' usable (not INVALID) points, which ``points`` lists.
    """
    return {"format": FORMAT, "tool": {"name": "inferperf", "version": __version__},
            "series": [series_doc(s, pts) for s, pts in matching(engine, glob)]}


def export_csv(engine: sa.Engine, glob: str | None = None) -> str:
    """Every point of the matching series as CSV (:data:`CSV_FIELDS`; ``values`` space-separated)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for s, pts in matching(engine, glob):
        for p in pts:
            w.writerow([s.name, s.metric, s.direction, s.machine, p.id, p.time.isoformat() + "Z", p.commit or "",
                        p.branch or "", repr(p.median), "" if p.lo is None else repr(p.lo),
                        "" if p.hi is None else repr(p.hi), len(p.values), " ".join(map(repr, p.values)),
                        p.runtime, p.verdict, p.ack or ""])  # fmt: skip
    return buf.getvalue()


__all__ = ["CSV_FIELDS", "FORMAT", "export_csv", "export_json", "series_doc"]
