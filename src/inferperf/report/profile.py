"""Report charts for profile Results (kind ``profile``): per-op bars, Amdahl ceilings, roofline scatter."""

from __future__ import annotations

from typing import Any

from .charts import Chart, _layout, log_axis


def _bars(i: int, label: str, p: dict[str, Any]) -> Chart:
    ops = p["ops"][:15]
    names = [o["op"] for o in ops] + ["(outside kernels)"]
    ms = [o["mean_ms"] for o in ops] + [p["outside_kernels_ms"]]
    fig = {"data": [{"type": "bar", "orientation": "h", "y": names[::-1], "x": ms[::-1], "name": "ms per run"}],
           "layout": _layout(f"{label}: time per op type", {"title": {"text": "mean ms per run"}}, {},
                             height=max(300, 22 * len(names) + 80))}
    return Chart(f"profile-ops-{i}", "profile", f"{label}: time per operator type", fig,
                 f"{p['runs']} profiled runs after warm-up; time outside kernels is its own bar.", len(names))


def _amdahl(i: int, label: str, p: dict[str, Any]) -> Chart:
    ops = [o for o in p["ops"][:15] if o["amdahl_speedup"] != float("inf")]
    fig = {"data": [{"type": "bar", "x": [o["op"] for o in ops], "y": [o["amdahl_speedup"] for o in ops],
                     "name": "Amdahl ceiling"}],
           "layout": _layout(f"{label}: Amdahl ceiling per op type", {}, {"title": {"text": "end-to-end speed-up (x)"}})}
    return Chart(f"profile-amdahl-{i}", "profile", f"{label}: Amdahl ceiling per operator type", fig,
                 "The end-to-end speed-up if that op type cost nothing: 1 / (1 - its share of the run).", len(ops))


def roof(p: dict[str, Any], pts: list[dict[str, Any]]) -> tuple[float, float, str]:
    """The roof to draw (GFLOP/s, GB/s) and a note: the probed peaks, raised to what the nodes attained when a
    node beats them (a probe that ran slower than the model's own kernels underestimates the machine; a point
    above the roof would be a contradiction, not a measurement)."""
    peaks = p["peaks"]
    pf, pb = peaks["peak_flops_per_s"] / 1e9, peaks["peak_bytes_per_s"] / 1e9
    top_f = max(r["attained_gflops_per_s"] for r in pts)
    top_b = max(r["attained_gflops_per_s"] / r["intensity"] for r in pts if r["intensity"] > 0)
    if top_f <= pf and top_b <= pb:
        return pf, pb, f"Peaks probed through ORT: {pf:.0f} GFLOP/s, {pb:.1f} GB/s."
    note = (f"Peaks probed through ORT ({pf:.0f} GFLOP/s, {pb:.1f} GB/s) are below what some nodes attained, so the"
            f" roof drawn is raised to {max(pf, top_f):.0f} GFLOP/s, {max(pb, top_b):.1f} GB/s (the probe"
            " underestimates this machine; treat the bounds as rough).")
    return max(pf, top_f), max(pb, top_b), note


def _roofline(i: int, label: str, p: dict[str, Any]) -> Chart | None:
    pts, peaks = p.get("roofline") or [], p.get("peaks") or {}
    pts = [r for r in pts if r.get("attained_gflops_per_s") and r.get("intensity")]
    if not pts or not peaks or not peaks.get("peak_bytes_per_s"):
        return None
    pf, pb, note = roof(p, pts)
    ridge = pf / pb
    xs = [r["intensity"] for r in pts]
    ys = [r["attained_gflops_per_s"] for r in pts]
    lo, hi = min(xs + [ridge]) / 2, max(xs + [ridge]) * 2
    roof_x = [lo, ridge, hi]
    roof_y = [min(pf, x * pb) for x in roof_x]
    bound = ["compute" if x >= ridge else "memory" for x in xs]  # by this machine's ridge point, not a stored label
    fig = {"data": [
        {"type": "scatter", "mode": "lines", "x": roof_x, "y": roof_y, "name": f"roof (ridge {ridge:.3g} FLOP/B)"},
        {"type": "scatter", "mode": "markers", "x": xs, "y": ys, "name": "nodes",
         "text": [f"{r['name']} ({r['op']}, {b}-bound)" for r, b in zip(pts, bound)]}],
        "layout": _layout(f"{label}: roofline", log_axis(lo, hi, "FLOP per byte"),
                          log_axis(min(ys + roof_y), max(ys + roof_y), "GFLOP/s"))}
    counts = f"{bound.count('memory')} node(s) memory-bound, {bound.count('compute')} compute-bound"
    return Chart(f"profile-roofline-{i}", "profile", f"{label}: roofline (heavy nodes)", fig,
                 f"{note} Ridge point {ridge:.3g} FLOP/byte: {counts} by it. {p.get('roofline_note', '')}".strip(),
                 len(pts), {"bound": bound, "ridge": ridge})


def profile_charts(entries: list[Any]) -> list[Chart]:
    """Charts for each report entry of kind ``profile`` (``entry.result.metrics.profile`` filled)."""
    out: list[Chart] = []
    for i, e in enumerate(entries):
        p = e.result.metrics.profile
        if not p or not p.get("ops"):
            continue
        label = str(e.result.model.path).rsplit("/", 1)[-1]
        out += [_bars(i, label, p), _amdahl(i, label, p)]
        roof = _roofline(i, label, p)
        if roof:
            out.append(roof)
    return out
