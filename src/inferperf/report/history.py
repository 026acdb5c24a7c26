"""Report charts and findings for history documents (``inferperf history export --json``, format
``inferperf-history/1``): one trend chart per series with its change points marked and the commit at each.

Reads the document only (the report never opens the database): each series' ``points`` (time, median, 95 %
interval, commit) and ``change_points`` (index, kind, relative change, p-value, commit).
"""

from __future__ import annotations

from typing import Any

from .charts import Chart, _layout

FORMAT = "inferperf-history/1"
_KIND_COLOR = {"change": "#d62728", "environment": "#7f7f7f"}


def is_history_doc(doc: Any) -> bool:
    """A JSON value is a history series document."""
    return isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(doc.get("series"), list)


def _where(c: dict[str, Any]) -> str:
    return (c.get("commit") or f"point {c.get('point')}")[:12]


def _change_text(c: dict[str, Any]) -> str:
    size = f"{c['rel_change'] * 100:+.1f} %"
    if c["kind"] == "environment":
        return f"environment change {c.get('env_before')} -> {c.get('env_after')} ({size}, not a regression)"
    p = c.get("pvalue")
    return f"change {size} at {_where(c)} ({c['mean_before']:.4g} -> {c['mean_after']:.4g}" + \
        (f", p {p:.2g})" if p is not None else ")")


def history_charts(docs: list[dict[str, Any]]) -> list[Chart]:
    """One chart per series: the points' medians over time with their 95 % intervals, a dashed line at each
    change point (red: a change; grey: an environment change) labelled with its size and commit."""
    out: list[Chart] = []
    k = 0
    for doc in docs:
        for s in doc["series"]:
            pts = s.get("points") or []
            if not pts:
                continue
            x = [p["time"] for p in pts]
            y = [p["median"] for p in pts]
            trace: dict[str, Any] = {"type": "scatter", "mode": "lines+markers", "name": s["metric"], "x": x, "y": y,
                                     "text": [f"{(p.get('commit') or '')[:12]} {p.get('runtime', '')}" for p in pts],
                                     "hovertemplate": "%{x}<br>%{y:.4g}<br>%{text}<extra></extra>"}
            if any(p.get("lo") is not None and p.get("hi") is not None for p in pts):
                trace["error_y"] = {"type": "data", "symmetric": False,
                                    "array": [(p["hi"] - p["median"]) if p.get("hi") is not None else 0 for p in pts],
                                    "arrayminus": [(p["median"] - p["lo"]) if p.get("lo") is not None else 0
                                                   for p in pts]}  # fmt: skip
            shapes, notes = [], []
            for c in s.get("change_points") or []:
                i = c["index"]
                if not 0 < i < len(pts):
                    continue
                color = _KIND_COLOR.get(c["kind"], "#d62728")
                shapes.append({"type": "line", "yref": "paper", "y0": 0, "y1": 1, "x0": x[i], "x1": x[i],
                               "line": {"color": color, "dash": "dash"}})
                notes.append({"x": x[i], "y": 1, "yref": "paper", "showarrow": False, "xanchor": "left",
                              "font": {"color": color, "size": 11},
                              "text": f"{c['rel_change'] * 100:+.1f} % {_where(c)}"})
            better = "higher" if s.get("direction") == "higher" else "lower"
            layout = _layout(f"{s['name']}", {"title": "time (UTC)"}, {"title": f"{s['metric']} ({better} is better)"},
                             shapes=shapes, annotations=notes)
            n_cp = len(shapes)
            caption = (f"{len(pts)} points (median of each point's runs, 95 % interval where the Result gives one); "
                       f"{n_cp} change point(s) marked" + (": " + "; ".join(_change_text(c) for c in s["change_points"])
                                                           if n_cp else ""))
            out.append(Chart(id=f"history-{k}", group="history", title=f"History: {s['name']}",
                             figure={"data": [trace], "layout": layout}, caption=caption, points=len(pts)))
            k += 1
    return out


def history_findings(docs: list[dict[str, Any]]) -> list[str]:
    """One line per change point of every series: its kind, size, means, p-value and commit."""
    return [f"{s['name']}: {_change_text(c)}." for doc in docs for s in doc["series"] for c in s.get("change_points") or []]


__all__ = ["FORMAT", "history_charts", "history_findings", "is_history_doc"]
