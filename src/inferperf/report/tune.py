"""Report charts and findings for a tune (Results of kind ``tune``): optimisation history, importances, Pareto front.

Reads Results only: each measured trial's Result (``run.tune_trial``, ``run.tune_params``) gives the history;
the winner's Result (``DIR/best.json``, ``run.tune_summary``: goal, importances, validation, Pareto front)
gives the rest. An infeasible trial is drawn as infeasible (red x) and never called the best.
"""

from __future__ import annotations

from typing import Any

from ..stats import bounded, ci_text
from .charts import Chart, _layout
from .numbers import fmt_num


def _results(entries: list[Any]) -> list[Any]:
    return [e.result if hasattr(e, "result") else e for e in entries]


def tune_charts(entries: list[Any]) -> list[Chart]:
    """History (throughput per trial, feasible vs not, best feasible so far), importances and the Pareto front."""
    rs = _results(entries)
    trials = sorted((r for r in rs if "tune_trial" in r.run), key=lambda r: r.run["tune_trial"])
    summary = next((r.run["tune_summary"] for r in rs if r.run.get("tune_summary")), None)
    out: list[Chart] = []
    if trials:
        slo = (summary or {}).get("slo_p99_ms")
        ok = [r for r in trials if slo is None or r.metrics.latency_ms.p99 <= slo]
        bad = [r for r in trials if r not in ok]
        best, line = None, []
        for r in trials:
            if r in ok and (best is None or r.metrics.throughput.samples_per_s > best):
                best = r.metrics.throughput.samples_per_s
            line.append(best)

        def trace(sel: list[Any], name: str, symbol: str, color: str) -> dict[str, Any]:
            """One marker trace of trials."""
            return {"type": "scatter", "mode": "markers", "name": name, "x": [r.run["tune_trial"] for r in sel],
                    "y": [r.metrics.throughput.samples_per_s for r in sel], "marker": {"symbol": symbol, "color": color},
                    "text": [f"{r.run.get('tune_params')} p99 {r.metrics.latency_ms.p99:.4g} ms" for r in sel]}

        data = [trace(ok, "meets the SLO" if slo else "measured", "circle", "#1f77b4")]
        if bad:
            data.append(trace(bad, f"violates p99 <= {slo:g} ms", "x", "#d62728"))
        data.append({"type": "scatter", "mode": "lines", "name": "best feasible so far", "line": {"shape": "hv"},
                     "x": [r.run["tune_trial"] for r in trials], "y": line})
        out.append(Chart(id="tune-history", group="tune", title="Tune: optimisation history",
                         figure={"data": data, "layout": _layout("throughput per trial", {"title": "trial"},
                                                                 {"title": "samples/s"})},
                         caption=f"{len(trials)} measured trials ({len(bad)} infeasible); cached answers are not drawn",
                         points=len(trials)))
    if summary and summary.get("importances"):
        imp = sorted(summary["importances"].items(), key=lambda kv: kv[1])
        out.append(Chart(id="tune-importances", group="tune", title="Tune: parameter importances",
                         figure={"data": [{"type": "bar", "orientation": "h", "x": [v for _, v in imp],
                                           "y": [k for k, _ in imp]}],
                                 "layout": _layout("importance (Optuna's default evaluator)", {"title": "importance"}, {})},
                         caption="how much each parameter matters for the objective", points=len(imp)))
    if summary and summary.get("pareto"):
        front = summary["pareto"]
        out.append(Chart(id="tune-pareto", group="tune", title="Tune: Pareto front (throughput vs p99)",
                         figure={"data": [{"type": "scatter", "mode": "lines+markers", "x": [p["p99_ms"] for p in front],
                                           "y": [p["throughput"] for p in front],
                                           "text": [str(p["config"]) for p in front]}],
                                 "layout": _layout("Pareto front", {"title": "p99 ms"}, {"title": "samples/s"})},
                         caption="configurations no other beats on both throughput and p99", points=len(front)))
    return out


def tune_findings(entries: list[Any]) -> list[str]:
    """One line per tune: the validated winner and how sure the choice is (ratio intervals)."""
    out = []
    for r in _results(entries):
        s = r.run.get("tune_summary")
        if not s:
            continue
        v = s.get("validation") or {}
        best = ", ".join(f"{k} {v}" for k, v in (s.get("best_config") or {}).items()) or "the defaults"
        text = f"tune ({s.get('goal')}): best {best}: {fmt_num(r.metrics.throughput.samples_per_s)}" \
               f" samples/s, p99 {fmt_num(r.metrics.latency_ms.p99)} ms"
        d = v.get("vs_defaults")
        if d and d.get("ratio") is not None:
            text += f"; {d['ratio']:.3f}x the runtime's defaults ({ci_text(d.get('ci95'))}"
            if not bounded(d.get("ci95")):
                text += f": {d['unbounded']})" if d.get("unbounded") else ")"
            else:
                text += ", separated)" if d.get("separated") else ", not separated: no claim)"
        out.append(text)
    return out
