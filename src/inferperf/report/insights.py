"""Bottleneck analysis, recommendations and the summary: plain sentences, each carrying its numbers.

Inputs are Results plus what :mod:`inferperf.analysis` computed on them (scaling
findings, spikes, steady state, memory growth, capacity). Each item is a dict
``{"kind", "text", "values"}`` so tests can check the numbers against the Results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..analysis.capacity import CapacityPlan
from ..analysis.findings import Finding
from ..analysis.spikes import Spikes
from ..analysis.steady import MemoryGrowth, SteadyState
from ..results.model import Result


@dataclass
class CaseAnalysis:
    """Per-case analysis the insights read: the Result, its label and kind, spikes, steady state, memory."""

    label: str
    kind: str
    result: Result
    spikes: Spikes | None = None
    steady: SteadyState | None = None
    memory: MemoryGrowth | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def item(kind: str, text: str, **values: Any) -> dict[str, Any]:
    """One statement."""
    return {"kind": kind, "text": text, "values": values}


def _qps(r: Result) -> str:
    tp = r.metrics.throughput
    ci = f" [95 % CI {tp.queries_per_s_ci95[0]:.1f}, {tp.queries_per_s_ci95[1]:.1f}]" if tp.queries_per_s_ci95 else ""
    return f"{tp.queries_per_s:.1f} queries/s{ci}"


def _ms(v: float) -> str:
    return f"{v:.3g} ms" if v < 10 else f"{v:.1f} ms"


def bottlenecks(cases: list[CaseAnalysis], scaling: list[Finding]) -> list[dict[str, Any]]:
    """Scaling limits, oversubscription, memory growth, latency spikes and their period, unsettled warm-up."""
    out = [item(f.kind, f.text, case_keys=f.case_keys) for f in scaling if f.kind in ("thread-scaling", "tradeoff")]
    over = [c for c in cases if {"oversubscribed", "SMT", "over quota"} & set(c.result.run.get("marks") or [])]
    if over:
        best = max((c for c in cases if c.kind == over[0].kind and c not in over),
                   key=lambda c: c.result.metrics.throughput.queries_per_s, default=None)
        worst = min(over, key=lambda c: c.result.metrics.throughput.queries_per_s)
        text = (f"{len(over)} case(s) ran more threads x streams than the {worst.result.system.effective_cpus}"
                f" effective CPUs (or on SMT siblings); the slowest of them, {worst.label}, reached {_qps(worst.result)}")
        if best is not None:
            ratio = worst.result.metrics.throughput.queries_per_s / best.result.metrics.throughput.queries_per_s
            text += f", {ratio:.2f}x the best case that fits ({best.label}, {_qps(best.result)})"
        out.append(item("oversubscription", text + ".", cases=[c.label for c in over]))
    for c in cases:
        m = c.memory
        if m is not None and m.growing:
            out.append(item("memory-growth", f"{c.label}: RSS grows {m.slope_bytes_per_s / 2**20:.1f} MiB/s"
                            f" ({m.growth_percent_per_min:.0f} %/min) over {m.duration_s:.1f} s: a leak or an unbounded"
                            " cache; confirm with a longer run", slope_bytes_per_s=m.slope_bytes_per_s))
    spiky = sorted((c for c in cases if c.spikes and c.spikes.count), key=lambda c: -c.spikes.share)
    for c in spiky[:5]:
        s = c.spikes
        text = (f"{c.label}: {s.count} latency spike(s) ({100 * s.share:.2f} % of queries) above {_ms(s.threshold_ms)}"
                f" (median {_ms(s.median_ms)}), worst {_ms(s.max_ms)}")
        if s.period_queries:
            text += (f"; they recur every {s.period_queries}th query ({100 * s.period_share:.0f} % of gaps fit)"
                     + (f", about every {s.period_s * 1e3:.1f} ms" if s.period_s else "")
                     + ": something periodic (a timer, GC, a flush, a batch boundary) stalls the query")
        else:
            text += "; no regular period (random interference: other processes, interrupts, frequency changes)"
        out.append(item("spikes", text + ".", count=s.count, share=s.share, period_queries=s.period_queries))
    if len(spiky) > 5:
        out.append(item("spikes", f"{len(spiky) - 5} more case(s) have spikes (see the raw data)."))
    clean = [c for c in cases if c.spikes is not None and not c.spikes.count]
    if clean and not spiky:
        out.append(item("spikes", f"No latency spikes (> 2x the median and > 6 robust SDs) in any of {len(clean)} case(s)."))
    late = [c for c in cases if c.steady and c.steady.settled and c.steady.measured_unsettled > 0]
    for c in sorted(late, key=lambda c: -c.steady.measured_unsettled)[:3]:
        st = c.steady
        out.append(item("warm-up", f"{c.label}: latency settled only after query {st.end_index} ({st.warmup_given}"
                        f" warm-up queries given; first block median {_ms(st.first_median_ms)} vs steady"
                        f" {_ms(st.steady_median_ms)}): {st.measured_unsettled} measured queries were still warming up",
                        end_index=st.end_index, warmup_given=st.warmup_given))
    tails = [c for c in cases if c.result.metrics.latency_ms.p50 > 0
             and c.result.metrics.latency_ms.p99 / c.result.metrics.latency_ms.p50 >= 3.0]
    if tails:
        t = max(tails, key=lambda c: c.result.metrics.latency_ms.p99 / c.result.metrics.latency_ms.p50)
        lat = t.result.metrics.latency_ms
        out.append(item("tail", f"Heavy tails in {len(tails)} case(s): worst {t.label}, p99 {_ms(lat.p99)} is"
                        f" {lat.p99 / lat.p50:.1f}x its p50 {_ms(lat.p50)} (queueing behind other streams or"
                        " interference).", ratio=lat.p99 / lat.p50))
    return out


def _best(cases: list[CaseAnalysis], key: Any, slo: float | None = None) -> CaseAnalysis | None:
    ok = [c for c in cases if c.result.validity.valid and (slo is None or c.result.metrics.latency_ms.p99 <= slo)]
    ok = ok or [c for c in cases if slo is None or c.result.metrics.latency_ms.p99 <= slo]
    return min(ok, key=key) if ok else None


def recommendations(cases: list[CaseAnalysis], plans: list[tuple[str, CapacityPlan]], slo: float | None,
                    precision: list[dict[str, Any]], runtimes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What to ship for latency and for throughput, precision and runtime choices, warm-up length, capacity."""
    out = []
    measured = [c for c in cases if c.kind in ("sweep", "bench")] or cases
    lat = _best(measured, lambda c: (c.result.metrics.latency_ms.p99, c.result.metrics.latency_ms.p50), slo)
    if lat is not None:
        m = lat.result.metrics.latency_ms
        out.append(item("latency", f"For a latency target ship {lat.label}: p99 {_ms(m.p99)}, p50 {_ms(m.p50)},"
                        f" {_qps(lat.result)}" + (f" (the lowest p99 within the {slo:g} ms SLO)" if slo else
                                                  " (the lowest p99 measured)") + ".",
                        case_key=lat.result.case_key, p99_ms=m.p99, p50_ms=m.p50))
    thr = _best(measured, lambda c: -c.result.metrics.throughput.samples_per_s, slo)
    if thr is not None:
        tp = thr.result.metrics.throughput
        out.append(item("throughput", f"For throughput ship {thr.label}: {tp.samples_per_s:.1f} samples/s"
                        f" ({_qps(thr.result)}), p99 {_ms(thr.result.metrics.latency_ms.p99)}"
                        + (f" within the {slo:g} ms SLO" if slo else "") + ".",
                        case_key=thr.result.case_key, samples_per_s=tp.samples_per_s, queries_per_s=tp.queries_per_s))
    for p in precision:
        out.append(item("precision", p["recommendation"]))
    for r in runtimes:
        out.append(item("runtime", r["recommendation"]))
    advice = [c.steady.advice_warmup_queries for c in cases if c.steady and c.steady.measured_unsettled > 0
              and c.steady.advice_warmup_queries]
    if advice:
        out.append(item("warm-up", f"Warm up with at least {max(advice)} queries (--warmup {max(advice)}): shorter"
                        " warm-ups let slow first queries into the measurement.", warmup=max(advice)))
    for name, plan in plans:
        c = plan.chosen
        if c is None:
            why = f"meets p99 <= {plan.slo_p99_ms:g} ms" if plan.slo_p99_ms else "has a positive throughput"
            out.append(item("capacity", f"{name}: no measured configuration {why}; capacity cannot be planned"
                            " from these Results."))
            continue
        slo_txt = f"p99 <= {plan.slo_p99_ms:g} ms" if plan.slo_p99_ms else "no p99 SLO given"
        out.append(item("capacity", f"{name}: to serve {plan.target_qps:,.0f} queries/s ({slo_txt}) deploy {c.instances_low_ci}"
                        f" instance(s) of {c.label} = {c.cores_low_ci} core(s) ({c.cores} at the throughput's point"
                        f" estimate), each at {c.queries_per_s:.1f} queries/s on {c.cores_per_instance} core(s)"
                        f" ({c.cores_basis}) run at {100 * (1 - plan.headroom):.0f} % of its measured throughput.",
                        cores=c.cores_low_ci, cores_point=c.cores, instances=c.instances_low_ci))
    return out


