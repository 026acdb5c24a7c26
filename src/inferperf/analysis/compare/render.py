"""A :class:`~inferperf.analysis.compare.Comparison` as Markdown (a pull-request comment) or JSON (machines)."""

from __future__ import annotations

import json
import math
from typing import Any

from .core import METRICS, Comparison, Row

_MARK = {"regressed": "❌ regressed", "improved": "✅ improved", "unchanged": "unchanged",
         "inconclusive": "⚠️ inconclusive"}


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def _pct(v: float | None) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return "-inf" if v < 0 else "+inf"
    return f"{v:+.1f} %"


def _ci(r: Row) -> str:
    if r.low is None:
        return "-"
    return f"[{_pct(r.low)}, {_pct(r.high)}]" if r.bounded else "unbounded: no claim"


def headline(c: Comparison) -> str:
    """One line: PASS/FAIL and the verdict counts."""
    n = c.counts()
    state = "FAIL" if c.exit_code else "PASS"
    strict = " (--strict: inconclusive fails)" if c.gate.strict else ""
    return (f"**{state}**{strict}: {len(c.cases)} case(s) compared, {n['regressed']} regressed, "
            f"{n['improved']} improved, {n['unchanged']} unchanged, {n['inconclusive']} inconclusive")


def to_markdown(c: Comparison) -> str:
    """The comparison as GitHub-flavoured Markdown: headline, warnings, one table per case, notes."""
    out = ["## inferperf compare", "", headline(c), ""]
    if c.warnings:
        out += ["> **Warning: the two sides may not be comparable**", ">"]
        out += [f"> - {w}" for w in c.warnings]
        out.append("")
    thresholds = ", ".join(f"{METRICS[m].label} {'-' if METRICS[m].higher_is_better else '+'}"
                           f"{c.gate.threshold(m) * 100:g} %" for m in c.gate.metrics)
    out += [f"Thresholds: {thresholds}.", ""]
    k = len(c.gate.metrics)
    for i, info in enumerate(c.cases):
        rows = c.rows[i * k:(i + 1) * k]  # compare() emits each case's metrics together, in order
        m = info["model"]
        same = m["baseline"]["sha256"] == m["current"]["sha256"]
        model = (f"model {m['current']['sha256'][:12]}" if same else
                 f"model {m['baseline']['sha256'][:12]} -> {m['current']['sha256'][:12]}")
        out += [f"### {info['case']}", "",
                f"{model}; runs: {info['runs']['baseline']} baseline, {info['runs']['current']} current; "
                f"backend {info['config']['backend']}, {info['config']['scenario']}", "",
                "| metric | baseline | current | change | 95 % CI of change | verdict | why |",
                "|---|---:|---:|---:|---|---|---|"]
        for r in rows:
            m_ = METRICS[r.metric]
            label = f"{m_.label} ({r.unit}, {r.figure})" if m_.percentile else f"{m_.label} ({r.unit})"
            why = r.why or r.method
            if r.pooled and None not in r.pooled:
                why += f"; pooled {r.metric} {_num(r.pooled[0])} -> {_num(r.pooled[1])} {r.unit}"
            out.append(f"| {label} | {_num(r.baseline)} | {_num(r.current)} | "
                       f"{_pct(r.change)} | {_ci(r)} | {_MARK[r.verdict]} | {why} |")
        methods = sorted({r.method for r in rows if r.method})
        if methods:
            out += ["", "Intervals: " + "; ".join(methods) + "."]
        out.append("")
    for side, labels in c.unmatched.items():
        if labels:
            out += [f"Unmatched {side} cases ({len(labels)}): " + "; ".join(labels[:20])
                    + (" ..." if len(labels) > 20 else ""), ""]
    out += [f"_{n}_" for n in c.notes]
    return "\n".join(out).rstrip() + "\n"


def to_dict(c: Comparison) -> dict[str, Any]:
    """Plain data for ``--format json``: verdict, exit code, gate, cases, rows, unmatched, warnings, notes."""
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return clean({
        "passed": c.exit_code == 0, "exit_code": c.exit_code, "counts": c.counts(), "match": c.match,
        "gate": {"thresholds_pct": {m: c.gate.threshold(m) * 100 for m in c.gate.metrics},
                 "strict": c.gate.strict, "correction": c.gate.correction,
                 "directions": {m: "higher is better" if METRICS[m].higher_is_better else "lower is better"
                                for m in c.gate.metrics}},
        "cases": c.cases, "rows": [r.as_dict() for r in c.rows], "unmatched": c.unmatched,
        "warnings": c.warnings, "notes": c.notes})


def to_json(c: Comparison) -> str:
    """:func:`to_dict` as indented JSON."""
    return json.dumps(to_dict(c), indent=1)
