"""Report parts for pipeline Results (kind ``pipeline``, issue 17 item 7): the per-stage table with the
bottleneck highlighted, a stage timeline (Gantt-like, from the sampled spans in ``metrics.stages[S].spans``)
and queue occupancy over time (``metrics.stages[S].queue.t_s/depth``), and one summary line per pipeline.
Reads Results only.
"""

from __future__ import annotations

from typing import Any

from .charts import PALETTE, Chart, _layout


def _results(entries: list[Any]) -> list[Any]:
    return [e.result if hasattr(e, "result") else e for e in entries]


def _main(entries: list[Any]) -> list[Any]:
    """Pipeline Results that are not the extra queue-size runs (those appear in their main run's table)."""
    return [r for r in _results(entries) if not (r.run.get("pipeline") or {}).get("queue_setting")]


def pipeline_tables(entries: list[Any]) -> list[dict[str, Any]]:
    """One block per pipeline: ``name``, ``command``, ``bottleneck``, ``rows`` (one per stage), ``queue_sizes``."""
    out = []
    for r in _main(entries):
        p = r.run.get("pipeline") or {}
        rows = []
        for name, f in (r.metrics.stages or {}).items():
            svc, q, alone = f.get("service_ms") or {}, f["queue"], f.get("standalone") or {}
            rows.append({"stage": name, "kind": f"{f['kind']}/{f['executor']}", "workers": f["workers"],
                         "p50_ms": svc.get("p50"), "p99_ms": svc.get("p99"), "utilisation": f["utilisation"],
                         "queue": f"{q['max']}/{q['size'] if q['size'] is not None else 'unbounded'}",
                         "share_full": q.get("share_full"), "wait_ms": (f.get("queue_wait_ms") or {}).get("mean"),
                         "handover_ms": (f.get("handover_ms") or {}).get("mean"),
                         "blocked": f["blocked_share"], "starved": f["starved_share"],
                         "alone_items_per_s": alone.get("items_per_s"), "errors": f["errors"]["count"] + f["rejected"],
                         "bottleneck": name == p.get("bottleneck")})
        out.append({"name": p.get("name", r.model.path), "command": " ".join(r.command), "bottleneck": p.get("bottleneck"),
                    "items_per_s": r.metrics.throughput.queries_per_s, "p99_ms": r.metrics.latency_ms.p99,
                    "rows": rows, "queue_sizes": p.get("queue_sizes") or []})
    return out


def pipeline_charts(entries: list[Any]) -> list[Chart]:
    """Per pipeline: the stage timeline (sampled items' service spans, one lane per stage worker) and the
    occupancy of every queue over time."""
    charts = []
    for i, r in enumerate(_main(entries)):
        stages = r.metrics.stages or {}
        name = (r.run.get("pipeline") or {}).get("name", "pipeline")
        data, n = [], 0
        for k, (st, f) in enumerate(stages.items()):
            spans = f.get("spans") or []
            if not spans:
                continue
            n += len(spans)
            data.append({"type": "bar", "orientation": "h", "name": st, "marker": {"color": PALETTE[k % len(PALETTE)]},
                         "base": [s[2] * 1e3 for s in spans], "x": [(s[3] - s[2]) * 1e3 for s in spans],
                         "y": [f"{st} #{s[1]}" for s in spans], "text": [f"item {s[0]}" for s in spans],
                         "textposition": "none",  # item numbers only on hover: drawn, they overlap on short bars
                         "hovertemplate": "%{text}: %{base:.1f} ms + %{x:.2f} ms<extra>%{y}</extra>"})
        if data:
            lanes = sum(f["workers"] for f in stages.values())
            charts.append(Chart(id=f"pipeline-{i}-timeline", group="pipeline", title=f"{name}: stage timeline",
                                figure={"data": data, "layout": _layout(f"{name}: service spans of sampled items",
                                        {"title": "ms since the measurement start"},
                                        {"autorange": "reversed", "type": "category"}, barmode="overlay",
                                        height=max(260, 40 * lanes + 120))},
                                caption="each bar is one item's service on one worker (items sampled evenly);"
                                        " gaps on a lane are the worker waiting for work", points=n))
        occ, m = [], 0
        for k, (st, f) in enumerate(stages.items()):
            q = f["queue"]
            if q.get("t_s"):
                m += len(q["t_s"])
                occ.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "color": PALETTE[k % len(PALETTE)]},
                            "name": f"before {st} (size {q['size'] if q['size'] is not None else 'unbounded'})",
                            "x": q["t_s"], "y": q["depth"]})
        if occ:
            charts.append(Chart(id=f"pipeline-{i}-queues", group="pipeline", title=f"{name}: queue occupancy",
                                figure={"data": occ, "layout": _layout(f"{name}: items waiting in each queue",
                                                                       {"title": "s"}, {"title": "items"})},
                                caption="a queue that stays full sits before the bottleneck (or before a stage"
                                        " blocked by it); one that stays near 0 after it", points=m))
    return charts


def pipeline_findings(entries: list[Any]) -> list[str]:
    """One line per pipeline: throughput, the bottleneck, the twice-as-fast estimate, overhead, workers."""
    out = []
    for r in _main(entries):
        p = r.run.get("pipeline") or {}
        text = f"pipeline {p.get('name')}: {r.metrics.throughput.queries_per_s:.4g} items/s, p99 {r.metrics.latency_ms.p99:.4g} ms"
        b = p.get("bottleneck")
        text += f"; bottleneck {b!r} ({p.get('bottleneck_reason')})" if b else f"; {p.get('bottleneck_reason')}"
        t = p.get("twice_as_fast") or {}
        if t.get("items_per_s"):
            text += f"; twice as fast it would give about {t['items_per_s']:.3g} items/s (then {t['limited_by']})"
        o = p.get("overhead") or {}
        if o.get("overhead"):
            text += f"; pipeline overhead: {o['ratio']:.2f}x its slowest stage alone"
        w = p.get("workers") or {}
        if w.get("rerun"):
            text += f"; try {w['rerun']}"
        out.append(text)
    return out


__all__ = ["pipeline_charts", "pipeline_findings", "pipeline_tables"]
