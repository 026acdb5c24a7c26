"""Plain-text tables for profile Results and profile diffs (pure; used by ``inferperf profile``)."""

from __future__ import annotations

from typing import Any


def profile_table(p: dict[str, Any], top_ops: int = 12) -> str:
    """The per-op table (ms per run, count, % of run, Amdahl ceiling), time outside kernels as its own row,
    the top nodes with shapes, first-run kernel search, the profiled/unprofiled ratio and the trace path."""
    lines = [f"{'op type':<22}{'mean ms/run':>12}{'count':>7}{'% of run':>10}{'Amdahl x':>10}"]
    for o in p["ops"][:top_ops]:
        lines.append(f"{o['op']:<22}{o['mean_ms']:>12.3f}{o['count']:>7}{o['percent']:>10.1f}"
                     f"{o['amdahl_speedup']:>10.2f}")
    lines.append(f"{'(outside kernels)':<22}{p['outside_kernels_ms']:>12.3f}{'':>7}"
                 f"{p['outside_kernels_percent']:>10.1f}")
    lines.append(f"{'profiled run':<22}{p['profiled_run_ms_mean']:>12.3f}   ({p['runs']} runs after "
                 f"{p.get('warmup_runs', '?')} warm-up)")
    lines.append("")
    lines.append("top nodes: name (op) ms per call x calls per run, % of run, input shapes")
    for n in p["nodes"]:
        lines.append(f"  {n['name']} ({n['op']}) {n['mean_ms']:.3f} ms x {n.get('count', 1)}, {n['percent']:.1f} %, "
                     f"{n['input_shapes']}")
    if p.get("first_run_ms") is not None:
        lines.append(f"first run (kernel search, set apart): {p['first_run_ms']:.2f} ms, "
                     f"kernels {p['first_run_kernel_ms']:.2f} ms")
    if p.get("unprofiled_run_ms_mean") is not None:
        flag = "  FLAGGED (> 1.2)" if p.get("overhead_flagged") else ""
        lines.append(f"unprofiled run {p['unprofiled_run_ms_mean']:.3f} ms; profiled/unprofiled "
                     f"{p['overhead_ratio']:.2f}x{flag}")
    for r in p.get("roofline", []) or []:
        lines.append(f"  roofline {r['name']} ({r['op']}): {r['intensity']:.1f} FLOP/B, {r['bound']}-bound")
    if p.get("trace_path"):
        lines.append(f"trace (open in https://ui.perfetto.dev or chrome://tracing): {p['trace_path']}")
    return "\n".join(lines)


def diff_table(rows: list[dict[str, Any]]) -> str:
    """The ``profile --diff`` table: per op type A, B, change % and verdict (basis named in the header)."""
    basis = rows[0]["basis"] if rows else "share"
    unit = "% of kernels" if basis == "share" else "ms/run"
    lines = [f"{'op type':<22}{'A ' + unit:>16}{'B ' + unit:>16}{'change %':>10}  verdict"]
    for r in rows:
        a = "-" if r["a_ms"] is None else f"{r['a_ms']:.3f}"
        b = "-" if r["b_ms"] is None else f"{r['b_ms']:.3f}"
        c = "-" if r["change_percent"] is None else f"{r['change_percent']:+.1f}"
        why = f" ({r['why']})" if r.get("verdict") == "inconclusive" and r.get("why") else ""
        lines.append(f"{r['op']:<22}{a:>16}{b:>16}{c:>10}  {r['verdict']}{why}")
    lines.append("verdict: a change is called when the medians' 95 % CIs over profiled runs separate and it passes"
                 " the minimum; unchanged under the minimum; inconclusive otherwise")
    return "\n".join(lines)
