"""Flatten Results into comparable points, and group them by everything but one axis.

Analysis reads only Result documents (never live sessions), so a report can be
rebuilt elsewhere from the JSON alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..results.model import Result
from ..stats import intervals_separate

AXES = ("threads", "batch", "concurrency", "size", "session_mode", "execution_mode", "model", "variant", "env", "backend")


@dataclass
class Point:
    """One case's figures, with the axes it varies on.

    Attributes:
        case_key: the Result's case key.
        model: model sha256 (first 12 hex) plus file name, as a label.
        threads: effective intra-op threads; batch: rows per query; concurrency: streams.
        size: elements of the first input per row (pixels x channels, or tokens); shapes: full shapes.
        session_mode, execution_mode, variant, env, backend: the other axes, as labels.
        qps, qps_ci: queries/s and its 95 % CI over runs ([] for one run).
        sps, sps_ci: samples/s (queries x batch) and its CI.
        p50_ms, p99_ms: pooled latency percentiles; valid: the Result's verdict.
        smt, over_quota: the threads count used SMT siblings / exceeded the CPU quota (from the sweep's marks).
    """

    case_key: str
    model: str
    threads: int | None
    batch: int
    concurrency: int
    size: int
    shapes: dict[str, list[int]]
    session_mode: str
    execution_mode: str
    variant: str
    env: str
    backend: str
    qps: float
    qps_ci: list[float]
    sps: float
    sps_ci: list[float]
    p50_ms: float
    p99_ms: float
    valid: bool
    marks: list[str] = field(default_factory=list)

    def key_without(self, axis: str) -> tuple:
        """The values of every axis except ``axis``: points sharing it differ only along ``axis``."""
        vals = {a: getattr(self, a) for a in AXES if a != axis}
        if axis not in ("size", "batch"):  # full shapes change with the batch and the input size
            vals["shapes"] = json.dumps(self.shapes, sort_keys=True)
        return tuple(sorted((k, str(v)) for k, v in vals.items()))


def _size(shapes: dict[str, list[int]], batch: int) -> int:
    if not shapes:
        return 0
    first = next(iter(shapes.values()))
    total = 1
    for d in first:
        total *= d
    return total // max(batch, 1)


def point(r: Result) -> Point:
    """Extract a :class:`Point` from a Result."""
    eff = r.config.session.effective
    req = r.config.session.requested
    tp = r.metrics.throughput
    threads = eff.get("intra_op_num_threads")
    return Point(
        case_key=r.case_key,
        model=f"{r.model.sha256[:12]}:{r.model.zoo_name or r.model.path.rsplit('/', 1)[-1]}",
        threads=threads if isinstance(threads, int) else None,
        batch=r.config.workload.batch_size,
        concurrency=r.config.concurrency,
        size=_size(r.config.workload.shapes, r.config.workload.batch_size),
        shapes=r.config.workload.shapes,
        session_mode=r.config.session_mode if r.config.concurrency > 1 else "-",
        execution_mode=str(req.get("execution_mode", eff.get("execution_mode", "-"))),
        variant=r.model.variant,
        env=json.dumps(r.config.env, sort_keys=True),
        backend=r.config.backend,
        qps=tp.queries_per_s,
        qps_ci=list(tp.queries_per_s_ci95),
        sps=tp.samples_per_s,
        sps_ci=list(tp.samples_per_s_ci95),
        p50_ms=r.metrics.latency_ms.p50,
        p99_ms=r.metrics.latency_ms.p99,
        valid=r.validity.valid,
        marks=list(r.run.get("marks", [])) if isinstance(r.run, dict) else [],
    )


def group_by_axis(points: Iterable[Point], axis: str) -> list[list[Point]]:
    """Groups of points that differ only along ``axis`` (>= 2 distinct values), each sorted by that axis."""
    groups: dict[tuple, list[Point]] = {}
    for p in points:
        if getattr(p, axis) is None:
            continue
        groups.setdefault(p.key_without(axis), []).append(p)
    out = []
    for g in groups.values():
        g.sort(key=lambda p: getattr(p, axis))
        if len({getattr(p, axis) for p in g}) >= 2:
            out.append(g)
    return out


separated = intervals_separate  # one rule: inferperf.stats.intervals_separate


def as_points(results: Iterable[Result]) -> list[Point]:
    """Points of the Results that measured something (failed cases have no Result)."""
    return [point(r) for r in results]


def describe(p: Point) -> dict[str, Any]:
    """A plain dict of a point's axes and figures, for findings' ``values`` and CSV rows."""
    return {
        "threads": p.threads, "batch": p.batch, "concurrency": p.concurrency, "session_mode": p.session_mode,
        "shapes": p.shapes, "queries_per_s": p.qps, "samples_per_s": p.sps, "p50_ms": p.p50_ms, "p99_ms": p.p99_ms,
    }  # fmt: skip


def format_cpulist(cpus: list[int] | None) -> str:
    """Format CPU ids as a kernel CPU list (``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``), the inverse of
    :func:`inferperf.system.parse_cpulist`; ``"-"`` for none."""
    if not cpus:
        return "-"
    cpus = sorted(cpus)
    runs, start, prev = [], cpus[0], cpus[0]
    for c in [*cpus[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        runs.append(f"{start}-{prev}" if prev != start else f"{start}")
        if c is not None:
            start = prev = c
    return ",".join(runs)
