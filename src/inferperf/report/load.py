"""Report charts for load Results (kind ``load``) and serve Results (kind ``serve``): issue 13 item 8.

Load steps are grouped by target URL, model, protocol and scenario (closed loop ``concurrent`` / open loop
``server``), never mixing workloads. Per group: throughput vs concurrency (closed) or achieved vs target rate
(open), latency p50/p90/p99 vs load, corrected vs uncorrected p99 (open loop), error rate vs load, and the
server-side split (queue, compute, rest) when ``metrics.server.latency_split_ms`` exists. INVALID steps are
marked (red x markers, listed in the caption); Locust imports (``run.imported == "locust"``) are marked
summary-only. A ``serve`` Result adds its batch-size histogram and queue/compute distributions; a soak Result
(``metrics.client.soak``) adds its timeline (RSS, p99, throughput) with the leak verdict. Reads Results only.
"""

from __future__ import annotations

from typing import Any

from .charts import Chart, _layout
from .generation import generation_charts
from .http import mode

PCTS = ("p50", "p90", "p99")


Key = tuple[str, str, str, str, str]


def _key(r: Any) -> Key:
    proto = (r.config.workload.model_dump() if hasattr(r.config.workload, "model_dump") else {}).get("protocol")
    return (" ".join(r.command), str(r.run.get("target", r.model.path)), str(r.run.get("model_name", "")),
            str(proto or ""), r.config.scenario)


def load_groups(entries: list[Any]) -> dict[Key, list[Any]]:
    """Load Results grouped per run (the command that made them) and within it by (target, model, protocol,
    scenario), each group sorted by its load value: two runs (a closed-loop ladder and a stress ramp of one
    server) are two series, never one zig-zag. Soak steps are left out (they have their own timeline)."""
    groups: dict[Key, list[Any]] = {}
    for e in entries:
        r = e.result if hasattr(e, "result") else e
        if r.metrics.client is not None and r.metrics.client.get("soak"):
            continue
        groups.setdefault(_key(r), []).append(r)
    for rs in groups.values():
        rs.sort(key=load_value)
    return groups


def group_labels(groups: dict[Key, list[Any]]) -> dict[Key, str]:
    """A readable, distinct name per group: ``tiny-cnn (json, closed loop, stress)``; groups that would share
    one get the time of their first step."""
    base = {}
    for key, rs in groups.items():
        _, target, model, proto, _ = key
        base[key] = f"{model or target} ({proto or 'http'}, {mode(rs[0])})"
    count: dict[str, int] = {}
    for lab in base.values():
        count[lab] = count.get(lab, 0) + 1
    return {k: (f"{lab} at {min(r.created_at for r in groups[k])}" if count[lab] > 1 else lab)
            for k, lab in base.items()}


def load_value(r: Any) -> float:
    """The step's load: concurrency (closed loop) or target rate in req/s (open loop; achieved for a trace)."""
    if r.config.scenario == "server":
        c = r.metrics.client or {}
        return float(r.config.request_rate or c.get("target_rate") or c.get("achieved_rate") or 0.0)
    return float(r.config.concurrency)


def _imported(r: Any) -> bool:
    return r.run.get("imported") == "locust"


def _err_rate(r: Any) -> float:
    """Failed / (failed + completed) of a step; a step whose every attempt failed (a lost target) is 1."""
    n = max(r.metrics.errors.count, sum((r.metrics.errors.by_kind or {}).values()))
    total = n + r.metrics.latency_ms.count
    return n / total if total else 0.0


def _invalid_trace(rs: list[Any], ys: list[float]) -> list[dict[str, Any]]:
    bad = [i for i, r in enumerate(rs) if not r.validity.valid]
    if not bad:
        return []
    return [{"type": "scatter", "mode": "markers", "name": "INVALID step", "x": [load_value(rs[i]) for i in bad],
             "y": [ys[i] for i in bad], "marker": {"symbol": "x", "size": 12, "color": "#d62728"},
             "text": ["; ".join(rs[i].validity.reasons) for i in bad]}]


def _caption(rs: list[Any]) -> str:
    parts = []
    bad = [f"{load_value(r):g} ({'; '.join(r.validity.reasons)})" for r in rs if not r.validity.valid]
    if bad:
        parts.append("INVALID steps: " + ", ".join(bad) + ".")
    over = [f"{load_value(r):g} ({'; '.join(r.validity.overloaded)})" for r in rs if r.validity.verdict == "OVERLOADED"]
    if over:
        parts.append("OVERLOADED steps (the server fell behind the offered rate): " + ", ".join(over) + ".")
    if any(_imported(r) for r in rs):
        parts.append("Imported from Locust: summary-only (no raw samples); percentiles as Locust computed them.")
    return " ".join(parts)


