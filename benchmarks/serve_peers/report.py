"""Markdown tables of benchmarks/serve.py's raw results (issue 12).

Figures are medians over rounds, with [min, max] over rounds; ratios are taken per round (both arms of a
ratio ran in the same round) and then summarised the same way, so round-to-round machine drift cancels.
"""

from __future__ import annotations

import statistics
from typing import Any

TARGET_CEILING = 0.85
TARGET_TINY_MS = 1.0
TARGET_224_MS = 3.0
TARGET_JSON_X = 5.0
TARGET_MLSERVER_X = 3.0  # issue 29: JSON serving on cls at concurrency >= 16
TARGET_OVER_PARSE = 1.5  # issue 29: the server's own cost per JSON request / a bare simdjson parse of the body


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _span(xs: list[float], fmt: str = "{:.1f}") -> str:
    """'median [min, max]' (just the value for one round)."""
    if not xs:
        return "-"
    if len(xs) == 1:
        return fmt.format(xs[0])
    return f"{fmt.format(_med(xs))} [{fmt.format(min(xs))}, {fmt.format(max(xs))}]"


def _ratios(a: list[dict[str, Any]], b: list[dict[str, Any]], key: str = "rps") -> list[float]:
    """Per-round a/b of ``key`` (rounds paired by position)."""
    return [x[key] / y[key] for x, y in zip(a, b) if y[key] > 0]


def _verdict(xs: list[float], target: float, higher: bool = True) -> str:
    if not xs:
        return "not measured"
    ok = [x >= target if higher else x <= target for x in xs]
    return "meets" if all(ok) else ("misses" if not any(ok) else "mixed over rounds")


