"""Bottleneck analysis, recommendations and the summary: plain sentences, each carrying its numbers.

Inputs are Results plus what :mod:`inferperf.analysis` computed on them (scaling
findings, spikes, steady state, memory growth, capacity). Each item is a dict
``{"kind", "text", "values"}`` so tests can check the numbers against the Results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..analysis.choose import MIN_RUNS, Choice, choose
from ..analysis.findings import Finding
from ..analysis.points import Point, case_label, point, workload_label
from ..analysis.spikes import Spikes
from ..analysis.steady import MemoryGrowth, SteadyState
from ..results.model import Result
from ..stats import intervals_separate
from .capacity import capacity_text


@dataclass
class CaseAnalysis:
    """Per-case analysis the insights read: the Result, its label and kind, spikes, steady state, memory,
    and its :class:`~inferperf.analysis.points.Point` (axes, CIs, runs; made on first use)."""

    label: str
    kind: str
    result: Result
    spikes: Spikes | None = None
    steady: SteadyState | None = None
    memory: MemoryGrowth | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    _point: Point | None = None

    @property
    def point(self) -> Point:
        """The case as an analysis point."""
        if self._point is None:
            self._point = point(self.result)
        return self._point

    @property
    def workload(self) -> str:
        """The workload in words (model, variant, backend, shapes): what cases are compared within."""
        return workload_label(self.point)


#: Result kinds whose cases are compared for "best" choices (optimize and runtimes have their own sections).
MEASURED = ("sweep", "bench")


def by_workload(cases: list[CaseAnalysis]) -> list[list[CaseAnalysis]]:
    """Measured cases (sweep, bench) grouped by workload, in first-seen order: never compare across groups."""
    groups: dict[tuple, list[CaseAnalysis]] = {}
    for c in cases:
        if c.kind in MEASURED:
            groups.setdefault(c.point.workload_key(), []).append(c)
    return list(groups.values())


def item(kind: str, text: str, **values: Any) -> dict[str, Any]:
    """One statement."""
    return {"kind": kind, "text": text, "values": values}


def _qps(r: Result) -> str:
    tp = r.metrics.throughput
    return f"{tp.queries_per_s:.1f} queries/s" + _interval(tp.queries_per_s_ci95, "")


def _ms(v: float) -> str:
    return f"{v:.3g} ms" if v < 10 else f"{v:.1f} ms"


def bottlenecks(cases: list[CaseAnalysis], scaling: list[Finding]) -> list[dict[str, Any]]:
    """Scaling limits, oversubscription, memory growth, latency spikes and their period, unsettled warm-up."""
    out = [item(f.kind, f.text, case_keys=f.case_keys)
           for f in scaling if f.kind in ("thread-scaling", "tradeoff", "batch-per-sample")]
    out += oversubscription(cases)
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
        medians = f"first block median {_ms(st.first_median_ms)} vs steady {_ms(st.steady_median_ms)}"
        if c.kind == "load":  # load warms up by seconds, never by a query count
            at = f"{c.extra['settle_s']:.2g} s into the measured window" if "settle_s" in c.extra else \
                "after the measured window began"
            out.append(item("warm-up", f"{c.label}: latency settled only {at} ({_warm_s(c):g} s warm-up given by"
                            f" --warmup-s; {medians}): {st.measured_unsettled} measured requests were still warming"
                            " up", end_index=st.end_index, warmup_s=_warm_s(c)))
            continue
        unit = "items" if c.kind == "pipeline" else "queries"
        ran = c.result.config.warmup.iterations
        given = (f"{ran} warm-up {unit} ran before them, their latencies not recorded" if not st.warmup_given and ran
                 else f"{st.warmup_given} warm-up {unit} given")
        out.append(item("warm-up", f"{c.label}: latency settled only after {unit[:-1] if unit == 'items' else 'query'}"
                        f" {st.end_index} ({given}; {medians}): {st.measured_unsettled} measured {unit} were still"
                        " warming up", end_index=st.end_index, warmup_given=st.warmup_given or ran))
    tails = [c for c in cases if c.result.metrics.latency_ms.p50 > 0
             and c.result.metrics.latency_ms.p99 / c.result.metrics.latency_ms.p50 >= 3.0]
    if tails:
        t = max(tails, key=lambda c: c.result.metrics.latency_ms.p99 / c.result.metrics.latency_ms.p50)
        lat = t.result.metrics.latency_ms
        out.append(item("tail", f"Heavy tails in {len(tails)} case(s): worst {t.label}, p99 {_ms(lat.p99)} is"
                        f" {lat.p99 / lat.p50:.1f}x its p50 {_ms(lat.p50)} (queueing behind other streams or"
                        " interference).", ratio=lat.p99 / lat.p50))
    return out


def _warm_s(c: CaseAnalysis) -> float:
    """Seconds of warm-up a load step was given (``config.warmup.duration_s``, from ``--warmup-s``)."""
    return float(c.result.config.warmup.duration_s or 0.0)


def oversubscription(cases: list[CaseAnalysis]) -> list[dict[str, Any]]:
    """Per workload: the cases that ran more threads x streams than the CPUs, against the best valid case of
    the same workload that fits (a ratio called only when the throughput intervals separate)."""
    out = []
    for group in by_workload(cases):
        over = [c for c in group if {"oversubscribed", "SMT", "over quota"} & set(c.result.run.get("marks") or [])]
        if not over:
            continue
        fits = [c for c in group if c not in over]
        worst = min(over, key=lambda c: c.result.metrics.throughput.queries_per_s)
        text = (f"{group[0].workload}: {len(over)} case(s) ran more threads x streams than the"
                f" {worst.result.system.effective_cpus} effective CPUs (or on SMT siblings); the slowest of them,"
                f" {worst.label}, reached {_qps(worst.result)}")
        valid = [c for c in fits if c.result.validity.valid]  # an INVALID figure is no yardstick
        best = max(valid, key=lambda c: c.result.metrics.throughput.queries_per_s, default=None)
        if best is not None and best.result.metrics.throughput.queries_per_s > 0:
            ratio = worst.result.metrics.throughput.queries_per_s / best.result.metrics.throughput.queries_per_s
            sep = intervals_separate(worst.point.qps_ci, best.point.qps_ci)
            runs = min(worst.point.runs, best.point.runs)
            why = ("CIs separate" if sep and runs >= MIN_RUNS else
                   f"too few runs ({runs}) to call" if runs < MIN_RUNS else "within noise")
            text += f", {ratio:.2f}x the best case of this workload that fits ({best.label}, {_qps(best.result)}; {why})"
        out.append(item("oversubscription", text + ".", cases=[c.label for c in over], workload=group[0].workload))
    return out


def _names(cs: list[CaseAnalysis]) -> list[str]:
    """Labels without the workload (the statement names it) when that keeps them distinct, else full labels."""
    short = [case_label(c.point, ("workload",)) for c in cs]
    return short if "-" not in short and len(set(short)) == len(short) else [c.label for c in cs]


def _listing(cs: list[CaseAnalysis], fig: Any, limit: int = 6) -> str:
    shown = ", ".join(f"{n} ({fig(c)})" for n, c in zip(_names(cs)[:limit], cs))
    return shown + (f" and {len(cs) - limit} more" if len(cs) > limit else "")


def _fig(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def _interval(ci: list[float], unit: str) -> str:
    """``[95 % CI lo, hi unit]``; a lower bound at or below 0 (a rate or time interval clipped at 0 by the
    runner, or a negative one) is said to reach 0, never printed as a measured bound: too noisy to bound."""
    if not ci:
        return ""
    if ci[0] <= 0:
        return f" [95 % CI reaches 0, up to {_fig(ci[1])}{unit}: too noisy to bound]"
    return f" [95 % CI {_fig(ci[0])}, {_fig(ci[1])}{unit}]"


def _sps(c: CaseAnalysis) -> str:
    return f"{c.result.metrics.throughput.samples_per_s:.1f} samples/s" + _interval(c.point.sps_ci, "")


def _p99(c: CaseAnalysis) -> str:
    return f"p99 {_ms(c.result.metrics.latency_ms.p99)}" + _interval(c.point.p99_runs_ci, " ms over runs")


def choose_throughput(group: list[CaseAnalysis]) -> Choice[CaseAnalysis]:
    """The throughput (samples/s) choice among one workload's cases (:func:`~inferperf.analysis.choose.choose`)."""
    return choose(group, lambda c: c.point.sps, lambda c: c.point.sps_ci, lambda c: c.point.runs,
                  lambda c: c.point.valid)


