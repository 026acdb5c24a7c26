"""Capacity in a report: the one capacity model (:mod:`inferperf.analysis.fleet`, the one ``inferperf plan`` uses).

A plan Result in the report's inputs is the answer, and nothing is computed beside it (:func:`fleet_tables`
returns none). Otherwise, for ``--target-qps`` and ``--slo-p99-ms``, each workload's in-process Results
(:func:`inferperf.analysis.candidates.by_workload`: bench, sweep, optimize, runtimes) become the plan's
candidates, and the fleet search sizes the cheapest fleet of each option by simulating the target rate against
the SLO with the server's own batching rule, plus the server's own time when a ``serve`` Result of the model is
there. HTTP load runs are not planned from: capacity is simulated from service times measured in-process.

(The fixed-headroom rule that stood here, throughput per core x 75 %, answered 6 cores where the plan answered
16 for the same 500 req/s: issue 36 item 8.)
"""

from __future__ import annotations

from typing import Any

from ..analysis.candidates import by_workload, candidates, overhead
from ..analysis.fleet import Option, PlanOptions, Simulator, search
from ..errors import UsageError
from .collect import Entry

#: rows a capacity table lists (the chosen option first)
MAX_ROWS = 8


def _row(o: Option, chosen: bool) -> dict[str, Any]:
    p = o.at_plan
    return {"label": o.label, "replicas": o.replicas, "cores_per_replica": o.candidate.cores, "cores": o.cores(),
            "p50_ms": p.latency_ms["p50"] if p is not None else None,
            "p99_ms": p.latency_ms["p99"] if p is not None else None,
            "utilisation": p.utilisation if p is not None else None, "meets_slo": o.replicas is not None,
            "why_not": o.why_not, "chosen": chosen, "measured_from": {str(b): v for b, v in o.candidate.sources.items()}}


def fleet_tables(entries: list[Entry], target_qps: float | None, slo_p99_ms: float | None) -> tuple[list[dict[str, Any]], list[str]]:
    """One table per workload: ``{"workload", "target_qps", "slo_p99_ms", "method", "validation", "server_overhead_ms",
    "options": [rows, the chosen one first]}``, and notes (why a workload or load run was not planned).

    Nothing when no target was asked for, when a plan Result is among ``entries`` (its answer stands), or
    without an SLO (a note asks for it).
    """
    if target_qps is None or any(e.kind == "plan" for e in entries):
        return [], []
    if slo_p99_ms is None:
        return [], ["Capacity is sized for a rate under a p99: pass --slo-p99-ms as well (the fleet is simulated at "
                    "--target-qps against it, as inferperf plan does)"]
    pairs = [(e.path, e.result) for e in entries]
    notes = []
    if any(e.kind == "load" for e in entries):
        notes.append("HTTP load runs are not planned from: capacity is simulated from service times measured "
                     "in-process (bench, sweep), as inferperf plan does; serve Results add the server's own time")
    opts = PlanOptions(target_qps, slo_p99_ms)
    out = []
    for name, rs in by_workload(pairs).items():
        try:
            cands = candidates(rs)
        except UsageError as e:  # one workload by construction; say so rather than fail the report
            notes.append(f"{name}: not planned ({e})")
            continue
        over = overhead(pairs, cands[0].model)
        ranked, sim = search(cands, opts, over, detail=0)
        chosen = ranked[0] if ranked and ranked[0].replicas is not None else None
        out.append({"workload": name, "target_qps": target_qps, "slo_p99_ms": slo_p99_ms, "method": _method(sim),
                    "validation": "not validated (inferperf plan --validate measures the error on this machine)",
                    "server_overhead_ms": over.mean_ms if over is not None else None,
                    "options": [_row(o, o is chosen) for o in ranked[:MAX_ROWS]]})
    return out, notes


def _method(sim: Simulator) -> str:
    return f"simulated ({sim.method}, {sim.opts.requests} arrivals a point, {sim.opts.arrival} arrivals)"


def capacity_text(t: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The recommendation for one table, and its values (``cores``, ``replicas``)."""
    rows = t["options"]
    c = next((o for o in rows if o["chosen"]), None)
    head = f"Capacity for {t['workload']} at {t['target_qps']:,.0f} queries/s, p99 <= {t['slo_p99_ms']:g} ms"
    if c is None:
        why = rows[0]["why_not"] if rows else "no measured configuration"
        return f"{head}: no option meets the SLO ({why}).", {"workload": t["workload"]}
    over = ("without the server's own time (no serve Result)" if t["server_overhead_ms"] is None
            else f"with the server's own {t['server_overhead_ms']:.3g} ms per request")
    text = (f"{head}: deploy {c['replicas']} replica(s) of {c['label']} = {c['cores']} core(s) (predicted p50 "
            f"{c['p50_ms']:.3g} ms, p99 {c['p99_ms']:.3g} ms at {c['utilisation'] * 100:.0f} % utilisation; "
            f"{t['method']}, {over}; {t['validation']})")
    runner = next((o for o in rows if not o["chosen"] and o["meets_slo"]), None)
    if runner is not None:
        text += f"; runner-up {runner['label']}: {runner['replicas']} replica(s) = {runner['cores']} core(s)"
    return text + ".", {"workload": t["workload"], "cores": c["cores"], "replicas": c["replicas"]}


__all__ = ["MAX_ROWS", "capacity_text", "fleet_tables"]