def _model_table(label: str, m: dict[str, Any]) -> list[str]:
    pts, ceil = m["points"], m["ceiling"]
    top = ceil.get(str(max(int(b) for b in ceil))) if ceil else None
    lines = [f"#### {label}", "",
             "| arm | body | conc. | req/s | p50 ms | p99 ms | x ceiling | mean batch | errors |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    order = {"off": 0, "on": 1, "minimal": 2, "mlserver": 3}
    for key, runs in sorted(pts.items(), key=lambda kv: (order.get(kv[0].split("/")[0], 9), kv[0].split("/")[1],
                                                         int(kv[0].split("/")[2]))):
        arm, enc, conc = key.split("/")
        batches = [r["batch_mean"] for r in runs if "batch_mean" in r]
        lines.append(
            f"| {arm} | {enc} | {conc} | {_span([r['rps'] for r in runs])} | {_span([r['p50_ms'] for r in runs], '{:.2f}')}"
            f" | {_span([r['p99_ms'] for r in runs], '{:.2f}')} | {_span(_ratios(runs, top), '{:.2f}') if top else '-'}"
            f" | {_span(batches, '{:.2f}') if batches else '-'} | {sum(r['errors'] for r in runs)} |")
    for b, runs in sorted(ceil.items(), key=lambda kv: int(kv[0])):
        lines.append(f"| ceiling: in-process bench, batch {b} | - | - | {_span([r['rps'] for r in runs])} (rows/s)"
                     f" | {_span([r['p50_ms'] for r in runs], '{:.2f}')} | {_span([r['p99_ms'] for r in runs], '{:.2f}')}"
                     f" | 1 | {b} | - |")
    return lines + [""]


def _targets(label: str, m: dict[str, Any]) -> list[str]:
    pts, ceil = m["points"], m["ceiling"]
    rows = []
    top = ceil.get(str(max(int(b) for b in ceil))) if ceil else None
    concs = sorted({int(k.split("/")[2]) for k in pts})
    on_bin = {c: pts.get(f"on/binary/{c}") for c in concs}
    if top and any(on_bin.values()):
        c_sat = max((c for c in concs if on_bin[c]), key=lambda c: _med([r["rps"] for r in on_bin[c]]))
        r = _ratios(on_bin[c_sat], top)
        rows.append(f"| {label} | batching on (binary) at saturation (conc. {c_sat}) / ceiling | "
                    f"{_span(r, '{:.2f}')} | >= {TARGET_CEILING} | {_verdict(r, TARGET_CEILING)} |")
    for enc, peer in (("binary", "minimal"), ("json", "minimal"), ("json", "mlserver")):
        for c in concs:
            a, b = pts.get(f"on/{enc}/{c}"), pts.get(f"{peer}/{enc}/{c}")
            if c >= 16 and a and b:
                r = _ratios(a, b)
                rows.append(f"| {label} | batching on / {peer} ({enc}, conc. {c}) | {_span(r, '{:.2f}')} | > 1 |"
                            f" {_verdict(r, 1.0)} |")
    rows += _json_cost(label, m, concs)
    for c in concs:
        for arm in ("off", "on"):
            a, b = pts.get(f"{arm}/json/{c}"), pts.get(f"minimal/json/{c}")
            if a and b and label.startswith("squeezenet"):
                r = _ratios(a, b)
                rows.append(f"| {label} | JSON: batching {arm} / stdlib-json app (conc. {c}) | {_span(r, '{:.2f}')} |"
                            f" >= {TARGET_JSON_X} | {_verdict(r, TARGET_JSON_X)} |")
    one = ceil.get("1")
    off1 = pts.get("off/binary/1")
    if one and off1 and label.startswith("squeezenet"):
        d = [s["p50_ms"] - b["p50_ms"] for s, b in zip(off1, one)]
        rows.append(f"| {label} | added latency, 224x224 binary, conc. 1, batching off (ms) | {_span(d, '{:.3f}')} |"
                    f" <= {TARGET_224_MS} | {_verdict(d, TARGET_224_MS, higher=False)} |")
    return rows


def _json_cost(label: str, m: dict[str, Any], concs: list[int]) -> list[str]:
    """Issue 29's JSON rows: batching on / MLServer >= 3x (cls), and the server's own cost per JSON request
    (one CPU saturated: 1 / req/s minus the model's time per row at the top in-process batch) over a bare
    simdjson parse of the same bodies (measured in the same round, same CPU)."""
    pts, ceil, parse = m["points"], m["ceiling"], m.get("parse")
    rows = []
    top = ceil.get(str(max(int(b) for b in ceil))) if ceil else None
    for c in concs:
        a, b = pts.get(f"on/json/{c}"), pts.get(f"mlserver/json/{c}")
        if c >= 16 and a and b and label.startswith("ppocr-cls"):
            r = _ratios(a, b)
            rows.append(f"| {label} | JSON: batching on / mlserver (conc. {c}) | {_span(r, '{:.2f}')} |"
                        f" >= {TARGET_MLSERVER_X} | {_verdict(r, TARGET_MLSERVER_X)} |")
        if c >= 16 and a and top and parse:
            own = [1e3 / p["rps"] - 1e3 / t["rps"] for p, t in zip(a, top)]
            floor = [p["parse_ms"] for p in parse]
            rows.append(f"| {label} | JSON: server's own ms per request (batching on, conc. {c}; 1/req/s - model ms/row)"
                        f" | {_span(own, '{:.3f}')} | - | - |")
            rows.append(f"| {label} | JSON: bare simdjson parse of the body (ms; with the numpy export:"
                        f" {_span([p['export_ms'] for p in parse], '{:.3f}')}) | {_span(floor, '{:.3f}')} | - | - |")
            r = [o / f for o, f in zip(own, floor)]
            rows.append(f"| {label} | JSON: server's own cost / bare parse (conc. {c}) | {_span(r, '{:.2f}')} |"
                        f" <= {TARGET_OVER_PARSE} | {_verdict(r, TARGET_OVER_PARSE, higher=False)} |")
    return rows


def markdown(results: dict[str, Any]) -> str:
    """The BENCHMARKS.md tables: per-model points, then the issue's targets with verdicts."""
    meta = results["meta"]
    out = [f"Command: `{meta['command']}` ({meta['started']} to {meta.get('finished', '?')}, load average"
           f" {meta['load_before'][0]:.2f} before, {meta.get('load_after', [float('nan')])[0]:.2f} after; servers pinned"
           f" to CPU {meta['server_cpu']} with `taskset`, wrk to CPU {meta['client_cpu']}; {meta['rounds']} rounds x"
           f" {meta['seconds']:g} s a point"
           f"{''.join(f', {k} {v:g} s' for k, v in meta.get('model_seconds', {}).items())}; {meta['bodies']} distinct bodies a model; batching on ="
           f" `--max-batch-size {meta['max_batch_size']} {meta['batch_flags']}`).", ""]
    for label, m in results["models"].items():
        out += _model_table(label, m)
    rows = ["| model | figure | value: median [min, max] over rounds | target | verdict |",
            "| --- | --- | ---: | --- | --- |"]
    for label, m in results["models"].items():
        rows += _targets(label, m)
    tiny = results.get("tiny")
    if tiny:
        for enc in ("binary", "json"):
            d = [s["p50_ms"] - b["p50_ms"] for s, b in zip(tiny[enc], tiny["bench"])]
            rows.append(f"| mul_1 [3,2] | added latency, tiny {enc}, conc. 1, batching off (ms) | {_span(d, '{:.3f}')} |"
                        f" <= {TARGET_TINY_MS} | {_verdict(d, TARGET_TINY_MS, higher=False)} |")
        rows.append(f"| mul_1 [3,2] | in-process p50 (ms) | {_span([b['p50_ms'] for b in tiny['bench']], '{:.4f}')} | - | - |")
    mc = results.get("metrics_cost")
    if mc:
        rows.append(f"| - | metrics hooks per request (us, in-process, pinned) |"
                    f" {_span(mc['per_request_us_all'], '{:.1f}')} | - | - |")
        for label, m in results["models"].items():
            runs = m["points"].get(f"off/binary/{max(int(k.split('/')[2]) for k in m['points'])}")
            if runs:
                share = [100 * mc["per_request_us"] * r["rps"] / 1e6 for r in runs]
                rows.append(f"| {label} | metrics hooks as % of the server's time per request (batching off, binary,"
                            f" top conc.) | {_span(share, '{:.2f}')} | <= 2 | {_verdict(share, 2.0, higher=False)} |")
        if tiny:
            share = [100 * mc["per_request_us"] * r["rps"] / 1e6 for r in tiny["binary"]]
            rows.append(f"| mul_1 [3,2] | metrics hooks as % of the time per request (conc. 1, binary) |"
                        f" {_span(share, '{:.2f}')} | <= 2 | {_verdict(share, 2.0, higher=False)} |")
    return "\n".join(out + ["#### Targets", ""] + rows) + "\n"
