"""The sweep's plan before it runs: the stop rule each run follows and a time estimate (``--dry-run``)."""

from __future__ import annotations

from .space import Case

#: Seconds a sweep spends per run outside measurement: a fresh worker process (Python start, imports,
#: model load, session creation, Result written back). Measured by ``benchmarks/isolation.py``:
#: median 0.825 s for zoo:squeezenet on a 2-CPU AMD EPYC (BENCHMARKS.md, "Per-case isolation overhead");
#: larger models load for longer, so the estimate is a floor.
ISOLATION_S = 0.83


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def plan_lines(cases: list[Case], repeat: int) -> list[str]:
    """What a sweep will do and how long it may take (printed with ``--dry-run`` and before a sweep runs).

    Each run measures until *both* its minimum duration and its minimum query count are met (capped by
    ``max_duration_s``); its time is unknown before the first query, so the estimate is a range: at least
    cases x rounds x (min duration + warm-up duration + :data:`ISOLATION_S`), at most the same with every
    run reaching its cap.

    Returns:
        Lines of text: the stop rule (both bounds, and how to shorten a slow model's runs) and the estimate.
    """
    if not cases:
        return []
    runs = len(cases) * repeat
    low = sum(c.config.stop.min_duration_s + c.config.warmup.duration_s + ISOLATION_S for c in cases) * repeat
    high = sum(c.config.stop.max_duration_s + c.config.warmup.duration_s + ISOLATION_S for c in cases) * repeat
    stops = {(c.config.stop.min_duration_s, c.config.stop.min_iterations, c.config.stop.max_duration_s,
              c.config.warmup.iterations) for c in cases}
    lines = []
    for dur, its, cap, warm in sorted(stops):
        per_query_ms = 1000.0 * dur / its if its else 0.0
        line = (f"each run: {warm} warm-up queries, then measures until BOTH >= {dur:g} s AND >= {its} queries are"
                f" done (capped at {cap:g} s): a model slower than {per_query_ms:.3g} ms/query runs longer than {dur:g} s")
        if its * 0.09 > dur:  # a 640x640 detector takes about 90 ms per query on 2 cores
            line += f" (e.g. {its} x 90 ms = {its * 0.09:.3g} s); lower --iterations to shorten it"
        lines.append(line)
    lines.append(
        f"estimate: {len(cases)} cases x {repeat} round(s) = {runs} runs: at least {_span(low)} (each >= its minimum"
        f" duration + ~{ISOLATION_S:g} s for a fresh worker process, per BENCHMARKS.md), at most {_span(high)} if every"
        " run reaches its cap; an estimate: model load and warm-up time come on top"
    )
    return lines
