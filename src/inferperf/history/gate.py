"""The history gate: the newest point of each series against the segment since its last change.

A change-point detector cannot judge the newest point alone (it needs points after a shift), so the gate asks
a narrower question: is the newest point worse than the points since the last change point (detected, an
environment cut or an acknowledged point) by more than the threshold, significantly? The test is a one-sided
prediction-interval t-test of one new value against ``k`` baseline medians (t = (x - mean) / (s sqrt(1 + 1/k)),
k - 1 degrees of freedom; e.g. Hahn and Meeker, *Statistical Intervals*, 1991, sec. 4.4), and, with one baseline
point, Welch's t-test between the two points' per-run values. A shift that leaves the baseline mean inside the
newest point's own 95 % interval is not significant.

Verdicts: ``regression`` (worse beyond the threshold and p < ``alpha``), ``ok``, ``improvement`` (better beyond
the threshold and significant), ``acknowledged`` (the newest point carries an ack), ``environment`` (the newest
point opens a new environment: nothing to compare it with), ``inconclusive`` (too little to test, or a change
beyond the threshold whose significance the newest point's own interval denies: STYLE habit 9), ``invalid`` (the
newest point measured INVALID: nothing new was judged, so the gate fails unless ``allow_invalid``; with it, the
newest VALID point is judged and the row says which point was passed over).

``pvalue`` is the one-sided p of the verdict's own direction: of "worse" for a regression or ok, of "better" for an
improvement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from ..significance import prediction_t_pvalue, welch_t_pvalue
from .query import MIN_EFFECT, Point, Series, established, matching, usable

GateVerdict = Literal["regression", "ok", "improvement", "acknowledged", "environment", "inconclusive", "invalid"]
#: verdicts that fail the gate (exit 3); ``invalid`` only without ``allow_invalid``
FAILING = ("regression", "invalid")
MIN_BASELINE = 1


@dataclass(frozen=True)
class GateRow:
    """One series' verdict: the newest point, the baseline (points since the last change), ``worse`` (relative
    change in the bad direction: 0.1 = 10 % worse), the one-sided ``pvalue`` (``nan`` when not tested)."""

    series: Series
    verdict: GateVerdict
    newest: Point
    baseline_mean: float | None
    baseline_n: int
    worse: float | None
    pvalue: float
    since: Point | None
    reason: str = ""


@dataclass(frozen=True)
class CheckReport:
    """Every matched series' row; ``exit_code`` 3 when one regressed or its newest point was INVALID (unless
    allowed), 0 otherwise (2 is the caller's: nothing matched)."""

    rows: list[GateRow]

    @property
    def exit_code(self) -> int:
        """3 when a row's verdict is in :data:`FAILING`, else 0."""
        return 3 if any(r.verdict in FAILING for r in self.rows) else 0


def _worse_p(x: float, newest: Point, base: list[Point], direction: str) -> float:
    """One-sided p that the newest value is worse than the baseline (nan: cannot test): with 2 or more baseline
    points the prediction-interval t-test of ``x`` against their medians, with one the Welch test of the two
    points' per-run values (:mod:`inferperf.significance`)."""
    sign = 1.0 if direction == "lower" else -1.0  # worse = larger for latency, smaller for throughput
    if len(base) >= 2:
        return prediction_t_pvalue(x, [p.median for p in base], sign)
    return welch_t_pvalue(base[0].values, newest.values, sign)


def judge(s: Series, pts: list[Point], max_regression: float = 0.05, alpha: float = 0.05,
          min_effect: float = MIN_EFFECT, allow_invalid: bool = False) -> GateRow | None:  # fmt: skip
    """The gate's verdict on the newest point of one series (``None`` when it has none). An INVALID newest point
    is the verdict ``invalid`` (the gate judged nothing new); with ``allow_invalid`` the newest VALID point is
    judged instead and the row names the INVALID ones passed over."""
    if not pts:
        return None
    skipped = []
    while pts and pts[-1].verdict == "INVALID":
        skipped.append(pts[-1])
        pts = pts[:-1]
    if skipped and not allow_invalid:
        p = skipped[0]
        return GateRow(s, "invalid", p, None, 0, None, math.nan, None,
                       f"the newest point {p.id} ({(p.commit or 'no commit')[:12]}) measured INVALID: nothing new was "
                       "judged; measure again on a quiet machine, or pass --allow-invalid to judge the newest VALID "
                       "point")
    row = _judge_usable(s, usable(pts), max_regression, alpha, min_effect)
    if row is None or not skipped:
        return row
    ids = ", ".join(str(p.id) for p in reversed(skipped))
    return replace(row, reason=f"{row.reason}; INVALID point(s) {ids} passed over (--allow-invalid)")


def _judge_usable(s: Series, pts: list[Point], max_regression: float, alpha: float,
                  min_effect: float) -> GateRow | None:  # fmt: skip
    """:func:`judge` on the VALID points."""
    if not pts:
        return None
    newest, n = pts[-1], len(pts)
    if newest.ack:
        return GateRow(s, "acknowledged", newest, None, 0, None, math.nan, None, f"acknowledged: {newest.ack}")
    if n > 1 and newest.env != pts[-2].env:
        return GateRow(s, "environment", newest, None, 0, None, math.nan, newest,
                       f"the newest point opens a new environment ({newest.env}): nothing to compare it with")
    cps = established(pts, min_effect)  # the segments come from the points before the newest, which is judged
    starts = [c.index for c in cps] + [i for i, p in enumerate(pts[:-1]) if p.ack]
    start = max(starts, default=0)
    base = pts[start:n - 1]
    if len(base) < MIN_BASELINE:
        return GateRow(s, "inconclusive", newest, None, 0, None, math.nan, None, "one point: no baseline yet")
    row = _newest_row(s, newest, base, max_regression, alpha)
    standing = [c for c in cps if c.kind == "change" and c.index == start and not pts[start].ack]
    if row.verdict != "regression" and standing:
        prev = max((c.index for c in cps if c.index < start), default=0)
        return _standing_row(s, standing[0], newest, pts, start - prev, max_regression) or row
    return row


def _worse_of(direction: str, before: float, after: float) -> float:
    """Relative change of ``after`` against ``before`` in the bad direction (0.1 = 10 % worse)."""
    if not before:
        return 0.0
    return ((after - before) if direction == "lower" else (before - after)) / before


def _newest_row(s: Series, newest: Point, base: list[Point], max_regression: float, alpha: float) -> GateRow:
    mean = float(np.mean([p.median for p in base]))
    worse = _worse_of(s.direction, mean, newest.median)
    p = _worse_p(newest.median, newest, base, s.direction)
    inside = newest.lo is not None and newest.hi is not None and newest.lo <= mean <= newest.hi
    reason = f"newest point against the {len(base)} point(s) since the last change"
    if math.isnan(p) or inside:  # a change beyond the threshold that cannot be called significant: no "ok"
        verdict: GateVerdict = "inconclusive" if abs(worse) > max_regression else "ok"
        if inside:
            reason += f"; their mean lies inside the newest point's own 95 % interval [{newest.lo:.4g}, {newest.hi:.4g}]"
    elif worse > max_regression and p < alpha:
        verdict = "regression"
    elif -worse > max_regression and 1 - p < alpha:
        verdict, p = "improvement", 1 - p  # the improvement's own one-sided p
    else:
        verdict = "ok"
    return GateRow(s, verdict, newest, mean, len(base), worse, p, base[0], reason)


def _standing_row(s: Series, cp, newest: Point, pts: list[Point], before_n: int,
                  max_regression: float) -> GateRow | None:  # fmt: skip
    """The segment's own start is an unacknowledged change for the worse beyond the threshold: it stands until
    ``history ack`` accepts it (the detector confirmed it at its level; ``pvalue`` is its two-sided t-test)."""
    worse = _worse_of(s.direction, cp.mean_before, cp.mean_after)
    if worse <= max_regression:
        return None
    at = pts[cp.index]
    return GateRow(s, "regression", newest, cp.mean_before, before_n, worse, cp.pvalue, at,
                   f"change at point {at.id} ({(at.commit or 'no commit')[:12]}) not acknowledged: "
                   "`inferperf history ack` accepts an intended one")


def check(engine, glob: str | None = None, max_regression: float = 0.05, alpha: float = 0.05,
          min_effect: float = MIN_EFFECT, allow_invalid: bool = False) -> CheckReport:  # fmt: skip
    """Judge the newest point of every series matching ``glob`` (see the module docstring)."""
    rows = [judge(s, pts, max_regression, alpha, min_effect, allow_invalid) for s, pts in matching(engine, glob)]
    return CheckReport([r for r in rows if r is not None])


__all__ = ["FAILING", "CheckReport", "GateRow", "check", "judge"]
