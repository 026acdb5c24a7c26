"""Locust's stats CSVs -> summary-only Results (``inferperf load --from-locust-csv PREFIX``; issue 13, item 9).

``locust --csv PREFIX`` writes ``PREFIX_stats.csv`` (one row per request name and an ``Aggregated`` row:
counts, min/mean/max/median response time in ms, requests/s, percentile columns ``50%`` ... ``100%``),
``PREFIX_stats_history.csv`` (a row a second: user count, the current requests/s and percentiles over
Locust's last ~10 s, running totals) and ``PREFIX_failures.csv`` (method, name, error, occurrences).

Each named request row becomes one Result of kind ``load`` (scenario ``concurrent``, ``concurrency`` =
most Locust users seen) that says what it is and what it lacks:

- ``run.imported = "locust"`` and ``run.locust`` (source files, request type and name, users, history rows);
  ``metrics.client.imported = "locust"``.
- ``samples`` is empty: no raw samples, so nothing can recompute, pool or bootstrap these figures.
- ``metrics.latency_ms``: Locust's own figures (min, mean, max exact; p50 ... p999 from its histogram of
  response times rounded to 2 significant digits above 100 ms, nearest rank), over *all* requests, failures
  included (Locust times failures too); ``percentiles_from = "locust"``; ``std`` is not in the CSV (0.0, listed
  in ``not_reported``).
- ``metrics.throughput``: successful requests over Locust's duration (request count / Locust's requests/s).
- ``metrics.windows``: from the history, requests/s exact from the running totals between the rows where they
  moved (a distributed run's master learns counts at its workers' reports, every 3 s by default, so a window
  spans report to report: :func:`report_rows`); p50/p99 are Locust's "current" percentiles of that row (its last
  ~10 s, not the window alone).
- ``validity``: ``valid`` when a request succeeded; its reasons say that stability cannot be judged from
  summaries (``validity.stability_judged = false``).

The figures are Locust's last CSV write (once a second), so the console's final counts can be a little
higher. Nothing here imports locust.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..results.build import new_result, utc_now
from ..results.model import (CaseConfig, ErrorCounts, LatencySummary, Metrics, ModelInfo, Result, Samples,
                             SessionConfig, StopConfig, SystemInfo, Throughput, Validity, WarmupConfig, Window,
                             WorkloadConfig)  # fmt: skip

#: LatencySummary field <- Locust percentile column
PERCENTILE_COLUMNS = {"p50": "50%", "p90": "90%", "p95": "95%", "p99": "99%", "p999": "99.9%"}
STABILITY_REASON = ("stability not judged: imported Locust summaries hold no raw samples, only totals and"
                    " Locust's sliding-window percentiles")  # fmt: skip
_INFER = re.compile(r"^/v2/models/(?P<model>[^/]+)(?:/versions/[^/]+)?/infer$")


@dataclass(frozen=True)
class LocustRow:
    """One row of ``PREFIX_stats.csv`` (times in ms; ``None`` where Locust wrote ``N/A``)."""

    type: str
    name: str
    count: int
    failures: int
    median_ms: float | None
    mean_ms: float
    min_ms: float
    max_ms: float
    content_bytes: float
    requests_per_s: float
    failures_per_s: float
    percentiles_ms: dict[str, float | None]


@dataclass(frozen=True)
class HistoryRow:
    """One row of ``PREFIX_stats_history.csv``: ``t`` in whole epoch seconds, current figures and totals."""

    timestamp_s: int
    users: int
    type: str
    name: str
    requests_per_s: float
    percentiles_ms: dict[str, float | None]
    total_count: int
    total_failures: int


@dataclass
class LocustCsv:
    """Everything read from one ``--csv PREFIX``: stats rows (named, then ``Aggregated``), history, failures."""

    prefix: str
    rows: list[LocustRow]
    aggregated: LocustRow | None
    history: list[HistoryRow]
    failures: list[dict[str, str]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def _num(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "N/A"):
        return None
    return float(text)


def _read(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    except FileNotFoundError:
        raise UsageError(f"'{path}' not found: pass the PREFIX given to locust --csv PREFIX") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UsageError(f"'{path}' is not a readable CSV ({e}): pass the PREFIX given to locust --csv") from None


def _percentiles(row: dict[str, str]) -> dict[str, float | None]:
    return {k: _num(v) for k, v in row.items() if k and k.endswith("%")}


def _stats_row(row: dict[str, str], where: Path) -> LocustRow:
    try:
        return LocustRow(
            type=row["Type"] or "", name=row["Name"], count=int(row["Request Count"]),
            failures=int(row["Failure Count"]), median_ms=_num(row["Median Response Time"]),
            mean_ms=float(row["Average Response Time"]), min_ms=float(row["Min Response Time"]),
            max_ms=float(row["Max Response Time"]), content_bytes=float(row["Average Content Size"]),
            requests_per_s=float(row["Requests/s"]), failures_per_s=float(row["Failures/s"]),
            percentiles_ms=_percentiles(row),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"'{where}' is not Locust's stats CSV (column {e}): pass the PREFIX given to locust --csv") from None


def _history_row(row: dict[str, str], where: Path) -> HistoryRow:
    try:
        return HistoryRow(
            timestamp_s=int(row["Timestamp"]), users=int(row["User Count"]), type=row["Type"] or "",
            name=row["Name"], requests_per_s=float(row["Requests/s"]), percentiles_ms=_percentiles(row),
            total_count=int(row["Total Request Count"]), total_failures=int(row["Total Failure Count"]),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"'{where}' is not Locust's stats history CSV (column {e}): pass the PREFIX given to"
                         " locust --csv") from None  # fmt: skip


def read_locust_csv(prefix: str | Path) -> LocustCsv:
    """Parse ``PREFIX_stats.csv`` and ``PREFIX_stats_history.csv`` (both needed) and ``PREFIX_failures.csv``.

    Raises:
        UsageError: a missing or malformed file (one line naming it and the fix).
    """
    p = str(prefix)
    stats_p, hist_p, fail_p = (Path(f"{p}_{s}.csv") for s in ("stats", "stats_history", "failures"))
    rows = [_stats_row(r, stats_p) for r in _read(stats_p)]
    history = [_history_row(r, hist_p) for r in _read(hist_p)]
    failures = _read(fail_p) if fail_p.exists() else []
    files = {"stats_csv": str(stats_p), "stats_history_csv": str(hist_p)}
    if fail_p.exists():
        files["failures_csv"] = str(fail_p)
    named = [r for r in rows if r.name != "Aggregated"]
    agg = next((r for r in rows if r.name == "Aggregated"), None)
    return LocustCsv(prefix=p, rows=named, aggregated=agg, history=history, failures=failures, files=files)


def _latency(row: LocustRow, where: str) -> LatencySummary:
    if row.count == 0:
        return LatencySummary.empty(percentile_method="nearest-rank")
    missing = [c for c in PERCENTILE_COLUMNS.values() if row.percentiles_ms.get(c) is None]
    if missing:
        raise UsageError(f"{where}: row {row.name!r} lacks Locust's {', '.join(missing)} columns:"
                         " keep Locust's default PERCENTILES_TO_REPORT")  # fmt: skip
    pct = {k: float(row.percentiles_ms[c] or 0.0) for k, c in PERCENTILE_COLUMNS.items()}
    return LatencySummary(count=row.count, mean=row.mean_ms, std=0.0, min=row.min_ms, max=row.max_ms, **pct,
                          percentile_method="nearest-rank", percentiles_from="locust",
                          not_reported=["std", "p50_ci95"])  # fmt: skip


def report_rows(history: list[HistoryRow]) -> list[HistoryRow]:
    """The history rows at which Locust's totals moved (the first row, then each row whose running total differs
    from the row before). Locust's master writes a row a second but learns counts only from its workers' reports
    (every 3 s by default: locust's ``WORKER_REPORT_INTERVAL``), so in a distributed run the totals step every few
    rows; a single process moves them every row, and then every row is a report row."""
    out = history[:1]
    for a, b in zip(history, history[1:], strict=False):
        if b.total_count != a.total_count:
            out.append(b)
    return out


def _windows(history: list[HistoryRow]) -> list[Window]:
    """Windows between consecutive report rows (:func:`report_rows`): exact counts and rates from the totals,
    Locust's percentiles. A window spans from one report to the next, so a distributed run's per-second rows
    (50, 48, 0, 120, 121, 0, ... requests: when the workers reported, not the load) become one window per report."""
    out: list[Window] = []
    t0 = history[0].timestamp_s if history else 0
    rows = report_rows(history)
    for a, b in zip(rows, rows[1:], strict=False):
        dt = b.timestamp_s - a.timestamp_s
        p50, p99 = b.percentiles_ms.get("50%"), b.percentiles_ms.get("99%")
        if dt <= 0 or p50 is None or p99 is None:
            continue
        n = b.total_count - a.total_count
        out.append(Window(t_s=float(a.timestamp_s - t0), count=n, queries_per_s=n / dt, p50_ms=p50, p99_ms=p99,
                          percentiles_from="locust current (last ~10 s)"))  # fmt: skip
    return out


def _errors(failures: list[dict[str, str]], row: LocustRow) -> ErrorCounts:
    """Locust's failure count; kinds (its error text) from ``PREFIX_failures.csv``."""
    name = row.name
    by_kind: dict[str, int] = {}
    for f in failures:
        if f.get("Name") == name:
            kind = (f.get("Error") or "unknown").strip()[:120]
            by_kind[kind] = by_kind.get(kind, 0) + int(f.get("Occurrences") or 0)
    return ErrorCounts(count=row.failures, by_kind=by_kind)


def _notes(row: LocustRow, history: list[HistoryRow], users: int) -> list[str]:
    notes = [
        "imported from Locust's CSV: summary only, no raw samples; percentiles as Locust computed them"
        " (its histogram of rounded response times), not recomputable",
        "figures as of Locust's last CSV write (once a second): its console's final counts can be higher",
        "std and the p50 confidence interval are not in Locust's CSV (std shown as 0.0)",
        "system describes the machine that imported the CSV, not necessarily Locust's client machines",
    ]
    if row.failures:
        notes.append(f"{row.failures} failed requests: Locust's latencies and percentiles include them")
    reports = report_rows(history)
    if len(history) > 1 and len(reports) < len(history) - 1:
        gaps = [b.timestamp_s - a.timestamp_s for a, b in zip(reports, reports[1:], strict=False)]
        width = sorted(gaps)[len(gaps) // 2] if gaps else 0
        notes.append(f"Locust's totals moved at {len(reports)} of {len(history)} history rows (a distributed run: "
                     f"the master counts at its workers' reports): windows span report to report, ~{width} s each")
    ramp = [h.users for h in history if h.total_count > 0 and h.users < users]
    if ramp:
        notes.append(f"Locust's totals include {len(ramp)} s with fewer than {users} users (ramp-up or down;"
                     " use --reset-stats to leave the ramp out)")  # fmt: skip
    return notes


def _model_info(name: str) -> ModelInfo:
    m = _INFER.match(name)
    return ModelInfo(path=name, sha256="", size_bytes=0, inputs=[], outputs=[],
                     served_name=m.group("model") if m else None)  # fmt: skip


def row_result(data: LocustCsv, row: LocustRow, *, system: SystemInfo, command: list[str] | None,
               created_at: str) -> Result:  # fmt: skip
    """One summary-only Result (kind ``load``) for one named request row of ``data``."""
    own = [h for h in data.history if h.name == row.name]
    history = own or ([h for h in data.history if h.name == "Aggregated"] if len(data.rows) == 1 else [])
    users = max((h.users for h in history), default=0)
    duration_s = row.count / row.requests_per_s if row.requests_per_s > 0 else 0.0
    ok = row.count - row.failures
    qps = ok / duration_s if duration_s > 0 else 0.0
    latency = _latency(row, data.files["stats_csv"])
    measured = qps * latency.mean / 1000.0
    locust = {"type": row.type, "name": row.name, "users": users, "history_rows": len(history),
              "requests_per_s": row.requests_per_s, "failures_per_s": row.failures_per_s,
              "content_bytes_mean": row.content_bytes, "percentiles_ms": row.percentiles_ms, **data.files}  # fmt: skip
    client = {"imported": "locust", "target_rate": None, "achieved_rate": row.requests_per_s, "send_lag_ms": None,
              "incomplete": None, "uncorrected_latency_ms": None, "error_adjusted_latency_ms": None,
              "errors": [], "connections": users, "client_cpu_percent": None,
              "littles_law": {"concurrency_expected": users, "measured": measured}}  # fmt: skip
    info = _model_info(row.name)
    key = {"kind": "load", "imported": "locust", "type": row.type, "name": row.name, "users": users}
    case = CaseConfig(
        backend="http", session=SessionConfig(),
        workload=WorkloadConfig(shapes={}, input_pool_size=0, data_source="locust"),
        scenario="concurrent", concurrency=max(users, 1),
        warmup=WarmupConfig(iterations=0, duration_s=0.0),
        stop=StopConfig(min_iterations=0, min_duration_s=0.0, max_duration_s=duration_s),
        percentile_method="nearest-rank",
    )  # fmt: skip
    reasons = [STABILITY_REASON] + ([] if ok else [f"no successful {row.name} request ({row.failures} failed)"])
    return new_result(
        kind="load", model_sha256=info.sha256, key_doc=key, command=command, system=system, created_at=created_at,
        run={"imported": "locust", "locust": locust}, model=info, config=case,
        metrics=Metrics(
            latency_ms=latency,
            throughput=Throughput(queries_per_s=qps, samples_per_s=qps, duration_s=duration_s),
            windows=_windows(history), errors=_errors(data.failures, row), client=client,
        ),
        samples=Samples(),
        validity=Validity(valid=ok > 0, reasons=reasons, stability_judged=False),
        notes=_notes(row, history, users),
    )  # fmt: skip


def locust_results(prefix: str | Path, *, system: SystemInfo | None = None, command: list[str] | None = None,
                   created_at: str | None = None) -> list[Result]:  # fmt: skip
    """Summary-only Results (kind ``load``) from ``locust --csv PREFIX`` files, one per named request row.

    Args:
        prefix: the ``--csv`` prefix (``out/run`` for ``out/run_stats.csv``).
        system: machine block to record (default: this machine, :func:`inferperf.system.collect_system`).
        command: argv to record (default ``sys.argv``).
        created_at: UTC ISO-8601 time to record (default now).

    Raises:
        UsageError: missing or malformed CSVs, or no named request row (Locust made no request).
    """
    data = read_locust_csv(prefix)
    if not data.rows:
        raise UsageError(f"'{data.files['stats_csv']}' has no request rows (Locust made no request):"
                         " check the locust run's log")  # fmt: skip
    if system is None:
        from ..system import collect_system

        system = collect_system()
    when = created_at or utc_now()  # one time and one machine block for every row of one import
    return [row_result(data, r, system=system, command=command, created_at=when) for r in data.rows]


def describe(results: list[Result]) -> list[dict[str, Any]]:
    """One console row per imported Result: name, users, requests, failures, req/s, p50/p99 ms."""
    return [{"name": r.run["locust"]["name"], "users": r.run["locust"]["users"], "requests": r.metrics.latency_ms.count,
             "failures": r.metrics.errors.count, "queries_per_s": r.metrics.throughput.queries_per_s,
             "p50_ms": r.metrics.latency_ms.p50, "p99_ms": r.metrics.latency_ms.p99} for r in results]  # fmt: skip
