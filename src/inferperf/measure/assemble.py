"""Turn raw samples into the measured figures of a Result: summary, windows, validity, notes.

Shared by in-process runs and by the aggregation of repeated runs, so a
figure is always derived the same way from the same kind of samples.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import BenchConfig
from ..results.model import LatencySummary, Window
from ..stats import latency_summary, percentile_notes, windows
from .validity import verdict


def summarize(
    latency_ns: Sequence[int],
    start_offsets_ns: Sequence[int],
    duration_ns: int,
    cfg: BenchConfig,
    errors: int = 0,
    run: int = 0,
) -> tuple[LatencySummary, list[Window], bool, list[str], list[str]]:
    """Latency summary, time windows and validity verdict of one run.

    Args:
        latency_ns, start_offsets_ns: raw samples (ns), offsets from the run's start.
        duration_ns: measurement wall time (ns).
        cfg: the case config (percentile method, stop rule, validity rules).
        errors: failed queries in the run.
        run: run index recorded on each window.

    Returns:
        (summary, windows, valid, reasons, notes).
    """
    summary = latency_summary(latency_ns, cfg.percentile_method)
    notes = percentile_notes(summary["count"])
    v = cfg.validity
    n_win = min(v.n_windows, summary["count"] // 5)
    wins = windows(start_offsets_ns, latency_ns, duration_ns, n_win) if n_win >= 1 and duration_ns > 0 else []
    valid, reasons, vnotes = verdict(
        summary["count"],
        duration_ns / 1e9,
        cfg.stop.min_iterations,
        cfg.stop.min_duration_s,
        cfg.stop.max_duration_s,
        [w["p50_ms"] for w in wins if w["count"]],
        v.max_window_cv_percent,
        v.min_windows,
        errors,
    )
    return LatencySummary(**summary), [Window(run=run, **w) for w in wins], valid, reasons, notes + vnotes
