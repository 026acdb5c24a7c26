"""Report charts of token-stream load steps (``metrics.generation``, issue 30 item 7): TTFT and ITL percentiles
vs load, their distributions per step (boxes from the summaries: min, p50, p90, p99), output and input
tokens/s vs load, and goodput when SLOs were given. Reads Results only."""

from __future__ import annotations

from typing import Any

from .charts import Chart, _layout


def _pct(r: Any, block: str, name: str) -> float | None:
    return ((r.metrics.generation or {}).get(block) or {}).get(name)


def _boxes(rs: list[Any], xs: list[float], block: str) -> list[dict[str, Any]]:
    out = []
    for x, r in zip(xs, rs):
        q = (r.metrics.generation or {}).get(block)
        if q:
            out.append({"type": "box", "name": f"{x:g}", "x": [f"{x:g}"], "q1": [q["p50"]], "median": [q["p50"]],
                        "q3": [q["p90"]], "lowerfence": [q["min"]], "upperfence": [q["p99"]], "mean": [q["mean"]]})
    return out


def generation_charts(i: int, label: str, rs: list[Any], xs: list[float], xa: dict[str, Any], cap: str) -> list[Chart]:
    """The token-stream charts of one load group (steps ``rs`` at loads ``xs``, x axis ``xa``); none when no
    step carries ``metrics.generation``."""
    pairs = [(x, r) for x, r in zip(xs, rs) if r.metrics.generation]
    if not pairs:
        return []
    gx, grs = [x for x, _ in pairs], [r for _, r in pairs]
    out: list[Chart] = []
    lat = [{"type": "scatter", "mode": "lines+markers", "x": gx, "y": [_pct(r, f"{b}_ms", p) for r in grs],
            "name": f"{b.upper()} {p}"} for b in ("ttft", "itl") for p in ("p50", "p99")]  # fmt: skip
    out.append(Chart(f"gen-lat-{i}", "load", f"{label}: TTFT and ITL vs load",
                     {"data": lat, "layout": _layout(f"{label}: TTFT / ITL", xa, {"title": {"text": "ms"}})},
                     "TTFT from the scheduled send to the first content event; ITL one sample per gap between"
                     " content events (docs/generate.md). " + cap, 4 * len(gx)))  # fmt: skip
    for block, what in (("ttft_ms", "TTFT"), ("itl_ms", "ITL")):
        boxes = _boxes(grs, gx, block)
        if boxes:
            out.append(Chart(f"gen-{block[:-3]}-dist-{i}", "load", f"{label}: {what} distribution per step",
                             {"data": boxes, "layout": _layout(f"{label}: {what}", {"title": {"text": "load"}},
                                                               {"title": {"text": "ms"}})},
                             "Boxes: min, p50, p90, p99 (whisker) per step.", 5 * len(boxes)))  # fmt: skip
    g = [r.metrics.generation for r in grs]
    tok = [{"type": "scatter", "mode": "lines+markers", "x": gx, "y": [x[k] for x in g], "name": name}
           for k, name in (("output_tokens_per_s", "output tokens/s"), ("input_tokens_per_s", "input tokens/s"))]
    if any(x.get("goodput") for x in g):
        tok.append({"type": "scatter", "mode": "lines+markers", "x": gx, "yaxis": "y2", "name": "goodput req/s",
                    "y": [(x.get("goodput") or {}).get("requests_per_s") for x in g]})
    lay = _layout(f"{label}: tokens/s", xa, {"title": {"text": "tokens/s"}},
                  yaxis2={"title": {"text": "goodput req/s"}, "overlaying": "y", "side": "right"})
    out.append(Chart(f"gen-tok-{i}", "load", f"{label}: tokens/s and goodput vs load", {"data": tok, "layout": lay},
                     "Goodput: requests/s meeting every SLO given (--slo-ttft-ms, --slo-tpot-ms; DistServe).",
                     len(tok) * len(gx)))  # fmt: skip
    return out


__all__ = ["generation_charts"]
