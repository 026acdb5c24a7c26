"""Load Results as a CSV whose columns are perf_analyzer's ``-f`` columns where they mean the same thing.

perf_analyzer's ``-f FILE`` writes one row per step with ``Concurrency`` (or
``Request Rate``), ``Inferences/Second``, the server-side ``Server Queue``,
``Server Compute Input``, ``Server Compute Infer``, ``Server Compute Output``
(mean microseconds per request) and the client latency percentiles ``p50
latency`` ... ``p99 latency`` and ``Avg latency`` (microseconds). Those keep
perf_analyzer's names and units here. perf_analyzer's ``Client Send``,
``Network+Server Send/Recv`` and ``Client Recv`` are not measured and are left
out. inferperf's own figures follow with snake_case names and units in them.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from ..results.model import Result

PA_COLUMNS = ["Inferences/Second", "Server Queue", "Server Compute Input", "Server Compute Infer",
              "Server Compute Output", "p50 latency", "p90 latency", "p95 latency", "p99 latency", "Avg latency"]  # fmt: skip
OWN_COLUMNS = ["target_rate_per_s", "achieved_rate_per_s", "uncorrected_p99_us", "error_adjusted_p99_us",
               "send_lag_p99_us", "late_sends", "incomplete", "errors", "client_cpu_percent", "valid",
               "verdict"]  # fmt: skip


def _us(ms: Any) -> Any:
    return "" if ms is None else round(float(ms) * 1000.0)


def row(r: Result) -> dict[str, Any]:
    """One CSV row of a load Result."""
    lat, c, s = r.metrics.latency_ms, r.metrics.client or {}, r.metrics.server or {}
    first = "Concurrency" if r.config.scenario == "concurrent" else "Request Rate"
    step = r.config.concurrency if first == "Concurrency" else c.get("target_rate")
    return {
        first: step, "Inferences/Second": round(r.metrics.throughput.queries_per_s, 3),
        "Server Queue": _us(s.get("queue_ms")), "Server Compute Input": _us(s.get("compute_input_ms")),
        "Server Compute Infer": _us(s.get("compute_infer_ms")), "Server Compute Output": _us(s.get("compute_output_ms")),
        "p50 latency": _us(lat.p50), "p90 latency": _us(lat.p90), "p95 latency": _us(lat.p95),
        "p99 latency": _us(lat.p99), "Avg latency": _us(lat.mean),
        "target_rate_per_s": c.get("target_rate") or "", "achieved_rate_per_s": round(c.get("achieved_rate", 0.0), 3),
        "uncorrected_p99_us": _us((c.get("uncorrected_latency_ms") or {}).get("p99")),
        "error_adjusted_p99_us": _us((c.get("error_adjusted_latency_ms") or {}).get("p99")),
        "send_lag_p99_us": _us((c.get("send_lag_ms") or {}).get("p99")), "late_sends": c.get("late_sends", ""),
        "incomplete": c.get("incomplete", ""), "errors": r.metrics.errors.count,
        "client_cpu_percent": "" if c.get("client_cpu_percent") is None else round(c["client_cpu_percent"], 1), "valid": r.validity.valid,
        "verdict": r.validity.verdict,
    }  # fmt: skip


def write_csv(results: list[Result], path: str | Path) -> Path:
    """Write one row per load Result (closed-loop rows lead with ``Concurrency``, open-loop with ``Request Rate``)."""
    rows = [row(r) for r in results]
    first = "Concurrency" if not rows or "Concurrency" in rows[0] else "Request Rate"
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[first, *PA_COLUMNS, *OWN_COLUMNS], extrasaction="ignore")
        w.writeheader()
        for x in rows:
            w.writerow(x)
    return p


__all__ = ["OWN_COLUMNS", "PA_COLUMNS", "row", "write_csv"]
