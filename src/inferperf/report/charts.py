"""Chart specifications: plain Plotly figure dicts (``{"data": [...], "layout": {...}}``) built from Results.

No plotly import here: a figure is JSON that plotly.js draws in the page. Every
trace is downsampled (:mod:`.downsample`) so a chart holds at most
:data:`~.downsample.MAX_POINTS_PER_CHART` points. Distributions are drawn as
boxes from precomputed quantiles (p1, p25, p50, p75, p99), so a million-sample
case costs five numbers, not a million.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.points import Point, case_label, workload_label
from ..analysis.scaling import fit_amdahl, fit_holds, fit_usl, speedups
from ..analysis.spikes import Spikes
from ..results.model import Result
from .downsample import MAX_POINTS_PER_CHART, every_kth, minmax_indices

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
VERDICT_COLORS = {"REFERENCE": "#7f7f7f", "FASTER": "#2ca02c", "NO GAIN": "#1f77b4", "SLOWER": "#ff7f0e",
                  "REJECT": "#d62728", "FAILED": "#d62728", "UNDECIDED": "#bcbd22", "NOT MEASURED": "#c7c7c7"}


@dataclass
class Chart:
    """One figure: ``id`` (DOM id), ``group`` (its subsection), ``title``, ``figure`` (Plotly JSON), ``caption``."""

    id: str
    group: str
    title: str
    figure: dict[str, Any]
    caption: str = ""
    points: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _layout(title: str, xaxis: dict[str, Any], yaxis: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"title": {"text": title, "font": {"size": 14}}, "xaxis": {"automargin": True, **xaxis},
            "yaxis": {"automargin": True, **yaxis}, "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
            "legend": {"orientation": "h", "y": -0.25}, "height": more.pop("height", 380), "autosize": True,
            "template": None, **more}


def tick_text(v: float) -> str:
    """A tick label that reads as the full number: ``100``, ``200``, ``2,000``, ``0.5``, ``0.02``."""
    if v >= 1:
        return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 else f"{v:,.1f}"
    return f"{v:.6f}".rstrip("0").rstrip(".")


def log_axis(lo: float, hi: float, title: str) -> dict[str, Any]:
    """A log axis with explicit ticks at 1, 2 and 5 x 10^k between ``lo`` and ``hi`` (> 0), each labelled with
    the full number (plotly's own log ticks label 100, 200, 300 as "100, 2, 3"). The range covers one tick
    below ``lo`` and one above ``hi``."""
    lo, hi = max(min(lo, hi), 1e-9), max(lo, hi, 1e-9)
    steps = (1, 2, 5)
    if hi / lo < 4:  # less than one 1-2-5 step apart: finer ticks so the axis has several labels
        steps = (1, 1.5, 2, 3, 4, 5, 6, 8)
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ladder = sorted({round(m * 10.0**d, 12) for d in range(d0 - 1, d1 + 1) for m in steps})
    below = max((v for v in ladder if v <= lo), default=ladder[0])
    above = min((v for v in ladder if v >= hi), default=ladder[-1])
    vals = [v for v in ladder if below <= v <= above]
    return {"type": "log", "title": {"text": title}, "tickmode": "array", "tickvals": vals,
            "ticktext": [tick_text(v) for v in vals], "range": [math.log10(below), math.log10(above)]}


def _count(data: list[dict[str, Any]]) -> int:
    return sum(len(t.get("x") or t.get("y") or t.get("z") or []) for t in data)


#: How a Result's latency was timed, by kind: boxes of different kinds never share an axis unnamed.
TIMED_BY = {"load": "HTTP, client side (end to end)", "serve": "server side (request in the server)"}
IN_PROCESS = "in-process (runtime call)"


def latency_boxes(labels: list[str], results: list[Result]) -> Chart | None:
    """Latency distribution per configuration: boxes from p25/p50/p75, whiskers at p1 and p99, log axis; one
    trace (legend entry) per way of timing (:data:`TIMED_BY`), so in-process and HTTP latencies on one axis
    say which is which."""
    traces: dict[str, dict[str, list[Any]]] = {}
    for lab, r in zip(labels, results):
        if not r.samples.latency_ns:
            continue
        ms = np.asarray(r.samples.latency_ns, dtype=np.float64) / 1e6
        p = np.percentile(ms, [1, 25, 50, 75, 99])
        q = traces.setdefault(TIMED_BY.get(r.kind, IN_PROCESS), {k: [] for k in
                              ("x", "lowerfence", "q1", "median", "q3", "upperfence", "mean")})
        for k, v in zip(("lowerfence", "q1", "median", "q3", "upperfence"), p):
            q[k].append(float(v))
        q["mean"].append(float(ms.mean()))
        q["x"].append(lab)
    if not traces:
        return None
    data = [{"type": "box", **q, "name": how, "boxpoints": False, "marker": {"color": PALETTE[k % len(PALETTE)]},
             "boxmean": True} for k, (how, q) in enumerate(traces.items())]
    names = [n for q in traces.values() for n in q["x"]]
    height = 420 + 4 * max((len(n) for n in names), default=0)
    yaxis = log_axis(min(v for q in traces.values() for v in q["lowerfence"]),
                     max(v for q in traces.values() for v in q["upperfence"]), "latency (ms, log)")
    fig = {"data": data, "layout": _layout("Latency per configuration (whiskers p1..p99)",
                                           {"tickangle": -35}, yaxis, height=min(height, 700),
                                           showlegend=len(data) > 1,
                                           legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
                                           margin={"l": 60, "r": 20, "t": 70, "b": 50})}  # legend above: below, the
    # rotated case names would run into it
    caption = "Box: p25..p75 with the median; whiskers p1 and p99; dashed: mean."
    if len(data) > 1:
        caption += " Colours say how each latency was timed: " + "; ".join(traces) + " (not the same quantity)."
    return Chart("chart-latency-dist", "distribution", "Latency distribution", fig, caption, len(names))


def latency_timeline(idx: int, label: str, r: Result, sp: Spikes | None) -> Chart | None:
    """Latency of each query over time (one trace per run), spikes marked; min-max downsampled."""
    s = r.samples
    if not s.latency_ns or len(s.start_offsets_ns) != len(s.latency_ns):
        return None
    lat = np.asarray(s.latency_ns, dtype=np.float64) / 1e6
    t = np.asarray(s.start_offsets_ns, dtype=np.float64) / 1e9
    runs = np.asarray(s.run_ids) if len(s.run_ids) == lat.size else np.zeros(lat.size, dtype=np.int64)
    run_ids = np.unique(runs)
    budget = max(200, (MAX_POINTS_PER_CHART // 2 - 500) // max(1, len(run_ids)))
    data = []
    for k, run in enumerate(run_ids):
        sel = np.flatnonzero(runs == run)
        sel = sel[np.argsort(t[sel], kind="stable")]
        keep = sel[minmax_indices(lat[sel], budget)]
        data.append({"type": "scatter", "mode": "markers", "name": f"run {int(run)}", "x": t[keep].round(5).tolist(),
                     "y": lat[keep].round(5).tolist(), "marker": {"size": 3, "color": PALETTE[k % len(PALETTE)]}})
    caption = "Each dot is one query (start time, latency); runs overlaid."
    if sp is not None and sp.count:
        ix = np.asarray(sp.indices[:500], dtype=np.int64)
        data.append({"type": "scatter", "mode": "markers", "name": f"spikes (> {sp.threshold_ms:.3g} ms)",
                     "x": t[ix].round(5).tolist(), "y": lat[ix].round(5).tolist(),
                     "marker": {"size": 8, "color": "#d62728", "symbol": "x"}})
        data.append({"type": "scatter", "mode": "lines", "name": "spike threshold", "x": [float(t.min()), float(t.max())],
                     "y": [sp.threshold_ms, sp.threshold_ms], "line": {"dash": "dot", "color": "#d62728", "width": 1}})
        caption += f" Red x: {sp.count} spikes ({100 * sp.share:.2f} %)"
        caption += f", every {sp.period_queries}th query." if sp.period_queries else "."
    shown = [v for t in data for v in t["y"] if v > 0]
    yaxis = log_axis(min(shown), max(shown), "latency (ms, log)")
    fig = {"data": data, "layout": _layout(f"Latency over time: {label}", {"title": {"text": "time in run (s)"}},
                                           yaxis, height=340)}
    return Chart(f"chart-timeline-{idx}", "timeline", f"Latency over time: {label}", fig, caption, _count(data))


def _err(ci: list[float], v: float) -> tuple[float, float]:
    return (max(0.0, ci[1] - v), max(0.0, v - ci[0])) if ci else (0.0, 0.0)


def _errorbars(vals: list[float], cis: list[list[float]]) -> dict[str, Any]:
    e = [_err(c, v) for v, c in zip(vals, cis)]
    return {"type": "data", "symmetric": False, "array": [a for a, _ in e], "arrayminus": [b for _, b in e],
            "visible": any(c for c in cis)}


def _fit_traces(n: list[int], x: list[float], color: str) -> list[dict[str, Any]]:
    """Amdahl and USL curves over the measured range, each only when it holds (:func:`fit_holds`, the rule the
    findings' text uses): a fit that does not describe the data is not drawn."""
    grid = np.linspace(min(n), max(n), 40)
    base = x[int(np.argmin(n))] / min(n)
    out = []
    a = fit_amdahl(n, x)
    if fit_holds(a):
        sf = a.params["serial_fraction"]
        y = base * 1.0 / (sf + (1.0 - sf) / grid)
        out.append({"type": "scatter", "mode": "lines", "name": f"Amdahl s={sf:.2f} (R^2 {a.r2:.2f})",
                    "x": grid.round(3).tolist(), "y": y.round(3).tolist(),
                    "line": {"dash": "dot", "color": color, "width": 1}})
    u = fit_usl(n, x)
    if fit_holds(u):
        lam, sig, kap = u.params["lambda"], u.params["sigma"], u.params["kappa"]
        y = lam * grid / (1 + sig * (grid - 1) + kap * grid * (grid - 1))
        out.append({"type": "scatter", "mode": "lines", "name": f"USL sigma={sig:.2f} kappa={kap:.3f} (R^2 {u.r2:.2f})",
                    "x": grid.round(3).tolist(), "y": y.round(3).tolist(),
                    "line": {"dash": "dash", "color": color, "width": 1}})
    return out


def thread_scaling(groups: list[list[Point]], prefix: str) -> list[Chart]:
    """Throughput vs intra-op threads with CI bars and the fits that hold; efficiency vs threads.

    One pair of panels per workload (model, variant, backend, shapes): a 640x640 series never shares an
    axis with a 224x224 one. Within a panel, one series per remaining configuration (streams, ...).
    """
    panels: dict[tuple, list[list[Point]]] = {}
    for g in groups:
        panels.setdefault(g[0].workload_key(), []).append(g)
    charts = []
    for w, (wkey, gs) in enumerate(panels.items()):
        wl = workload_label(gs[0][0])
        data, eff_data = [], []
        for k, g in enumerate(gs):
            c = PALETTE[k % len(PALETTE)]
            name = case_label(g[0], ("workload", "threads")) if len(gs) > 1 else "queries/s"
            name = "1 stream" if name == "-" else name
            n = [p.threads for p in g]
            x = [p.qps for p in g]
            data.append({"type": "scatter", "mode": "markers+lines", "name": name, "x": n, "y": x,
                         "error_y": _errorbars(x, [p.qps_ci for p in g]), "marker": {"color": c}, "line": {"color": c}})
            _, e = speedups(n, x)
            eff_data.append({"type": "scatter", "mode": "markers+lines", "name": name, "x": sorted(n), "y": e,
                             "marker": {"color": c}, "line": {"color": c}})
            data += _fit_traces(n, x, c)
        xa = {"title": {"text": "intra-op threads"}, "dtick": 1}
        cid = f"{prefix}-{w}"
        charts += [
            Chart(f"chart-threads-{cid}", "threads", f"Throughput vs threads: {wl}",
                  {"data": data, "layout": _layout(f"Throughput vs threads: {wl} (bars: 95 % CI over runs)", xa,
                                                   {"title": {"text": "queries/s"}, "rangemode": "tozero"})},
                  "Dotted: Amdahl fit; dashed: USL fit; each drawn only when it describes the points (R^2 >= 0.5),"
                  " as the findings say.", _count(data), {"workload": wl}),
            Chart(f"chart-efficiency-{cid}", "threads", f"Parallel efficiency vs threads: {wl}",
                  {"data": eff_data, "layout": _layout(f"Parallel efficiency (speedup / threads): {wl}", xa,
                                                       {"title": {"text": "efficiency"}, "rangemode": "tozero"})},
                  "1.0 = perfect scaling from the smallest thread count.", _count(eff_data), {"workload": wl}),
        ]
    return charts


def _rate_and_latency(groups: list[tuple[str, list[Point]]], x: Any, rate: Any, rate_ci: Any, lat: Any,
                      names: tuple[str, str]) -> list[dict[str, Any]]:
    """Two traces a group: a rate with its 95 % CI bars (left axis, solid) and a latency (right axis, dotted).

    ``x``, ``rate``, ``rate_ci`` and ``lat`` map a Point to its x value, rate, rate CI and latency (ms);
    ``names`` are the two traces' name suffixes.
    """
    data = []
    for k, (name, g) in enumerate(groups):
        c = PALETTE[k % len(PALETTE)]
        xs, ys = [x(p) for p in g], [rate(p) for p in g]
        data.append({"type": "scatter", "mode": "markers+lines", "name": f"{name}: {names[0]}", "x": xs, "y": ys,
                     "error_y": _errorbars(ys, [rate_ci(p) for p in g]), "marker": {"color": c}, "line": {"color": c}})
        data.append({"type": "scatter", "mode": "markers+lines", "name": f"{name}: {names[1]}", "x": xs,
                     "y": [lat(p) for p in g], "yaxis": "y2", "marker": {"color": c, "symbol": "square"},
                     "line": {"color": c, "dash": "dot"}})
    return data


def batch_scaling(groups: list[tuple[str, list[Point]]], prefix: str) -> list[Chart]:
    """Samples/s and per-sample p50 latency vs batch size."""
    if not groups:
        return []
    data = _rate_and_latency(groups, lambda p: p.batch, lambda p: p.sps, lambda p: p.sps_ci,
                             lambda p: p.p50_ms / p.batch, ("samples/s", "p50 ms per sample"))
    lay = _layout("Throughput and per-sample latency vs batch size", {"title": {"text": "batch size"}, "type": "log"},
                  {"title": {"text": "samples/s"}, "rangemode": "tozero"})
    lay["yaxis2"] = {"title": {"text": "p50 ms per sample"}, "overlaying": "y", "side": "right", "rangemode": "tozero"}
    return [Chart(f"chart-batch-{prefix}", "batch", "Batch size", {"data": data, "layout": lay},
                  "Solid: samples/s (left); dotted: p50 latency divided by the batch (right).", _count(data))]


def size_scaling(groups: list[tuple[str, list[Point]]], prefix: str) -> list[Chart]:
    """p50 and p99 latency vs input size (elements per row)."""
    if not groups:
        return []
    data = []
    for k, (name, g) in enumerate(groups):
        c = PALETTE[k % len(PALETTE)]
        s = [p.size for p in g]
        data.append({"type": "scatter", "mode": "markers+lines", "name": f"{name}: p50", "x": s, "y": [p.p50_ms for p in g],
                     "marker": {"color": c}, "line": {"color": c}})
        data.append({"type": "scatter", "mode": "markers+lines", "name": f"{name}: p99", "x": s, "y": [p.p99_ms for p in g],
                     "marker": {"color": c}, "line": {"color": c, "dash": "dot"}})
    return [Chart(f"chart-size-{prefix}", "size", "Input size",
                  {"data": data, "layout": _layout("Latency vs input size", {"title": {"text": "elements per row"}},
                                                   {"title": {"text": "latency (ms)"}, "rangemode": "tozero"})},
                  "Solid: p50; dotted: p99.", _count(data))]


def concurrency_scaling(groups: list[tuple[str, list[Point]]], prefix: str) -> list[Chart]:
    """Queries/s (with CI) and p99 vs closed-loop streams."""
    if not groups:
        return []
    data = _rate_and_latency(groups, lambda p: p.concurrency, lambda p: p.qps, lambda p: p.qps_ci,
                             lambda p: p.p99_ms, ("queries/s", "p99 ms"))
    lay = _layout("Throughput and p99 vs concurrency", {"title": {"text": "streams (--concurrency)"}, "dtick": 1},
                  {"title": {"text": "queries/s"}, "rangemode": "tozero"})
    lay["yaxis2"] = {"title": {"text": "p99 ms"}, "overlaying": "y", "side": "right", "rangemode": "tozero"}
    return [Chart(f"chart-concurrency-{prefix}", "concurrency", "Concurrency", {"data": data, "layout": lay},
                  "Solid: queries/s (left, 95 % CI bars); dotted: p99 (right).", _count(data))]


def _first_timeline(r: Result) -> dict[str, Any] | None:
    tl = r.samples.timeline
    if not tl:
        return None
    if "runs" in tl:
        return next((x for x in tl["runs"] if x and x.get("t_s")), None)
    return tl if tl.get("t_s") else None


def cpu_heatmap(idx: int, label: str, r: Result) -> Chart | None:
    """Per-core CPU utilization over time (first run) as a heatmap."""
    tl = _first_timeline(r)
    if not tl or not tl.get("cpu_percent_per_core"):
        return None
    z = np.asarray(tl["cpu_percent_per_core"], dtype=np.float64)
    t = np.asarray(tl["t_s"], dtype=np.float64)
    keep = every_kth(t.size, max(1, MAX_POINTS_PER_CHART // max(1, z.shape[1])))
    data = [{"type": "heatmap", "x": t[keep].round(3).tolist(), "y": [f"cpu {i}" for i in range(z.shape[1])],
             "z": z[keep].T.round(1).tolist(), "zmin": 0, "zmax": 100, "colorscale": "Viridis",
             "colorbar": {"title": {"text": "%"}}}]
    fig = {"data": data, "layout": _layout(f"CPU per core: {label}", {"title": {"text": "time in run (s)"}},
                                           {"title": {"text": ""}}, height=max(260, 60 + 22 * z.shape[1]))}
    return Chart(f"chart-cpu-{idx}", "resources", f"CPU per core: {label}", fig,
                 "Machine-wide utilization of each core while the case ran (first run, 10 Hz sampler).", int(z.size))


#: The RSS axis spans at least this many bytes, and at least :data:`RSS_MIN_SPAN_SHARE` of the mean RSS.
RSS_MIN_SPAN_BYTES = 4 * 2**20
RSS_MIN_SPAN_SHARE = 0.10


def bytes_delta(b: float) -> str:
    """A signed size in readable units: ``+12.0 KiB``, ``-3.2 MiB``, ``+512 B``."""
    sign = "+" if b >= 0 else "-"
    a = abs(b)
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if a >= size:
            return f"{sign}{a / size:.1f} {unit}"
    return f"{sign}{a:.0f} B"


def rss_lines(labels: list[str], results: list[Result]) -> Chart | None:
    """Resident memory over time per case (first run). The axis spans at least 10 % of the mean RSS or 4 MiB,
    so a few KiB of noise stay flat; the caption states each case's change in bytes."""
    data, changes, lo, hi, means = [], [], math.inf, -math.inf, []
    for k, (lab, r) in enumerate(zip(labels, results)):
        tl = _first_timeline(r)
        if not tl or not tl.get("rss_bytes"):
            continue
        rss = tl["rss_bytes"]
        keep = every_kth(len(tl["t_s"]), 1000)
        data.append({"type": "scatter", "mode": "lines+markers", "name": lab,
                     "x": [round(tl["t_s"][i], 3) for i in keep],
                     "y": [round(rss[i] / 2**20, 3) for i in keep],
                     "line": {"color": PALETTE[k % len(PALETTE)]}, "marker": {"size": 4}})
        lo, hi = min(lo, min(rss)), max(hi, max(rss))
        means.append(float(np.mean(rss)))
        changes.append(f"{lab} {bytes_delta(rss[-1] - rss[0])} over {tl['t_s'][-1] - tl['t_s'][0]:.1f} s")
    if not data:
        return None
    span = max(1.1 * (hi - lo), RSS_MIN_SPAN_SHARE * float(np.mean(means)), RSS_MIN_SPAN_BYTES)
    mid = (hi + lo) / 2
    bottom = max(0.0, mid - span / 2)
    yaxis = {"title": {"text": "RSS (MiB)"}, "range": [bottom / 2**20, (bottom + span) / 2**20]}
    caption = ("Resident memory of each case's first run. Change from the first to the last sample: "
               + "; ".join(changes) + f". The axis spans at least {100 * RSS_MIN_SPAN_SHARE:.0f} % of the mean RSS or"
               f" {RSS_MIN_SPAN_BYTES // 2**20} MiB, so changes of a few KiB look as small as they are; memory growth"
               " is judged in Bottlenecks (a slope over a long enough run), not from this line.")
    return Chart("chart-rss", "resources", "RSS over time",
                 {"data": data, "layout": _layout("Resident memory over time (first run)",
                                                  {"title": {"text": "time in run (s)"}}, yaxis)},
                 caption, _count(data), {"span_bytes": span})


def comparison_bars(idx: int, title: str, names: list[str], ratios: list[float], cis: list[list[float]],
                    colors: list[str], texts: list[str], y_title: str, caption: str) -> Chart:
    """Bars of a ratio (speed-up vs a reference) with CI bars, each bar colored and annotated."""
    data = [{"type": "bar", "x": names, "y": ratios, "error_y": _errorbars(ratios, cis), "marker": {"color": colors},
             "text": texts, "textposition": "outside", "cliponaxis": False, "hovertemplate": "%{x}: %{y:.3f}<extra></extra>"}]
    lay = _layout(title, {}, {"title": {"text": y_title}, "rangemode": "tozero"}, showlegend=False)
    lay["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                      "line": {"dash": "dash", "color": "#555", "width": 1}}]
    return Chart(f"chart-compare-{idx}", "comparison", title, {"data": data, "layout": lay}, caption, len(names))
