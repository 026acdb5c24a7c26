"""Terminal views of the history: the series list, one series' table with a sparkline, the gate's lines."""

from __future__ import annotations

import math

from rich.table import Table

from ..analysis.changepoints import ChangePoint
from ..history.gate import CheckReport, GateRow
from ..history.query import Point, Series
from .render import plain

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], marks: set[int] | None = None) -> str:
    """One block character per value, scaled from the lowest (▁) to the highest (█); ``marks`` (indices) are
    preceded by ``|`` (a change point starts at that value). Empty for no values."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = hi - lo
    out = []
    for i, v in enumerate(values):
        if marks and i in marks:
            out.append("|")
        out.append(BARS[0 if span == 0 else min(int((v - lo) / span * len(BARS)), len(BARS) - 1)])
    return "".join(out)


def _pct(x: float | None) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 100:+.1f} %"


def series_table(rows: list[tuple[Series, list[Point], list[ChangePoint], list[Point]]]) -> Table:
    """``history ls``: series name, points (INVALID ones counted apart: kept, never analysed), newest VALID median
    (and whether a newer INVALID point follows it), last change (its kind, size and commit)."""
    t = Table(title="history series")
    for col in ("series", "points", "newest", "last change"):
        t.add_column(col, overflow="fold")
    for s, pts, cps, every in rows:
        cp = cps[-1] if cps else None
        at = pts[cp.index] if cp else None
        last = "none" if cp is None or at is None else \
            f"{cp.kind} {_pct(cp.rel_change)} at {(at.commit or f'point {at.id}')[:12]}"
        bad = len(every) - len(pts)
        newest = plain(pts[-1].median) if pts else ""
        if every and every[-1].verdict == "INVALID":
            newest = (newest + " " if newest else "") + "(newer: INVALID)"
        t.add_row(s.name, str(len(pts)) + (f" (+{bad} INVALID)" if bad else ""), newest, last)
    return t


def points_table(s: Series, pts: list[Point], cps: list[ChangePoint], every: list[Point] | None = None) -> Table:
    """``history show``: one row per point (oldest first) with the change that starts at it; ``every`` (default
    ``pts``) adds the INVALID points, marked: kept, never analysed."""
    at = {pts[c.index].id: c for c in cps}
    t = Table(title=f"{s.name} ({s.metric}, {s.direction} is better)")
    for col in ("point", "time (UTC)", "commit", "branch", "median", "95 % interval", "runs", "runtime", "change"):
        t.add_column(col, overflow="fold")
    prev_runtime = None
    for p in every if every is not None else pts:
        if p.verdict == "INVALID":
            t.add_row(str(p.id), p.time.isoformat(sep=" "), (p.commit or "")[:12], p.branch or "", plain(p.median),
                      "", str(len(p.values)), p.runtime, "INVALID: kept, not analysed")
            continue
        c = at.get(p.id)
        change = "" if c is None else f"{c.kind} {_pct(c.rel_change)}"
        if prev_runtime is not None and p.runtime != prev_runtime and (c is None or c.kind != "environment"):
            change = (change + " " if change else "") + f"runtime {prev_runtime} -> {p.runtime}"
        if p.ack:
            change = (change + " " if change else "") + f"ack: {p.ack}"
        interval = "" if p.lo is None or p.hi is None else f"[{plain(p.lo)}, {plain(p.hi)}]"
        t.add_row(str(p.id), p.time.isoformat(sep=" "), (p.commit or "")[:12], p.branch or "", plain(p.median),
                  interval, str(len(p.values)), p.runtime, change + ("" if p.verdict != "OVERLOADED" else " OVERLOADED"))
        prev_runtime = p.runtime
    return t


def gate_line(r: GateRow) -> str:
    """One line per series: verdict, series, newest median against the baseline, change, p, why."""
    base = "" if r.baseline_mean is None else f" vs {plain(r.baseline_mean)} ({r.baseline_n} pt)"
    p = "" if math.isnan(r.pvalue) else f", p {r.pvalue:.3g}"
    worse = "" if r.worse is None else f", {abs(r.worse) * 100:.1f} % {'worse' if r.worse > 0 else 'better'}"
    return f"{r.verdict.upper():12} {r.series.name}: {plain(r.newest.median)}{base}{worse}{p}; {r.reason}"


def gate_summary(report: CheckReport) -> str:
    """The gate's last line: how many series, how many regressed, how many newest points were INVALID (not judged)."""
    n = len(report.rows)
    bad = sum(r.verdict == "regression" for r in report.rows)
    invalid = sum(r.verdict == "invalid" for r in report.rows)
    return (f"history check: {n} series, {bad} regression(s)" + (f", {invalid} INVALID newest point(s) not judged"
                                                                  if invalid else "")
            + ("" if report.exit_code else ", gate passed"))


__all__ = ["gate_line", "gate_summary", "points_table", "series_table", "sparkline"]