def summary(cases: list[CaseAnalysis], recs: list[dict[str, Any]], issues: list[dict[str, Any]],
            precision: list[dict[str, Any]], runtimes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The three to five findings that matter, each with its number."""
    out: list[dict[str, Any]] = []
    measured = [c for c in cases if c.kind in ("sweep", "bench")] or cases
    if measured:
        best = max(measured, key=lambda c: c.result.metrics.throughput.samples_per_s)
        tp = best.result.metrics.throughput
        out.append(item("best-throughput", f"Best throughput: {best.label} at {tp.samples_per_s:.1f} samples/s"
                        f" ({_qps(best.result)}), p99 {_ms(best.result.metrics.latency_ms.p99)}.",
                        case_key=best.result.case_key, samples_per_s=tp.samples_per_s, queries_per_s=tp.queries_per_s,
                        p99_ms=best.result.metrics.latency_ms.p99))
        quick = min(measured, key=lambda c: c.result.metrics.latency_ms.p99)
        m = quick.result.metrics.latency_ms
        out.append(item("best-latency", f"Lowest p99: {quick.label} at {_ms(m.p99)} (p50 {_ms(m.p50)}).",
                        case_key=quick.result.case_key, p99_ms=m.p99, p50_ms=m.p50))
    order = ("oversubscription", "thread-scaling", "memory-growth", "spikes", "tail", "warm-up")
    main = sorted((i for i in issues if i["kind"] in order and i.get("values", {}).get("count", 1)),
                  key=lambda i: order.index(i["kind"]))
    if main:
        out.append(item("bottleneck", "Bottleneck: " + main[0]["text"]))
    for p in precision[:1]:
        out.append(item("precision", p["summary"]))
    for r in runtimes[:1]:
        out.append(item("runtime", r["summary"]))
    cap = next((r for r in recs if r["kind"] == "capacity" and r["values"].get("cores")), None)
    if cap is not None and len(out) < 5:
        out.append(item("capacity", cap["text"]))
    return out[:5]


def speedup_ci(ref: Result, var: Result) -> list[float]:
    """Approximate 95 % interval of throughput(var) / throughput(ref) from the two CIs (worst-case bounds)."""
    rc, vc = ref.metrics.throughput.queries_per_s_ci95, var.metrics.throughput.queries_per_s_ci95
    if not rc or not vc or rc[0] <= 0:
        return []
    return [max(0.0, vc[0]) / rc[1], vc[1] / rc[0]]


def finite(v: float | None) -> bool:
    """A real, finite number."""
    return v is not None and not (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))
