"""``profile --diff``: which operator types got faster or slower between two profiles (pure).

Significance from the profiled runs: each side's per-run time of an op type gives a 95 % confidence interval
for its median (:func:`inferperf.stats.median_ci`); a change is called only when the intervals separate
(:func:`inferperf.stats.intervals_separate`, the one rule) and exceeds ``min_change_percent``.

The intervals come from the runs inside one profiling session, so they hold no between-session variation:
two sequential profiles of one configuration on this 2-core machine moved heavy op types' shares by 11-19 %
with separated intervals (CI, PP-OCRv4 det at 2 threads). The default threshold is therefore 20 %, inside the
machine's 10-30 % drift only for the largest swings; lower it only for interleaved profiles on a quiet machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...stats import intervals_separate, median_ci
from .ops import FAMILIES


def by_family(prof: dict[str, Any]) -> dict[str, Any]:
    """``prof`` with its ``ops`` merged per op family (:data:`inferperf.analysis.profile.ops.FAMILIES`: fused and
    layout kernels of one ONNX op, and other runtimes' names for it, add up), per run and in total."""
    fam: dict[str, dict[str, Any]] = {}
    for o in prof.get("ops", []):
        name = FAMILIES.get(o["op"], o["op"])
        f = fam.setdefault(name, {"op": name, "mean_ms": 0.0, "percent_of_kernels": 0.0, "count": 0,
                                  "per_run_ms": [0.0] * len(o.get("per_run_ms", []))})
        f["mean_ms"] += o["mean_ms"]
        f["percent_of_kernels"] += o["percent_of_kernels"]
        f["count"] += o.get("count") or 0
        runs = o.get("per_run_ms", [])
        f["per_run_ms"] = [a + b for a, b in zip(f["per_run_ms"], runs)] if len(runs) == len(f["per_run_ms"]) else []
    return {**prof, "ops": list(fam.values())}


def _ci(values: list[float]) -> list[float] | None:
    if len(values) < 3:
        return None
    lo, hi = median_ci(values)
    return [float(lo), float(hi)]


def _values(prof: dict[str, Any], op: dict[str, Any], basis: str) -> list[float]:
    runs = op.get("per_run_ms", [])
    if basis == "ms":
        return runs
    tot = prof.get("kernel_ms_per_run", [])
    return [100 * v / t for v, t in zip(runs, tot) if t > 0] if len(tot) == len(runs) else []


#: Profiled runs a side below which no median interval exists (:func:`inferperf.stats.median_ci` needs 3).
MIN_RUNS = 3


def _verdict(change: float, ci_a: list[float] | None, ci_b: list[float] | None, min_change_percent: float,
             runs: tuple[int, int]) -> tuple[str, str]:
    """(verdict, why): ``faster``/``slower`` when the intervals separate and the change passes the minimum;
    ``unchanged`` when the change is under the minimum with both intervals measured; else ``inconclusive``
    (too few runs for an interval, or a large change whose intervals overlap)."""
    if ci_a is None or ci_b is None:
        return "inconclusive", (f"too few profiled runs: {runs[0]} vs {runs[1]}, {MIN_RUNS} a side needed; profile"
                                " with more --runs")
    if change != change:  # an op with no time in A: no relative change
        return "inconclusive", "no time in A: no relative change"
    if abs(change) < min_change_percent:
        return "unchanged", f"change under {min_change_percent:g} %"
    if intervals_separate(ci_a, ci_b):
        return ("slower" if change > 0 else "faster"), "intervals separate"
    return "inconclusive", f"change past {min_change_percent:g} % but the intervals overlap"


def diff_profiles(a: dict[str, Any], b: dict[str, Any], min_change_percent: float = 20.0,
                  basis: str = "share", by: str = "op") -> list[dict[str, Any]]:
    """Per op type present in either profile (``metrics.profile`` blocks): A and B median per run, change %,
    both intervals, a verdict (``faster``, ``slower``, ``unchanged``, ``inconclusive``, ``only in A``/``only in B``)
    and why (``inconclusive``: fewer than :data:`MIN_RUNS` profiled runs a side, or overlapping intervals).

    ``basis="share"`` (default) compares each op type's share of its own run's kernel time, so a machine that
    drifts 10-30 % between sequential profiles (this one does) does not make every op "slower"; it answers
    "which ops got faster or slower relative to the rest" (the run-level change is the Results' own latency).
    ``basis="ms"`` compares absolute ms per run (use only for interleaved runs on a quiet machine).

    ``by="op"`` matches op types by name (ORT vs another runtime pairs only where names agree); ``by="family"``
    merges each side's op types into families first (:func:`by_family`), so ORT's Conv + FusedConv pair with
    OpenVINO's Convolution. Heaviest first.
    """
    if by == "family":
        a, b = by_family(a), by_family(b)
    ops_a = {o["op"]: o for o in a.get("ops", [])}
    ops_b = {o["op"]: o for o in b.get("ops", [])}
    rows = []
    for op in sorted(set(ops_a) | set(ops_b), key=lambda k: -max(ops_a.get(k, {}).get("mean_ms", 0),
                                                                  ops_b.get(k, {}).get("mean_ms", 0))):
        if op not in ops_a or op not in ops_b:
            side = ops_a.get(op) or ops_b[op]
            rows.append({"op": op, "a_ms": ops_a[op]["mean_ms"] if op in ops_a else None,
                         "b_ms": ops_b[op]["mean_ms"] if op in ops_b else None, "change_percent": None,
                         "verdict": "only in A" if op in ops_a else "only in B", "count": side.get("count"),
                         "basis": basis})
            continue
        ra, rb = _values(a, ops_a[op], basis), _values(b, ops_b[op], basis)
        key = "mean_ms" if basis == "ms" else "percent_of_kernels"
        ma = float(np.median(ra)) if ra else ops_a[op][key]
        mb = float(np.median(rb)) if rb else ops_b[op][key]
        change = 100 * (mb - ma) / ma if ma else float("nan")
        ci_a, ci_b = _ci(ra), _ci(rb)
        verdict, why = _verdict(change, ci_a, ci_b, min_change_percent, (len(ra), len(rb)))
        rows.append({"op": op, "a_ms": ma, "b_ms": mb, "change_percent": change, "a_ci95": ci_a, "b_ci95": ci_b,
                     "verdict": verdict, "why": why, "count": ops_b[op].get("count"), "basis": basis})
    return rows
