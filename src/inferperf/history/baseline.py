"""A compare baseline from the history: for each current Result, the stored Results of its series' points since
the last change point (``compare --baseline history:DB``)."""

from __future__ import annotations

import json
import zlib

import sqlalchemy as sa

from ..results.build import content_hash
from ..results.model import Result
from .query import established, matching, usable
from .series import drafts
from .store import points, results


def baseline_results(engine: sa.Engine, current: list[Result]) -> list[Result]:
    """The stored Results of the points since the last change point (or acknowledged point) of each current
    Result's ``samples_per_s`` series (its p50 series when it has no throughput), the current Results
    themselves left out; oldest first, each once.

    Returns:
        An empty list when no current Result has a series in the history.
    """
    mine = {content_hash(r) for r in current}
    by_key = {s.key: (s, pts) for s, pts in matching(engine)}
    wanted: list[int] = []
    for r in current:
        ds = drafts(r)
        d = next((d for d in ds if d.metric == "samples_per_s"), ds[0] if ds else None)
        if d is None or d.series_key not in by_key:
            continue
        pts = usable(by_key[d.series_key][1])
        starts = [c.index for c in established(pts)] + [i for i, p in enumerate(pts) if p.ack]
        wanted += [p.id for p in pts[max(starts, default=0):]]
    if not wanted:
        return []
    q = (sa.select(results.c.content_hash, results.c.document).join(points, points.c.result_id == results.c.id)
         .where(points.c.id.in_(wanted)).order_by(points.c.time))  # fmt: skip
    out, seen = [], set()
    with engine.connect() as c:
        for digest, blob in c.execute(q):
            if digest in mine or digest in seen:
                continue
            seen.add(digest)
            out.append(Result.model_validate(json.loads(zlib.decompress(blob))))
    return out


__all__ = ["baseline_results"]