def choose_latency(group: list[CaseAnalysis]) -> Choice[CaseAnalysis]:
    """The latency (p99) choice: per-run p99 intervals over runs must separate."""
    return choose(group, lambda c: c.point.p99_ms, lambda c: c.point.p99_runs_ci, lambda c: c.point.runs,
                  lambda c: c.point.valid, higher_is_better=False)


def verdict_text(ch: Choice[CaseAnalysis], fig: Any) -> str:
    """Why a choice named (or did not name) a winner, with the candidates and their figures."""
    if ch.status == "winner":
        text = (f"{ch.best.label} at {fig(ch.best)}; its interval separates from the other {len(ch.candidates) - 1}"
                f" case(s) ({_listing(ch.candidates[1:], fig, 3)})")
    elif ch.status == "within noise":
        text = f"no single winner: {_listing(ch.tied, fig)} are within noise (95 % intervals overlap)"
    elif ch.status == "too few runs":
        text = (f"too few runs ({ch.min_runs}) to name a winner among {len(ch.candidates)} case(s):"
                f" {_listing(ch.candidates, fig)}; rerun with --repeat {MIN_RUNS} or more")
    elif ch.status == "only case":
        text = f"{ch.best.label} at {fig(ch.best)} (the only valid case: nothing to compare)"
    else:
        text = f"every case is INVALID ({_listing(ch.invalid, fig)}): no figure to rely on; read the validity reasons"
    if ch.invalid and ch.status != "none valid":
        text += f"; INVALID, left out: {', '.join(c.label for c in ch.invalid)}"
    return text


