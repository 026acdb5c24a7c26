"""Assemble a report's data from Result documents: every section, as plain data both renderers print.

``build(paths, options)`` -> :class:`Report`. A section is present exactly when
its data exist (:attr:`Report.sections` names them): charts of thread scaling
only when some cases differ only in threads, precision only with optimize
Results, resources only when the sampler ran, and so on.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.findings import Finding, batch_vs_one_findings, findings
from ..analysis.points import as_points, case_label, group_by_axis, point
from ..analysis.spikes import find_spikes
from ..analysis.steady import memory_growth, steady_state
from ..results.model import Result
from . import charts as ch
from .profile import profile_charts
from .load import load_charts, load_findings
from .tune import tune_charts, tune_findings
from .pipeline import pipeline_charts, pipeline_findings, pipeline_tables
from .plan import plan_charts, plan_findings
from .capacity import fleet_tables
from .history import history_charts, history_findings
from .collect import Entry, collect
from .http import HTTP_KINDS, http_label
from .comparisons import precision, runtimes
from .insights import CaseAnalysis, bottlenecks, recommendations, summary
from .sections import COLUMNS, case_row, csv_text, environment, method

#: Section ids in page order.
SECTION_ORDER = ("summary", "environment", "method", "raw-data", "charts", "bottlenecks", "recommendations")


@dataclass
class ReportOptions:
    """What the reader plans for.

    Attributes:
        title: page title.
        target_qps: rate to plan capacity for (queries/s); None: no capacity plan (the report says how to ask).
        slo_p99_ms: p99 objective (ms) for recommendations and capacity (a fleet is sized under it); None: no SLO.
        max_timelines: latency-over-time charts at most (spiky cases first, then the fastest).
    """

    title: str = "inferperf report"
    target_qps: float | None = None
    slo_p99_ms: float | None = None
    max_timelines: int = 6


@dataclass
class Report:
    """Everything a renderer needs. ``sections`` lists the section ids present, in order."""

    title: str
    generated_at: str
    tool_version: str
    inputs: list[str]
    notes: list[str]
    summary: list[dict[str, Any]]
    environment: list[dict[str, Any]]
    method: list[dict[str, Any]]
    columns: list[tuple[str, str]]
    rows: list[dict[str, Any]]
    csv: str
    charts: list[ch.Chart]
    bottlenecks: list[dict[str, Any]]
    recommendations: list[dict[str, Any]]
    capacity: list[dict[str, Any]]
    precision: list[dict[str, Any]]
    runtimes: list[dict[str, Any]]
    sections: list[str] = field(default_factory=list)
    rebuild: str = ""
    source: str = ""  # what the report was made from, in words: "16 Result(s)", "a history of 3 series", ...
    pipelines: list[dict[str, Any]] = field(default_factory=list)

    def charts_in(self, group: str) -> list[ch.Chart]:
        """Charts of one subsection (distribution, timeline, threads, batch, size, concurrency, resources, ...)."""
        return [c for c in self.charts if c.group == group]


def _pipeline_label(r: Result) -> str:
    p = r.run.get("pipeline") or {}
    load = f"{p.get('concurrency')} in flight" if p.get("mode") == "closed" else f"{r.config.request_rate:g}/s"
    q = f", queues {p['queue_setting']}" if p.get("queue_setting") else ""
    return f"pipeline {p.get('name', r.model.path)}, {load}{q}"


def base_label(e: Entry) -> str:
    """An entry's readable label before de-duplication: a pipeline's name and load, a load step's load
    (:func:`~.http.http_label`), else :func:`~inferperf.analysis.points.case_label`."""
    if e.kind == "pipeline":
        return _pipeline_label(e.result)
    if e.kind in HTTP_KINDS:
        return http_label(e.result)
    return case_label(point(e.result))


def _run_time(e: Entry) -> str:
    return e.result.created_at.replace("+00:00", "Z").replace("T", " ")


def unique_labels(entries: list[Entry]) -> list[str]:
    """A readable label per entry (:func:`base_label`), made unique by adding what differs between the
    entries that share it: their kind, then their case (``case_key``), then the folder or file they were read
    from, then their run time (two Results of one case in one folder: e.g. a trial and its validation)."""
    labels = [base_label(e) for e in entries]
    for why in (lambda e: f"[{e.kind}]", lambda e: e.result.case_key[:6], lambda e: e.path.parent.name,
                lambda e: e.path.stem, _run_time):
        groups: dict[str, list[int]] = {}
        for i, lab in enumerate(labels):
            groups.setdefault(lab, []).append(i)
        for idx in groups.values():
            if len(idx) > 1 and len({why(entries[i]) for i in idx}) > 1:
                for i in idx:
                    labels[i] = f"{labels[i]} {why(entries[i])}"
    seen: dict[str, int] = {}
    for i, lab in enumerate(labels):  # identical in everything recorded: number them
        seen[lab] = seen.get(lab, 0) + 1
        if seen[lab] > 1:
            labels[i] = f"{lab} #{seen[lab]}"
    return labels


def rebuild_command(inputs: list[str], opts: ReportOptions, fmt: str = "html") -> str:
    """The ``inferperf report`` command line that rebuilds this report, every planning option included."""
    argv = ["inferperf", "report", *inputs]
    if opts.title != ReportOptions.title:
        argv += ["--title", opts.title]
    if opts.target_qps is not None:
        argv += ["--target-qps", f"{opts.target_qps:g}"]
    if opts.slo_p99_ms is not None:
        argv += ["--slo-p99-ms", f"{opts.slo_p99_ms:g}"]
    if fmt != "html":
        argv += ["--format", fmt]
    return " ".join(shlex.quote(a) for a in argv)


def analyse_case(label: str, e: Entry) -> CaseAnalysis:
    """Spikes, steady state and memory growth of one Result."""
    r = e.result
    s = r.samples
    c = CaseAnalysis(label, e.kind, r)
    if not s.latency_ns:
        return c
    n = len(s.latency_ns)
    runs = np.asarray(s.run_ids) if len(s.run_ids) == n else np.zeros(n, dtype=np.int64)
    streams = np.asarray(s.stream_ids) if len(s.stream_ids) == n else np.zeros(n, dtype=np.int64)
    starts = s.start_offsets_ns if len(s.start_offsets_ns) == n else None
    c.spikes = find_spikes(s.latency_ns, starts, runs * 100_000 + streams)
    first = np.flatnonzero(runs == runs.min()) if n else np.arange(0)
    if starts is not None:
        first = first[np.argsort(np.asarray(starts)[first], kind="stable")]
    reps = max(1, r.config.repeat)
    warm = list(s.warmup_latency_ns)
    warm = warm[: len(warm) // reps] if len(warm) % reps == 0 else warm[: r.config.warmup.iterations]
    seq = warm + [s.latency_ns[i] for i in first]
    if len(seq) >= 10:
        c.steady = steady_state(seq, len(warm))
        st = c.steady
        if e.kind == "load" and st.settled and st.measured_unsettled > 0 and starts is not None:
            # load warms up by seconds (--warmup-s): where in the measured window the steady part began
            k = min(len(first) - 1, max(0, st.end_index - len(warm)))
            c.extra["settle_s"] = float(np.asarray(starts)[first[k]]) / 1e9
    tl = s.timeline or {}
    tl = next((x for x in tl.get("runs", []) if x), None) if "runs" in tl else tl
    if tl and tl.get("rss_bytes"):
        c.memory = memory_growth(tl["t_s"], tl["rss_bytes"])
    return c


def _scaling(sources: dict[str, list[Entry]]) -> tuple[list[Finding], list[ch.Chart]]:
    """Findings and scaling charts per sweep/bench invocation (never mixing two invocations' cases), one chart
    panel per workload; plus batch-vs-batch-1 findings across invocations of one machine."""
    found: list[Finding] = []
    charts: list[ch.Chart] = []
    for k, es in enumerate(sources.values()):
        rs = [e.result for e in es]
        found += findings(rs)
        pts = as_points(rs)
        skip = {"batch": ("size",), "size": ("size",), "concurrency": ("concurrency",)}  # shapes vary with batch
        named = {axis: [(case_label(g[0], skip[axis]), g) for g in group_by_axis(pts, axis)] for axis in skip}
        charts += ch.thread_scaling(group_by_axis(pts, "threads"), str(k)) + ch.batch_scaling(named["batch"], str(k))
        charts += ch.size_scaling(named["size"], str(k)) + ch.concurrency_scaling(named["concurrency"], str(k))
    machines: dict[tuple, dict[str, Result]] = {}
    for es in sources.values():
        for e in es:
            s = e.result.system
            machines.setdefault((s.cpu_model, s.logical_cores, s.os), {}).setdefault(e.result.case_key, e.result)
    seen = {tuple(sorted(f.case_keys)) for f in found if f.kind == "batch-per-sample"}
    for rs in machines.values():
        found += [f for f in batch_vs_one_findings(as_points(rs.values())) if tuple(sorted(f.case_keys)) not in seen]
    return found, charts


def source_text(rows: list[dict[str, Any]], coll: Any) -> str:
    """What a report was made from, in words: its measured Results, plans and history series (a history report had
    read "from 0 Result(s)")."""
    plans = len(coll.of_kind("plan"))
    parts = [f"{len(rows)} Result(s)"] if rows or not (plans or coll.history) else []
    if plans:
        parts.append(f"{plans} plan(s)")
    if coll.history:
        parts.append(f"a history of {sum(len(d.get('series') or []) for d in coll.history)} series")
    return ", ".join(parts)


def build(paths: Iterable[str | Path], options: ReportOptions | None = None) -> Report:
    """Read the Results under ``paths`` and compute every section.

    Raises:
        UsageError: a path is missing or holds no Results (see :func:`~.collect.collect`).
    """
    from .._version import __version__

    opts = options or ReportOptions()
    given = [str(p) for p in paths]
    coll = collect(given)
    kinds = ("sweep", "bench", "runtimes", "optimize")
    coll.entries.sort(key=lambda e: (kinds.index(e.kind) if e.kind in kinds else len(kinds), e.kind, e.source,
                                     -e.result.metrics.throughput.samples_per_s))
    entries = [e for e in coll.entries if e.kind != "plan"]  # a plan predicts: it is drawn apart, never a case
    labels = unique_labels(entries)
    rows = [case_row(lab, e) for lab, e in zip(labels, entries)]
    cases = [analyse_case(lab, e) for lab, e in zip(labels, entries)]

    found, scale_charts = _scaling(coll.sources("sweep", "bench"))
    prec, prec_charts = precision(coll.of_kind("optimize"))
    rts, rt_charts = runtimes(coll.of_kind("runtimes"))

    charts: list[ch.Chart] = []
    box = ch.latency_boxes(labels, [e.result for e in entries])
    if box:
        charts.append(box)
    ranked = sorted(range(len(cases)), key=lambda i: (-(cases[i].spikes.share if cases[i].spikes else 0.0),
                                                      -entries[i].result.metrics.throughput.queries_per_s))
    for i in ranked[: opts.max_timelines]:
        t = ch.latency_timeline(i, labels[i], entries[i].result, cases[i].spikes)
        if t:
            charts.append(t)
    charts += scale_charts
    if entries:
        fastest = max(range(len(entries)), key=lambda i: entries[i].result.metrics.throughput.samples_per_s)
        heat = ch.cpu_heatmap(fastest, labels[fastest], entries[fastest].result)
        if heat:
            charts.append(heat)
    rss_order = sorted(range(len(entries)), key=lambda i: -entries[i].result.metrics.throughput.queries_per_s)[:10]
    rss = ch.rss_lines([labels[i] for i in rss_order], [entries[i].result for i in rss_order])
    if rss:
        charts.append(rss)
    charts += prec_charts + rt_charts
    charts += profile_charts(coll.of_kind("profile"))  # issue 16: report/profile.py
    label_of = {id(e.result): lab for e, lab in zip(entries, labels)}
    serves = coll.of_kind("serve")
    charts += load_charts(coll.of_kind("load"), serves, [label_of.get(id(e.result), "") for e in serves])  # report/load.py
    charts += tune_charts(coll.of_kind("tune"))  # issue 15: report/tune.py
    charts += pipeline_charts(coll.of_kind("pipeline"))  # issue 17: report/pipeline.py
    charts += plan_charts(coll.of_kind("plan"))  # issue 26: report/plan.py
    charts += history_charts(coll.history)  # issue 28: report/history.py

    fleet = plan_findings(coll.of_kind("plan"))
    tables, plan_notes = fleet_tables(coll.entries, opts.target_qps, opts.slo_p99_ms)  # none beside a plan Result
    issues = bottlenecks(cases, found)
    recs = recommendations(cases, tables, opts.slo_p99_ms, prec, rts, opts.target_qps)
    summ = summary(cases, recs, issues, prec, rts)
    summ += [{"kind": "load", "text": t, "values": {}} for t in load_findings(coll.of_kind("load"), opts.slo_p99_ms)]
    summ += [{"kind": "tune", "text": t, "values": {}} for t in tune_findings(coll.of_kind("tune"))]
    summ += [{"kind": "pipeline", "text": t, "values": {}} for t in pipeline_findings(coll.of_kind("pipeline"))]
    summ += [{"kind": "plan", "text": t, "values": {}} for t in fleet]
    summ += [{"kind": "history", "text": t, "values": {}} for t in history_findings(coll.history)]
    capacity = tables
    recs += [{"kind": "capacity", "text": n + ".", "values": {}} for n in plan_notes]
    if fleet:  # a plan Result answers capacity: its answer, and no second one (nor "none was asked for")
        recs = [r for r in recs if r["kind"] != "capacity"]
        recs += [{"kind": "capacity", "text": f"Fleet (inferperf plan): {t}.", "values": {}} for t in fleet]
    rep = Report(
        title=opts.title, generated_at=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tool_version=__version__, inputs=given, notes=coll.notes, summary=summ,
        environment=environment(entries), method=method(coll.sources(*dict.fromkeys(e.kind for e in entries))),
        columns=COLUMNS, rows=rows, csv=csv_text(rows), charts=charts, bottlenecks=issues, recommendations=recs,
        capacity=capacity, precision=prec, runtimes=rts, rebuild=rebuild_command(given, opts),
        pipelines=pipeline_tables(coll.of_kind("pipeline")), source=source_text(rows, coll),
    )  # fmt: skip
    present = {"summary": bool(summ), "environment": bool(rep.environment), "method": bool(rep.method),
               "raw-data": bool(rows), "charts": bool(charts), "bottlenecks": bool(issues),
               "recommendations": bool(recs)}
    rep.sections = [s for s in SECTION_ORDER if present[s]]
    return rep