#: Loads spanning this factor or more (a stress ladder 1 .. 128) are drawn on a log axis.
LOG_AXIS_SPAN = 16


def _group_charts(i: int, key: Key, label: str, rs: list[Any]) -> list[Chart]:
    scen = key[-1]
    xname = "concurrency (connections)" if scen == "concurrent" else "target rate (req/s)"
    xs = [load_value(r) for r in rs]
    xa = {"title": {"text": xname}, **({"tickvals": sorted(set(xs))} if scen == "concurrent" else {})}
    bar_xa = xa
    if xs and min(xs) > 0 and max(xs) / min(xs) >= LOG_AXIS_SPAN:  # a doubling ladder: 1, 2, 4 ran into each other
        xa = {**xa, "type": "log"}
        bar_xa = {**bar_xa, "type": "category"}  # a bar on a log axis has no width to speak of
    cap = _caption(rs)
    out: list[Chart] = []
    tput = [r.metrics.throughput.queries_per_s for r in rs]
    data = [{"type": "scatter", "mode": "lines+markers", "x": xs, "y": tput, "name": "achieved req/s"}]
    if scen == "server":
        data.append({"type": "scatter", "mode": "lines", "x": xs, "y": xs, "name": "target = achieved",
                     "line": {"dash": "dot"}})
    fig = {"data": data + _invalid_trace(rs, tput),
           "layout": _layout(f"{label}: throughput", xa, {"title": {"text": "req/s"}})}
    title = "throughput vs concurrency" if scen == "concurrent" else "achieved vs target rate"
    out.append(Chart(f"load-tput-{i}", "load", f"{label}: {title}", fig, cap, len(xs)))
    lat = [{"type": "scatter", "mode": "lines+markers", "x": xs, "name": p,  # no completed request: no latency
            "y": [getattr(r.metrics.latency_ms, p) if r.metrics.latency_ms.count else None for r in rs]}
           for p in PCTS]  # fmt: skip
    fig = {"data": lat + _invalid_trace(rs, lat[-1]["y"]),
           "layout": _layout(f"{label}: latency", xa, {"title": {"text": "ms"}})}
    out.append(Chart(f"load-lat-{i}", "load", f"{label}: latency percentiles vs load", fig, cap, 3 * len(xs)))
    raw = [r for r in rs if not _imported(r) and (r.metrics.client or {}).get("uncorrected_latency_ms")]
    if scen == "server" and raw:
        rx = [load_value(r) for r in raw]
        fig = {"data": [
            {"type": "scatter", "mode": "lines+markers", "x": rx, "y": [r.metrics.latency_ms.p99 for r in raw],
             "name": "corrected p99 (from scheduled send)"},
            {"type": "scatter", "mode": "lines+markers", "x": rx,
             "y": [r.metrics.client["uncorrected_latency_ms"]["p99"] for r in raw],
             "name": "uncorrected p99 (from actual send)"}],
            "layout": _layout(f"{label}: corrected vs uncorrected p99", xa,
                              {"title": {"text": "ms"}})}  # fmt: skip
        out.append(Chart(f"load-tail-{i}", "load", f"{label}: corrected vs uncorrected tail", fig,
                         "Uncorrected latency hides coordinated omission: the gap is time spent waiting to send.",
                         2 * len(rx)))
    errs = [_err_rate(r) * 100 for r in rs]
    if any(errs):  # an all-zero error chart is an empty plot on a -1..1 axis: the latency caption says it instead
        fig = {"data": [{"type": "bar", "x": xs, "y": errs, "name": "error rate %"}],
               "layout": _layout(f"{label}: errors", bar_xa,
                                 {"title": {"text": "% failed"}, "rangemode": "tozero"})}
        out.append(Chart(f"load-err-{i}", "load", f"{label}: error rate vs load", fig, cap, len(xs)))
    else:
        lat_chart = out[1]
        lat_chart.caption = (lat_chart.caption + " " if lat_chart.caption else "") + \
            f"No request failed in any of the {len(rs)} step(s) (no error chart)."
    split = _split_chart(i, label, rs, bar_xa)
    return out + ([split] if split else []) + generation_charts(i, label, rs, xs, xa, cap)


