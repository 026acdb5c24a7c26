"""Findings: plain-language statements a performance engineer can act on, each backed by numbers.

A finding is produced only when the data support it: fits need >= 3 points,
and a claim that one configuration beats another needs their 95 % confidence
intervals (over repeated runs) to separate. Each finding carries the values it
rests on and the case keys of the Results it came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..results.model import Result
from .choose import MIN_RUNS
from .points import Point, as_points, case_label, group_by_axis, plural, separated
from .scaling import degradation_point, fit_amdahl, fit_holds, fit_usl, knee, size_fit, speedups, sweet_spot


@dataclass
class Finding:
    """One statement: ``kind`` (thread-scaling, batch-scaling, size-scaling, tradeoff, ...),
    ``text`` (plain language), ``values`` (the figures), ``case_keys`` (the Results behind it)."""

    kind: str
    text: str
    values: dict[str, Any] = field(default_factory=dict)
    case_keys: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def _label(p: Point, skip: str) -> str:
    return case_label(p, (skip,))


def thread_findings(points: list[Point]) -> list[Finding]:
    """Sweet spot, degradation point, Amdahl and USL fits for each group that varies only the thread count."""
    out = []
    for g in group_by_axis(points, "threads"):
        n = [p.threads for p in g]
        x = [p.qps for p in g]
        keys = [p.case_key for p in g]
        ss = sweet_spot(n, x)
        s, eff = speedups(n, x)
        values: dict[str, Any] = {"threads": n, "queries_per_s": x, "speedup": s, "efficiency": eff, **ss}
        best = next(p for p in g if p.threads == ss["best"])
        rivals = [p for p in g if p is not best]
        text = (f"{_label(g[0], 'threads')}: throughput peaks at {plural(ss['best'], 'intra-op thread')}"
                f" ({ss['best_throughput']:.1f} queries/s)")
        if best.qps_ci and best.runs < MIN_RUNS:
            text += f" (from {best.runs} runs: too few to call the peak; use --repeat {MIN_RUNS} or more)"
        elif best.qps_ci and any(not separated(best.qps_ci, p.qps_ci) for p in rivals):
            text += " but its CI overlaps another count's (not a significant peak at this --repeat)"
        elif not best.qps_ci:
            text += " (one run per case: no CI; use --repeat 3 to call differences)"
        if not best.valid:
            text += " (that case is INVALID: read its validity reasons before trusting the peak)"
        if ss["fewest_near_best"] != ss["best"]:
            text += f"; {plural(ss['fewest_near_best'], 'thread')} already reach within 5 % of it"
        deg = degradation_point(n, x, [p.qps_ci for p in g])
        if deg is not None:
            worse = next(p for p in g if p.threads == deg)
            text += f"; past that, {plural(deg, 'thread')} lowers it to {worse.qps:.1f} queries/s"
            values["degradation_threads"] = deg
        marked = [f"{p.threads}: {'/'.join(p.marks)}" for p in g if p.marks]
        if marked:
            text += f" [marks: {'; '.join(marked)}]"
        a, u = fit_amdahl(n, x), fit_usl(n, x)
        values["amdahl"] = {"status": a.status, **a.params, "r2": a.r2}
        values["usl"] = {"status": u.status, **u.params, "r2": u.r2}
        if a.status != "ok":
            text += f" ({a.status} for scaling fits)"
        else:
            if fit_holds(a):
                text += (f". Amdahl: serial fraction {a.params['serial_fraction']:.2f}, ceiling"
                         f" {a.params['ceiling']:.1f}x speedup (R^2 {a.r2:.2f})")
            else:
                text += ". Amdahl does not fit (it cannot model throughput that falls)"
            if fit_holds(u):
                peak = u.params["peak_threads"]
                if peak == float("inf"):
                    text += f"; USL: no coherency penalty, contention {u.params['sigma']:.2f} (R^2 {u.r2:.2f})"
                elif peak < min(n):
                    text += (f"; USL: contention from the first added thread (sigma {u.params['sigma']:.2f},"
                             f" kappa {u.params['kappa']:.3f}, R^2 {u.r2:.2f})")
                else:
                    text += f"; USL puts the peak at {peak:.1f} threads (R^2 {u.r2:.2f})"
        out.append(Finding("thread-scaling", text + ".", values, keys))
    return out


def batch_findings(points: list[Point]) -> list[Finding]:
    """Samples/s and per-sample latency against batch size: the knee and where throughput falls."""
    out = []
    for g in group_by_axis(points, "batch"):
        b = [p.batch for p in g]
        sps = [p.sps for p in g]
        per_sample = [p.p50_ms / p.batch for p in g]
        values: dict[str, Any] = {"batch": b, "samples_per_s": sps, "p50_ms_per_sample": per_sample}
        best = sweet_spot(b, sps)
        text = f"{_label(g[0], 'batch')}: samples/s peaks at batch {best['best']} ({best['best_throughput']:.1f}/s)"
        k = knee(b, sps)
        if k is not None:
            values["knee"] = k
            text += f"; the knee is batch {k} (within 5 % of the peak), larger batches add latency for little gain"
        fall = degradation_point(b, sps, [p.sps_ci for p in g])
        if fall is not None:
            values["falls_at"] = fall
            text += f"; throughput falls at batch {fall}"
        for p, one, decided in _below_batch_one(g):
            if not decided:
                runs = min(p.runs, one.runs)
                why = (f"too few runs ({runs}) to call it slower: use --repeat {MIN_RUNS} or more" if runs < MIN_RUNS
                       else "the intervals overlap (within noise)")
                text += f"; batch {p.batch} gives fewer samples/s than batch 1 ({p.sps:.1f} vs {one.sps:.1f}) but {why}"
        out.append(Finding("batch-scaling", text + ".", values, [p.case_key for p in g]))
    return out


def size_findings(points: list[Point]) -> list[Finding]:
    """Latency against input size (elements per row) with a linear and a log-log fit."""
    out = []
    for g in group_by_axis(points, "size"):
        sizes = [p.size for p in g]
        lat = [p.p50_ms for p in g]
        f = size_fit(sizes, lat)
        values: dict[str, Any] = {"elements": sizes, "p50_ms": lat, "fit": {"status": f.status, **f.params, "r2": f.r2}}
        text = f"{_label(g[0], 'size')}: p50 goes from {lat[0]:.2f} ms to {lat[-1]:.2f} ms as the input grows {sizes[-1] / sizes[0]:.1f}x"
        if f.status == "ok":
            text += (f"; about {f.params['ms_per_million_elements']:.2f} ms per million elements (R^2 {f.r2:.2f}),"
                     f" log-log slope {f.params['loglog_slope']:.2f}")
        else:
            text += f" ({f.status} for a fit)"
        out.append(Finding("size-scaling", text + ".", values, [p.case_key for p in g]))
    return out


def tradeoff_findings(points: list[Point]) -> list[Finding]:
    """Best-throughput vs best-latency configuration among cases of one workload (model, variant, backend,
    shapes and batch) and environment; stated only when the throughput CIs separate, from >= 3 runs each."""
    groups: dict[tuple, list[Point]] = {}
    for p in points:
        groups.setdefault((*p.workload_key(), p.env), []).append(p)
    out = []
    for g in groups.values():
        if len(g) < 2:
            continue
        fast = max(g, key=lambda p: p.qps)
        quick = min(g, key=lambda p: p.p50_ms)
        if fast is quick or min(fast.runs, quick.runs) < MIN_RUNS:
            continue
        if not separated(fast.qps_ci, quick.qps_ci):
            continue
        ratio = fast.qps / quick.qps
        worse = fast.p50_ms / quick.p50_ms

        def cfg(p: Point) -> str:
            mode = f" ({p.session_mode})" if p.concurrency > 1 else ""
            return f"{p.concurrency} stream{'s' if p.concurrency > 1 else ''}{mode} x {p.threads} thread{'s' if p.threads != 1 else ''}"

        text = (f"{case_label(fast, ('threads', 'concurrency'))}: {cfg(fast)} reach {ratio:.2f}x the throughput of"
                f" {cfg(quick)} ({fast.qps:.1f} vs {quick.qps:.1f} queries/s, CIs separate); p50 is {worse:.2f}x"
                f" {'worse' if worse > 1 else 'better'} ({fast.p50_ms:.2f} vs {quick.p50_ms:.2f} ms)."
                " Pick by goal: the first for throughput, the second for latency.")
        out.append(Finding("tradeoff", text, {"throughput_ratio": ratio, "p50_ratio": worse,
                                              "best_throughput": fast.case_key, "best_latency": quick.case_key},
                           [fast.case_key, quick.case_key]))
    return out


def _below_batch_one(g: list[Point]) -> list[tuple[Point, Point, bool]]:
    """``(point, batch-1 point, decided)`` for each batch > 1 of ``g`` with fewer samples/s than batch 1;
    ``decided``: the intervals separate, from >= 3 runs each."""
    one = next((p for p in g if p.batch == 1), None)
    if one is None or one.sps <= 0:
        return []
    return [(p, one, min(p.runs, one.runs) >= MIN_RUNS and separated(p.sps_ci, one.sps_ci))
            for p in g if p.batch > 1 and p.sps < one.sps]


def batch_vs_one_findings(points: list[Point]) -> list[Finding]:
    """Where a batch is slower per sample than batch 1 of the same case (every other axis equal): samples/s
    at batch N below batch 1's with the intervals separating, from >= 3 runs each. A lower figure that the
    runs cannot decide is noted in the batch-scaling finding instead."""
    out = []
    for g in group_by_axis(points, "batch"):
        for p, one, decided in _below_batch_one(g):
            if not decided:
                continue
            ratio = p.sps / one.sps
            text = (f"{_label(p, 'batch')}: batch {p.batch} is slower per sample than batch 1 ({p.sps:.1f} vs"
                    f" {one.sps:.1f} samples/s, {ratio:.2f}x, CIs separate): batching costs more than it saves here")
            out.append(Finding("batch-per-sample", text + ".", {"batch": p.batch, "samples_per_s": p.sps,
                                                                 "batch1_samples_per_s": one.sps, "ratio": ratio,
                                                                 "slower": True},
                               [p.case_key, one.case_key]))
    return out


def findings(results: Iterable[Result]) -> list[Finding]:
    """All findings the Results support (thread, batch, size scaling, batch vs batch 1, the trade-off)."""
    pts = as_points(results)
    return (thread_findings(pts) + batch_findings(pts) + batch_vs_one_findings(pts) + size_findings(pts)
            + tradeoff_findings(pts))
