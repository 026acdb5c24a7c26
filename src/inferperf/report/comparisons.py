"""Precision (optimize) and runtime comparisons: rows, verdicts, sentences and bar charts.

Precision rows come from each variant's Result: ``run.optimize`` (verdict, reasons,
speed-up against fp32 as optimize computed it) and ``metrics.accuracy`` (agreement
with fp32 and the gates). Runtime rows come from ``run.comparison`` and
``metrics.accuracy.output_agreement``. A difference is called only when the 95 %
intervals separate; otherwise it is "within noise".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..analysis.choose import MIN_RUNS, choose
from ..analysis.points import separated
from .charts import PALETTE, VERDICT_COLORS, Chart, comparison_bars
from .collect import Entry
from .insights import speedup_ci


def _acc_text(acc: dict[str, Any] | None) -> str:
    if not acc or acc.get("reference"):
        return "reference"
    parts = []
    for name, o in (acc.get("outputs") or {}).items():
        bits = [f"cos {o['cosine']:.4f}" if o.get("cosine") is not None else "",
                f"top1 {100 * o['top1']:.1f} %" if o.get("top1") is not None else "",
                f"max|e| {o['max_abs_error']:.3g}" if o.get("max_abs_error") is not None else ""]
        parts.append(f"{name}: " + " ".join(b for b in bits if b))
    if acc.get("predictive") is False:
        parts.append("(synthetic data)")
    return "; ".join(parts) or "-"


def _by_source(entries: list[Entry]) -> dict[str, list[Entry]]:
    """Entries grouped by the file or folder they came from (one optimize run or runtime comparison each)."""
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        groups.setdefault(e.source, []).append(e)
    return groups


def precision(entries: list[Entry], start: int = 0) -> tuple[list[dict[str, Any]], list[Chart]]:
    """One block per optimize run: variant rows, the recommendation, the summary line, a speed-up chart."""
    blocks, charts = [], []
    for k, (src, es) in enumerate(_by_source(entries).items()):
        ref = next((e.result for e in es if e.result.model.variant == "fp32"), None)
        anchor = ref or es[0].result
        model = anchor.model.zoo_name or Path(anchor.model.path).stem
        rows = []
        for e in sorted(es, key=lambda e: (e.result.model.variant != "fp32", e.result.model.variant)):
            r = e.result
            opt = r.run.get("optimize") or {}
            sp = opt.get("speedup") or {}
            acc = r.metrics.accuracy or {}
            rows.append({
                "variant": r.model.variant, "verdict": opt.get("verdict", ""), "reasons": opt.get("reasons", []),
                "speedup": sp.get("ratio", 1.0 if r.model.variant == "fp32" else None),
                "significant": bool(sp.get("significant")),
                "speedup_ci95": speedup_ci(ref, r) if ref is not None and r is not ref else [],
                "accuracy": _acc_text(acc), "gates_passed": acc.get("passed", True),
                "queries_per_s": r.metrics.throughput.queries_per_s, "p50_ms": r.metrics.latency_ms.p50,
                "p99_ms": r.metrics.latency_ms.p99, "size_bytes": r.model.size_bytes, "case_key": r.case_key,
                "runs": max(1, len(r.metrics.throughput.per_run) or r.config.repeat),
            })  # fmt: skip
        few = [x for x in rows if x["verdict"] == "FASTER" and x["runs"] < MIN_RUNS]
        faster = [x for x in rows if x["verdict"] == "FASTER" and x not in few]
        rejected = [x["variant"] for x in rows if x["verdict"] in ("REJECT", "FAILED")]
        if faster:
            b = max(faster, key=lambda x: x["speedup"])
            rec = (f"Precision ({model}): ship {b['variant']}: {b['speedup']:.2f}x the fp32 throughput (intervals"
                   f" separate) and within the accuracy gates ({b['accuracy']}).")
            summ = f"Precision: {b['variant']} runs {b['speedup']:.2f}x fp32 on {model} and passes the accuracy gates."
        else:
            best = max((x for x in rows if x["speedup"] is not None and x["variant"] != "fp32"),
                       key=lambda x: x["speedup"], default=None)
            rec = f"Precision ({model}): keep fp32: no variant is significantly faster and accurate"
            if best is not None:
                rec += f" (best {best['variant']} {best['speedup']:.2f}x, {best['verdict'].lower()})"
            rec += "."
            summ = (f"Precision: no variant beats fp32 on {model}" + (f" (best {best['variant']} {best['speedup']:.2f}x,"
                                                                        f" {best['verdict']})" if best else "") + ".")
        if few:
            rec += (f" Faster by optimize's verdict but from too few runs ({min(x['runs'] for x in few)}) to ship on:"
                    f" {', '.join(x['variant'] for x in few)}; rerun with --repeat {MIN_RUNS} or more.")
        if rejected:
            rec += f" Rejected by the accuracy gates or failed: {', '.join(rejected)}."
        blocks.append({"model": model, "command": src, "rows": rows, "recommendation": rec, "summary": summ})
        shown = [x for x in rows if x["speedup"] is not None]
        charts.append(comparison_bars(
            start + k, f"Speed-up vs fp32: {model}", [x["variant"] for x in shown], [x["speedup"] for x in shown],
            [x["speedup_ci95"] for x in shown], [VERDICT_COLORS.get(x["verdict"], PALETTE[0]) for x in shown],
            [f"{x['speedup']:.2f}x {x['verdict']}" + ("" if x["gates_passed"] else " (gate failed)") for x in shown],
            "throughput / fp32 throughput",
            "Bars: throughput relative to fp32 (error bars: bounds from both 95 % CIs); color = verdict;"
            " red = rejected by an accuracy gate or failed."))
        charts[-1].group = "precision"
    return blocks, charts


def runtimes(entries: list[Entry], start: int = 0) -> tuple[list[dict[str, Any]], list[Chart]]:
    """One block per runtime comparison: backend rows against the reference, sentences, a chart."""
    blocks, charts = [], []
    for k, (src, es) in enumerate(_by_source(entries).items()):
        comp = es[0].result.run.get("comparison") or {}
        ref_name = comp.get("reference", es[0].result.config.backend)
        order = comp.get("backends") or [e.result.config.backend for e in es]
        by = {e.result.config.backend: e.result for e in es}
        ref = by.get(ref_name) or es[0].result
        model = ref.model.zoo_name or Path(ref.model.path).stem
        rows = []
        for name in [n for n in order if n in by]:
            r = by[name]
            ag = (r.metrics.accuracy or {}).get("output_agreement") or {}
            rq, q = ref.metrics.throughput.queries_per_s, r.metrics.throughput.queries_per_s
            rows.append({
                "backend": name, "reference": name == ref_name, "queries_per_s": q,
                "queries_per_s_ci95": list(r.metrics.throughput.queries_per_s_ci95),
                "speedup": q / rq if rq > 0 else None, "speedup_ci95": speedup_ci(ref, r) if r is not ref else [],
                "significant": separated(r.metrics.throughput.queries_per_s_ci95, ref.metrics.throughput.queries_per_s_ci95),
                "p50_ms": r.metrics.latency_ms.p50, "p99_ms": r.metrics.latency_ms.p99,
                "max_abs_error": ag.get("max_abs_error"), "cosine_min": ag.get("cosine_min"),
                "agrees": ag.get("agrees", True), "valid": r.validity.valid, "case_key": r.case_key,
                "runs": max(1, len(r.metrics.throughput.per_run) or r.config.repeat),
            })  # fmt: skip
        ch = choose(rows, lambda x: x["queries_per_s"], lambda x: x["queries_per_s_ci95"], lambda x: x["runs"],
                    lambda x: x["valid"])
        others = [x for x in rows if not x["reference"]]
        rivals = ", ".join(f"{x['backend']} {x['speedup']:.2f}x" for x in others if x["speedup"] is not None)
        best = ch.winner
        if best is not None and not best["reference"]:
            rec = (f"Runtime ({model}): use {best['backend']}: {best['speedup']:.2f}x the throughput of {ref_name}"
                   f" (intervals separate), p99 {best['p99_ms']:.3g} ms"
                   + ("" if best["agrees"] else "; but its outputs DISAGREE with the reference: check before shipping")
                   + ".")
            summ = f"Runtimes: {best['backend']} reaches {best['speedup']:.2f}x the throughput of {ref_name} on {model}."
        elif best is not None:
            rec = f"Runtime ({model}): keep {ref_name}: it is the fastest, intervals separate ({rivals} of its throughput)."
            summ = f"Runtimes: {rivals} the throughput of {ref_name} on {model} ({ref_name} is faster, intervals separate)."
        elif ch.status == "none valid":
            rec = (f"Runtime ({model}): no runtime to recommend: every Result is INVALID ({rivals} of {ref_name} as"
                   " measured); read the validity reasons and measure again.")
            summ = f"Runtimes: {rivals} the throughput of {ref_name} on {model}, but every Result is INVALID."
        else:
            why = (f"too few runs ({ch.min_runs}) to call a difference: use --repeat {MIN_RUNS} or more"
                   if ch.status == "too few runs" else "intervals overlap")
            rec = f"Runtime ({model}): {ref_name} or any runtime within noise ({rivals} of {ref_name}; {why})."
            summ = f"Runtimes: {rivals} the throughput of {ref_name} on {model} (not significant: {why})."
        if ch.invalid and ch.status != "none valid":
            rec += f" INVALID, not compared: {', '.join(x['backend'] for x in ch.invalid)}."
        bad = [x["backend"] for x in rows if not x["agrees"]]
        if bad:
            rec += f" Outputs disagree with {ref_name}: {', '.join(bad)}."
        blocks.append({"model": model, "command": src, "reference": ref_name, "rows": rows, "recommendation": rec,
                       "summary": summ})
        charts.append(comparison_bars(
            100 + start + k, f"Throughput vs {ref_name}: {model}", [x["backend"] for x in rows],
            [x["speedup"] or 0.0 for x in rows], [x["speedup_ci95"] for x in rows],
            [("#d62728" if not x["agrees"] else PALETTE[i % len(PALETTE)]) for i, x in enumerate(rows)],
            [f"{x['queries_per_s']:.0f} q/s" + ("" if x["agrees"] else " (outputs disagree)") for x in rows],
            f"throughput / {ref_name}", "Bars: throughput relative to the reference runtime (error bars from both"
            " 95 % CIs); red = outputs disagree with the reference."))
        charts[-1].group = "runtimes"
    return blocks, charts