def _split_chart(i: int, label: str, rs: list[Any], bar_xa: dict[str, Any]) -> Chart | None:
    """One stacked bar per step: where the time of a request went (``metrics.server.breakdown_ms``, whose parts
    are in a request's order); Results from before it have the coarser queue / compute / rest
    split. None when no step has either."""
    steps = [(load_value(r), r.metrics.server) for r in rs if r.metrics.server]
    fine = [(x, s["breakdown_ms"]) for x, s in steps if s.get("breakdown_ms")]
    if fine:
        keys = list(dict.fromkeys(k for _, b in fine for k in b if k.endswith("_ms") and k != "client_ms"))
        split, what = fine, "where the time of a request went"
        cap = ("Mean ms per request: the client's mean latency cut into its parts (docs/load.md, \"Where the time"
               " went\"); the server's parts are over every request it answered in the step.")
    else:
        keys = ["queue_ms", "compute_ms", "rest_ms"]
        split = [(x, s["latency_split_ms"]) for x, s in steps if s.get("latency_split_ms")]
        what, cap = "client latency split (server queue, compute, rest)", ("From the target's Triton statistics"
                                                                         " over each step (every client of the server).")
    if not split:
        return None
    fig = {"data": [{"type": "bar", "x": [x for x, _ in split], "y": [s.get(k) or 0.0 for _, s in split],
                     "name": k[:-3].replace("_", " ")} for k in keys],
           "layout": _layout(f"{label}: {what}", bar_xa, {"title": {"text": "mean ms per request"}},
                             barmode="relative")}  # fmt: skip
    return Chart(f"load-split-{i}", "load", f"{label}: {what}", fig, cap, len(keys) * len(split))


def _serve_charts(i: int, r: Any, label: str | None = None) -> list[Chart]:
    """Batch-size histogram and server-time boxes of one serve Result, titled by its report label (the raw-data
    table's, distinct per Result; the model file's name when none is given)."""
    s = r.metrics.server or {}
    label = label or str(r.model.path).rsplit("/", 1)[-1]
    out: list[Chart] = []
    bs = s.get("batch_sizes") or {}
    if bs:
        ks = sorted(bs, key=int)
        fig = {"data": [{"type": "bar", "x": [int(k) for k in ks], "y": [bs[k] for k in ks], "name": "model calls"}],
               "layout": _layout(f"{label}: batch sizes",  # ticks at the sizes that ran (never 0.6 rows)
                                 {"title": {"text": "rows per model call"}, "type": "category"},
                                 {"title": {"text": "calls"}})}  # fmt: skip
        out.append(Chart(f"serve-batch-{i}", "serve", f"{label} (served): batch size histogram", fig,
                         f"{s.get('execution_count', sum(bs.values()))} model calls.", len(ks)))
    boxes = []
    for k in ("queue_ms", "compute_ms", "request_ms"):
        q = s.get(k)
        if q:
            boxes.append({"type": "box", "name": k[:-3], "x": [k[:-3]], "q1": [q["p50"]], "median": [q["p50"]], "q3": [q["p90"]],
                          "lowerfence": [q["min"]], "upperfence": [q["p99"]], "mean": [q["mean"]]})
    if boxes:
        fig = {"data": boxes, "layout": _layout(f"{label}: server time", {}, {"title": {"text": "ms"}})}
        out.append(Chart(f"serve-dist-{i}", "serve", f"{label} (served): queue and compute distributions", fig,
                         "Boxes: min, p50, p90, p99 (whisker) per request (compute: per model call).", 5 * len(boxes)))
    return out


def _soak_chart(i: int, r: Any) -> Chart:
    sk = r.metrics.client["soak"]
    iv = sk.get("intervals") or []
    t = [x["t_s"] for x in iv]
    data = [{"type": "scatter", "mode": "lines+markers", "x": t, "y": [x["p99_ms"] for x in iv], "name": "p99 ms"},
            {"type": "scatter", "mode": "lines+markers", "x": t, "y": [x["queries_per_s"] for x in iv],
             "name": "req/s", "yaxis": "y2"}]  # fmt: skip
    if any(x.get("rss_bytes") is not None for x in iv):
        data.append({"type": "scatter", "mode": "lines", "x": t, "name": "RSS MiB", "yaxis": "y3",
                     "y": [None if x.get("rss_bytes") is None else x["rss_bytes"] / 2**20 for x in iv]})
    rss = sk.get("rss") or {}
    verdict = str(sk.get("verdict", "")).upper()
    if rss.get("reason"):  # the verdict's own reason starts with the slope: say it once
        slope = f" RSS slope {rss['reason']}"
    elif rss.get("slope_bytes_per_hour") is not None:
        slope = f" RSS slope {rss['slope_bytes_per_hour'] / 2**20:.2f} MiB/h"
    else:
        slope = ""
    lay = _layout(f"soak: {verdict}", {"title": {"text": "s since soak start"}, "domain": [0, 0.85]},
                  {"title": {"text": "p99 ms"}},
                  yaxis2={"title": {"text": "req/s"}, "overlaying": "y", "side": "right"},
                  yaxis3={"title": {"text": "RSS MiB"}, "overlaying": "y", "side": "right", "position": 0.93,
                          "anchor": "free"})  # fmt: skip
    model = r.run.get("model_name") or str(r.model.path)
    return Chart(f"load-soak-{i}", "load", f"{model}: soak timeline (verdict: {verdict})", {"data": data, "layout": lay},
                 f"Leak verdict: {sk.get('verdict')}.{slope}", len(t) * len(data))


