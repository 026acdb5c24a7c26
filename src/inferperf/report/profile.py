"""Report charts for profile Results (kind ``profile``): per-op bars, Amdahl ceilings, roofline scatter."""

from __future__ import annotations

from typing import Any

from .charts import Chart, _layout


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


def _roofline(i: int, label: str, p: dict[str, Any]) -> Chart | None:
    pts, peaks = p.get("roofline") or [], p.get("peaks") or {}
    pts = [r for r in pts if r.get("attained_gflops_per_s")]
    if not pts or not peaks:
        return None
    pf, pb = peaks["peak_flops_per_s"] / 1e9, peaks["peak_bytes_per_s"] / 1e9
    xs = [r["intensity"] for r in pts]
    lo, hi = min(xs + [pf / pb]) / 2, max(xs + [pf / pb]) * 2
    roof_x = [lo, pf / pb, hi]
    fig = {"data": [
        {"type": "scatter", "mode": "lines", "x": roof_x, "y": [min(pf, x * pb) for x in roof_x], "name": "roof"},
        {"type": "scatter", "mode": "markers", "x": xs, "y": [r["attained_gflops_per_s"] for r in pts],
         "text": [f"{r['name']} ({r['op']}, {r['bound']}-bound)" for r in pts], "name": "nodes"}],
        "layout": _layout(f"{label}: roofline", {"type": "log", "title": {"text": "FLOP per byte"}},
                          {"type": "log", "title": {"text": "GFLOP/s"}})}
    return Chart(f"profile-roofline-{i}", "profile", f"{label}: roofline (heavy nodes)", fig,
                 f"Peaks probed through ORT: {pf:.0f} GFLOP/s, {pb:.1f} GB/s. {p.get('roofline_note', '')}", len(pts))


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