def _choice_item(kind: str, head: str, ch: Choice[CaseAnalysis], fig: Any, **values: Any) -> dict[str, Any]:
    named = ch.winner or (ch.best if ch.status == "only case" else None)
    return item(kind, f"{head}: {verdict_text(ch, fig)}.", status=ch.status,
                case_key=named.result.case_key if named else None,
                candidates=[c.result.case_key for c in ch.candidates], **values)


def recommendations(cases: list[CaseAnalysis], fleets: list[dict[str, Any]], slo: float | None,
                    precision: list[dict[str, Any]], runtimes: list[dict[str, Any]],
                    target_qps: float | None = None) -> list[dict[str, Any]]:
    """What to ship for latency and for throughput per workload (only on separated intervals from >= 3 runs),
    precision and runtime choices, warm-up length, capacity per workload (only for a given target: ``fleets``,
    :func:`.capacity.fleet_tables`)."""
    out = []
    for group in by_workload(cases):
        wl = group[0].workload
        within = [c for c in group if slo is None or c.result.metrics.latency_ms.p99 <= slo]
        if not within:
            out.append(item("latency", f"{wl}: no measured case meets p99 <= {slo:g} ms (best p99"
                            f" {_ms(min(c.result.metrics.latency_ms.p99 for c in group))}).", workload=wl))
            continue
        slo_txt = f" within the {slo:g} ms SLO" if slo else ""
        lat = choose_latency(within)
        head = (f"For a latency target{slo_txt} ship ({wl})" if lat.winner or lat.status == "only case"
                else f"For a latency target{slo_txt} ({wl})")
        out.append(_choice_item("latency", head, lat, _p99, workload=wl))
        thr = choose_throughput(within)
        head = (f"For throughput{slo_txt} ship ({wl})" if thr.winner or thr.status == "only case"
                else f"For throughput{slo_txt} ({wl})")
        out.append(_choice_item("throughput", head, thr, _sps, workload=wl))
    for p in precision:
        out.append(item("precision", p["recommendation"]))
    for r in runtimes:
        out.append(item("runtime", r["recommendation"]))
    unsettled = [c for c in cases if c.steady and c.steady.measured_unsettled > 0]
    advice = [c.steady.advice_warmup_queries for c in unsettled if c.kind != "load" and c.steady.advice_warmup_queries]
    if advice:
        out.append(item("warm-up", f"Warm up with at least {max(advice)} queries (--warmup {max(advice)}): shorter"
                        " warm-ups let slow first queries into the measurement.", warmup=max(advice)))
    secs = [_warm_s(c) + c.extra["settle_s"] for c in unsettled if c.kind == "load" and "settle_s" in c.extra]
    if secs:
        s = math.ceil(max(secs) * 10) / 10
        out.append(item("warm-up", f"Warm load steps up for at least {s:g} s (--warmup-s {s:g}; load warms up by"
                        " seconds, not by a query count): shorter warm-ups let slow first requests into the"
                        " measurement.", warmup_s=s))
    if target_qps is None and cases:  # only where there are measurements to plan from (not a history alone)
        out.append(item("capacity", "No capacity plan: none was asked for. Pass --target-qps RATE (queries/s to"
                        " serve) and --slo-p99-ms MS to size a fleet per workload (inferperf plan's simulation)."))
    for t in fleets:
        text, values = capacity_text(t)
        out.append(item("capacity", text, **values))
    return out