def _table(c: Chart) -> Chart:
    """Attach ``extra["table"]`` = {header, rows}: the chart's numbers for the Markdown report (x, then each trace)."""
    tr = [t for t in c.figure["data"] if t.get("type") != "box"]
    if not tr:
        rows = [[t["name"], t["lowerfence"][0], t["median"][0], t["q3"][0], t["upperfence"][0]]
                for t in c.figure["data"]]  # fmt: skip
        c.extra["table"] = {"header": ["", "min", "p50", "p90", "p99"], "rows": rows}
        return c
    xs = sorted({x for t in tr for x in t["x"]})
    cols = [dict(zip(t["x"], t["y"])) for t in tr]
    c.extra["table"] = {"header": ["x"] + [t["name"] for t in tr],
                        "rows": [[x] + [col.get(x) for col in cols] for x in xs]}  # fmt: skip
    return c


def load_charts(load_entries: list[Any], serve_entries: list[Any] = (),
                serve_labels: list[str] | None = None) -> list[Chart]:
    """Charts for kind ``load`` entries (grouped per workload) and kind ``serve`` entries (server-side, titled by
    ``serve_labels``, one per serve entry: the report's case labels); each carries ``extra["table"]`` for the
    Markdown report."""
    return [_table(c) for c in _charts(load_entries, serve_entries, serve_labels)]


def _charts(load_entries: list[Any], serve_entries: list[Any], serve_labels: list[str] | None = None) -> list[Chart]:
    out: list[Chart] = []
    groups = load_groups(load_entries)
    names = group_labels(groups)
    for i, (key, rs) in enumerate(groups.items()):
        out += _group_charts(i, key, names[key], rs)
    soaks = [e.result for e in load_entries if (e.result.metrics.client or {}).get("soak")]
    for i, e in enumerate(serve_entries):
        if e.result.metrics.server:
            out += _serve_charts(i, e.result, serve_labels[i] if serve_labels else None)
    out += [_soak_chart(i, r) for i, r in enumerate(soaks)]
    return out


#: Steps a knee needs: with fewer, "the last step that still gained" is no knee.
MIN_KNEE_STEPS = 3


def load_findings(load_entries: list[Any], slo_p99_ms: float | None = None) -> list[str]:
    """One line per load group (:func:`load_groups`): the knee (last step whose throughput gain over the
    previous was >= 5 %) from >= :data:`MIN_KNEE_STEPS` closed-loop steps, a find-max-rate search's goodput,
    and, with ``slo_p99_ms``, the highest valid load whose p99 meets it."""
    lines = []
    groups = load_groups(load_entries)
    names = group_labels(groups)
    for key, rs in groups.items():
        scen = key[-1]
        doc = max(((r.metrics.client or {}).get("stress") or {} for r in rs), key=lambda d: d.get("step", -1))
        parts = []
        if doc.get("mode") == "find_max_rate":
            g = doc.get("goodput_rate")
            parts.append(f"goodput {g:g} req/s ({doc.get('goodput_queries_per_s') or 0:.1f} req/s achieved) at"
                         f" p99 <= {doc.get('slo_p99_ms'):g} ms" if g is not None else "no rate met its SLO")
        elif scen == "concurrent" and len(rs) >= MIN_KNEE_STEPS:
            knee = rs[0]
            for a, b in zip(rs, rs[1:]):
                ta, tb = a.metrics.throughput.queries_per_s, b.metrics.throughput.queries_per_s
                if ta > 0 and (tb - ta) / ta < 0.05:
                    break
                knee = b
            parts.append(f"knee at {load_value(knee):g} ({knee.metrics.throughput.queries_per_s:.1f} req/s)")
        else:
            n = len(rs)
            parts.append(f"{n} step{'' if n == 1 else 's'}" + (f": no knee from fewer than {MIN_KNEE_STEPS}"
                         if scen == "concurrent" else ""))
        if slo_p99_ms is not None:
            ok = [r for r in rs if r.validity.verdict == "VALID" and r.metrics.latency_ms.p99 <= slo_p99_ms]
            parts.append(f"highest load meeting p99 <= {slo_p99_ms:g} ms: {load_value(ok[-1]):g} "
                         f"({ok[-1].metrics.throughput.queries_per_s:.1f} req/s)" if ok
                         else f"no step meets p99 <= {slo_p99_ms:g} ms")  # fmt: skip
        lines.append(f"{names[key]}: " + "; ".join(parts) + ".")
    return lines
