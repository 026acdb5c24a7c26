"""Report charts and findings for capacity plans (Results of kind ``plan``): predicted p99 versus rate per option.

Reads ``metrics.plan`` only (see docs/results-schema.md, "Plan block"). A plan is a prediction: every chart
and line says "predicted" and the plan's validation (the error last measured, or "not validated"), curve points
at or past saturation are drawn apart (their percentiles depend on the simulated duration), and a plan run with
``--validate`` draws its measured points (p99 median and range over the rounds) beside the predicted ones.
"""

from __future__ import annotations

from typing import Any

from .charts import Chart, _layout, log_axis

_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


def _plans(entries: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    rs = [e.result if hasattr(e, "result") else e for e in entries]
    return [(i, r.metrics.plan) for i, r in enumerate(rs) if r.kind == "plan" and r.metrics.plan]


def _validation_traces(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """``plan --validate``'s points on the chosen fleet's axis: one replica measured at rate r stands for R
    replicas at R x r (random routing). Measured p99 (the median of the rounds, the bar their range) and predicted p99."""
    v = doc.get("validation_points") or {}
    pts = [p for p in v.get("points", []) if p["metrics"]["p99_ms"]["measured"]]
    if not pts or doc.get("chosen") is None:
        return []
    reps = doc["options"][doc["chosen"]].get("replicas") or 1
    x = [p["rate_per_s"] * reps for p in pts]
    med = [sorted(p["metrics"]["p99_ms"]["measured"])[len(p["metrics"]["p99_ms"]["measured"]) // 2] for p in pts]
    lo = [m - p["metrics"]["p99_ms"]["interval"][0] for m, p in zip(med, pts)]
    hi = [p["metrics"]["p99_ms"]["interval"][1] - m for m, p in zip(med, pts)]
    text = [f"{p['load'] * 100:.0f} % of one replica: measured p99 {p['metrics']['p99_ms']['interval'][0]:.4g}-"
            f"{p['metrics']['p99_ms']['interval'][1]:.4g} ms over {p['rounds']} rounds, predicted "
            f"{p['metrics']['p99_ms']['predicted']:.4g} ms ({'right' if p['metrics']['p99_ms']['right'] else 'miss'})"
            for p in pts]
    return [{"type": "scatter", "mode": "markers", "name": f"measured p99 (--validate, one replica x {reps})",
             "marker": {"symbol": "diamond", "color": "#000000", "size": 9}, "x": x, "y": med, "text": text,
             "error_y": {"type": "data", "symmetric": False, "array": hi, "arrayminus": lo}},
            {"type": "scatter", "mode": "markers", "name": "predicted p99 at the validated rates",
             "marker": {"symbol": "x", "color": "#000000", "size": 8}, "x": x,
             "y": [p["metrics"]["p99_ms"]["predicted"] for p in pts]}]


def plan_charts(entries: list[Any]) -> list[Chart]:
    """One chart per plan: each option's fleet, p99 against offered rate, the SLO line and the planned rate."""
    out: list[Chart] = []
    for i, doc in _plans(entries):
        inputs = doc.get("inputs", {})
        slo, planned = inputs.get("slo_p99_ms"), inputs.get("planned_rate_per_s")
        data: list[dict[str, Any]] = []
        xs: list[float] = []
        drawn = [o for o in doc.get("options", []) if o.get("curve")]
        steady = [p["p99_ms"] for o in drawn for p in o["curve"] if p.get("p99_ms") and not p["past_saturation"]]
        top = max([*steady, (slo or 0) * 4]) * 1.5 if steady or slo else None  # saturated points sit on this roof
        for k, o in enumerate(drawn):
            pts = [p for p in o["curve"] if p.get("p99_ms") is not None]
            color = _COLORS[k % len(_COLORS)]
            name = f"{o['label']} x {o['replicas']}" + (" (chosen)" if k == 0 and doc.get("chosen") == 0 else "")
            ok = [p for p in pts if not p["past_saturation"]]
            past = [p for p in pts if p["past_saturation"]]
            data.append({"type": "scatter", "mode": "lines+markers", "name": name, "line": {"color": color},
                         "x": [p["rate_per_s"] for p in ok], "y": [p["p99_ms"] for p in ok]})
            if past:
                data.append({"type": "scatter", "mode": "markers", "name": "at or past saturation (p99 in the hover)",
                             "marker": {"symbol": "triangle-up-open", "color": color, "size": 9},
                             "showlegend": k == 0, "hoverinfo": "text",
                             "x": [p["rate_per_s"] for p in past],
                             "y": [min(p["p99_ms"], top) if top else p["p99_ms"] for p in past],
                             "text": [f"{o['label']}: {p['rate_per_s']:.4g} req/s, p99 {p['p99_ms']:.4g} ms (backlog "
                                      "grows: depends on the simulated duration)" for p in past]})
            xs += [p["rate_per_s"] for p in pts]
        if not data:
            continue
        data += _validation_traces(doc)
        shapes = []
        if slo is not None:
            shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": slo, "y1": slo,
                           "line": {"color": "#d62728", "dash": "dash"}})
        if planned is not None:
            shapes.append({"type": "line", "yref": "paper", "y0": 0, "y1": 1, "x0": planned, "x1": planned,
                           "line": {"color": "#7f7f7f", "dash": "dot"}})
        ys = [*steady, *([slo] if slo else [])] or [1.0]
        yaxis = log_axis(min(ys) / 1.2, (top or max(ys)) * 1.2, "p99 latency (ms, predicted, log)")
        layout = _layout(f"Plan for {inputs.get('model')}: predicted p99 vs offered rate",
                         {"title": {"text": "offered rate to the fleet (req/s)"}}, yaxis, shapes=shapes)
        out.append(Chart(id=f"plan-p99-{i}", group="plan", title=f"Plan: p99 vs rate, {inputs.get('model')}",
                         figure={"data": data, "layout": layout},
                         caption=(f"simulated ({inputs.get('method')}); red dashed: SLO p99 <= {slo:g} ms; dotted: "
                                  f"planned rate {planned:g} req/s; triangles: at or past saturation, drawn at the top; "
                                  f"{doc.get('validation')}") if slo is not None and planned is not None else "",
                         points=len(xs)))
    return out


def plan_findings(entries: list[Any]) -> list[str]:
    """One line per plan: the chosen fleet and where it stops meeting the SLO, or that nothing meets it; an INVALID
    plan's line starts with INVALID and its reasons."""
    out = []
    for _, doc in _plans(entries):
        i = doc.get("inputs", {})
        head = f"plan for {i.get('model')} at {i.get('planned_rate_per_s'):g} req/s, p99 <= {i.get('slo_p99_ms'):g} ms"
        if doc.get("valid") is False:  # the reasons first, as the plan's own text gives them
            head = f"INVALID ({'; '.join(doc.get('invalid_reasons') or [])}): {head}"
        if doc.get("chosen") is None:
            out.append(f"{head}: no option meets the SLO (predicted, {doc.get('validation')})")
            continue
        o = doc["options"][doc["chosen"]]
        p99 = (o.get("at_planned_rate") or {}).get("latency_ms", {}).get("p99")
        limit = o.get("limit_rate_per_s")
        p99_text = "-" if p99 is None else f"{p99:.3g}"
        out.append(f"{head}: {o['label']} x {o['replicas']} replica(s) ({o['cores']} cores), predicted p99 "
                   f"{p99_text} ms" + (f", stops meeting the SLO at about {limit:.4g} req/s" if limit else "")
                   + f" ({o.get('validation')})")
    return out


__all__ = ["plan_charts", "plan_findings"]
