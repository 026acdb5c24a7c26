"""What ``inferperf pipeline`` prints: the per-stage table (bottleneck marked), end to end, advice, outputs."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..measure.speedup import sig


def _ms(s: dict[str, Any] | None, key: str) -> str:
    return f"{s[key]:.3g}" if s else "-"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def stage_table(r: Any) -> Table:
    """One row per stage: kind, workers, service p50/p99, busy, queue, blocked/starved, capacity alone."""
    p = r.run["pipeline"]
    t = Table(title=f"pipeline {p['name']}: per stage", title_justify="left",
              caption=f"* bottleneck: {p['bottleneck']}" if p["bottleneck"] else "no stage limits: the source does",
              caption_justify="left")
    for col in ("", "stage", "kind", "workers", "service p50 ms", "p99 ms", "busy", "queue (max/size)", "full",
                "wait ms", "hand-over ms", "blocked", "starved", "alone items/s", "errors"):
        t.add_column(col, justify="left" if col in ("", "stage", "kind") else "right")
    for name, f in (r.metrics.stages or {}).items():
        q = f["queue"]
        alone = f.get("standalone")
        mark = "*" if name == p["bottleneck"] else ""
        kind = f"{f['kind']}/{'thread' if f['executor'] == 'threads' else 'process'}"
        t.add_row(mark, name, kind, str(f["workers"]), _ms(f["service_ms"], "p50"), _ms(f["service_ms"], "p99"),
                  _pct(f["utilisation"]), f"{q['max']}/{q['size'] if q['size'] is not None else 'inf'}",
                  _pct(q.get("share_full")), _ms(f["queue_wait_ms"], "mean"), _ms(f["handover_ms"], "mean"),
                  _pct(f["blocked_share"]),
                  _pct(f["starved_share"]), sig(alone['items_per_s']) if alone else "-",
                  str(f["errors"]["count"] + f["rejected"]))
    return t


def _texts(o: Any) -> str:
    """The string fields of an output item (the recognised text, labels), for the console."""
    if not isinstance(o, dict):
        return str(o)[:100]
    parts = []
    for k, v in o.items():
        if k == "name":
            continue
        if isinstance(v, str) or (isinstance(v, list) and v and all(isinstance(x, str) for x in v)):
            parts.append(f"{k}={v}")
    return "; ".join(parts)[:200]


def print_pipeline(results: list[Any], console: Console, written: list[str]) -> None:
    """Print the main Result's table, end-to-end figures, notes and the first outputs; then the queue runs."""
    r = results[0]
    p = r.run["pipeline"]
    console.print(stage_table(r))
    lat, x = r.metrics.latency_ms, r.metrics.throughput.queries_per_s
    loop = f"closed loop, {p['concurrency']} in flight" if p["mode"] == "closed" else \
        f"open loop, {p['schedule'].get('arrival')} {p['schedule'].get('rate_per_s')}/s"
    console.print(f"end to end ({loop}): {sig(x)} items/s, latency p50 {sig(lat.p50)} ms, p99 {sig(lat.p99)} ms"
                  f" over {lat.count} items; {r.metrics.errors.count} failed; "
                  f"{'VALID' if r.validity.valid else 'INVALID: ' + '; '.join(r.validity.reasons)}", highlight=False)
    if r.metrics.accuracy:
        means = ", ".join(f"{k} {sig(v)}" for k, v in r.metrics.accuracy["mean"].items())
        console.print(f"check over {r.metrics.accuracy['items']} items: mean {means}", highlight=False)
    for n in r.notes:
        console.print(f"- {n}", highlight=False)
    for name, b in p["buffers"].items():
        console.print(f"- queue before {name!r}: {b['advice']}", highlight=False)
    outs = p.get("outputs") or []
    for o in [o for o in outs if _texts(o)][:5]:
        console.print(f"  output {o.get('name', '') if isinstance(o, dict) else ''}: {_texts(o)}", highlight=False)
    if p.get("queue_sizes"):
        t = Table(title="queue sizes compared (one run each, same workers)", title_justify="left")
        for col in ("queues", "items/s", "p50 ms", "p99 ms", "max occupancy", "errors"):
            t.add_column(col, justify="left" if col == "queues" else "right")
        for row in p["queue_sizes"]:
            t.add_row(row["queues"], f"{sig(row['items_per_s'])}", f"{sig(row['p50_ms'])}", f"{sig(row['p99_ms'])}",
                      str(row["max_occupancy"]), str(row["errors"]))
        console.print(t)
    for w in written:
        console.print(f"result: {w}", highlight=False)


__all__ = ["print_pipeline", "stage_table"]