def summary(cases: list[CaseAnalysis], recs: list[dict[str, Any]], issues: list[dict[str, Any]],
            precision: list[dict[str, Any]], runtimes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings that matter, each with its number: per workload the throughput and latency choice
    (a winner only on separated intervals), then the main bottleneck, precision, runtime and capacity."""
    out: list[dict[str, Any]] = []
    for group in by_workload(cases):
        wl = group[0].workload
        thr = choose_throughput(group)
        head = f"Best throughput ({wl})" if thr.status != "only case" else f"Throughput ({wl})"
        out.append(_choice_item("best-throughput", head, thr, _sps, workload=wl,
                                samples_per_s=thr.best.point.sps if thr.winner else None))
        lat = choose_latency(group)
        head = f"Lowest p99 ({wl})" if lat.status != "only case" else f"Latency ({wl})"
        out.append(_choice_item("best-latency", head, lat, _p99, workload=wl,
                                p99_ms=lat.best.point.p99_ms if lat.winner else None))
    rest: list[dict[str, Any]] = []
    order = ("oversubscription", "batch-per-sample", "thread-scaling", "memory-growth", "spikes", "tail", "warm-up")
    main = sorted((i for i in issues if i["kind"] in order and i.get("values", {}).get("count", 1)),
                  key=lambda i: order.index(i["kind"]))
    if main:
        rest.append(item("bottleneck", "Bottleneck: " + main[0]["text"]))
    for p in precision[:1]:
        rest.append(item("precision", p["summary"]))
    for r in runtimes[:1]:
        rest.append(item("runtime", r["summary"]))
    cap = next((r for r in recs if r["kind"] == "capacity" and r["values"].get("cores")), None)
    if cap is not None:
        rest.append(item("capacity", cap["text"]))
    return out[:6] + rest[: max(2, 5 - len(out[:6]))]


def speedup_ci(ref: Result, var: Result) -> list[float]:
    """Approximate 95 % interval of throughput(var) / throughput(ref) from the two CIs (worst-case bounds)."""
    rc, vc = ref.metrics.throughput.queries_per_s_ci95, var.metrics.throughput.queries_per_s_ci95
    if not rc or not vc or rc[0] <= 0:
        return []
    return [max(0.0, vc[0]) / rc[1], vc[1] / rc[0]]


def finite(v: float | None) -> bool:
    """A real, finite number."""
    return v is not None and not (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))
