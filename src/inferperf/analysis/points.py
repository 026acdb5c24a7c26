"""Flatten Results into comparable points, and group them by everything but one axis.

Analysis reads only Result documents (never live sessions), so a report can be
rebuilt elsewhere from the JSON alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..results.model import Result
from ..stats import intervals_separate, mean_ci

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
        marks: the sweep's marks (``SMT``, ``over quota``, ``oversubscribed``).
        runs: runs pooled (``config.repeat``); p99_runs_ci: Student's t 95 % CI of the per-run p99 (ms) over
            runs ([] for fewer than 2 runs or no per-run samples).
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
    runs: int = 1
    p99_runs_ci: list[float] = field(default_factory=list)

    def workload_key(self) -> tuple:
        """What the case computes: model, variant, backend, full shapes (batch included).

        Findings, "best" choices and capacity plans compare only points with equal keys.
        """
        return (self.model, self.variant, self.backend, json.dumps(self.shapes, sort_keys=True))

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


def per_run_p99_ci(r: Result) -> list[float]:
    """Student's t 95 % CI (ms) of the p99 of each run's own samples, over runs; [] with fewer than 2 runs."""
    s = r.samples
    if len(s.run_ids) != len(s.latency_ns) or not s.latency_ns:
        return []
    lat = np.asarray(s.latency_ns, dtype=np.float64) / 1e6
    ids = np.asarray(s.run_ids)
    p99 = [float(np.percentile(lat[ids == k], 99)) for k in np.unique(ids)]
    if len(p99) < 2:
        return []
    lo, hi = mean_ci(p99)
    return [lo, hi]


def _threads(eff: dict[str, Any]) -> int | None:
    for k in ("intra_op_num_threads", "INFERENCE_NUM_THREADS"):
        t = eff.get(k)
        if isinstance(t, int) and not isinstance(t, bool) and t > 0:
            return t
    return None


def point(r: Result) -> Point:
    """Extract a :class:`Point` from a Result."""
    eff = r.config.session.effective
    req = r.config.session.requested
    tp = r.metrics.throughput
    return Point(
        case_key=r.case_key,
        model=f"{r.model.sha256[:12]}:{r.model.zoo_name or r.model.path.rsplit('/', 1)[-1]}",
        threads=_threads(eff),
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
        runs=max(1, len(tp.per_run) or r.config.repeat),
        p99_runs_ci=per_run_p99_ci(r),
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


def plural(k: int, word: str) -> str:
    """``1 thread``, ``2 threads``."""
    return f"{k} {word}{'' if k == 1 else 's'}"


def model_name(p: Point) -> str:
    """The model's short name (zoo name or file stem, without the variant suffix)."""
    name = p.model.split(":", 1)[1].removesuffix(".onnx")
    return name.removesuffix("." + p.variant)


def workload_label(p: Point, with_shapes: bool = True) -> str:
    """The workload (see :meth:`Point.workload_key`) in words: model, variant and backend when not the
    defaults (fp32, onnxruntime), shapes (e.g. ``ppocr-det int8-static 1x3x224x224``)."""
    parts = [model_name(p)]
    if p.variant != "fp32":
        parts.append(p.variant)
    if p.backend != "onnxruntime":
        parts.append(p.backend)
    if with_shapes and p.shapes:
        parts.append("/".join("x".join(map(str, s)) for s in p.shapes.values()))
    return " ".join(parts)


def case_label(p: Point, skip: Iterable[str] = ()) -> str:
    """THE label of a case (report rows, findings, chart legends, capacity plans): the workload, then the
    streams and threads, leaving out the axes in ``skip`` (``workload``, ``size``, ``concurrency``, ``threads``).

    ``ppocr-det 1x3x224x224, 2 streams (shared), 2 threads``; with ``skip=("size",)``: ``ppocr-det, 2 threads``.
    """
    skip = set(skip)
    parts = [] if "workload" in skip else [workload_label(p, with_shapes="size" not in skip)]
    if "concurrency" not in skip and p.concurrency > 1:
        parts.append(f"{p.concurrency} streams ({p.session_mode})")
    if "threads" not in skip and p.threads:
        parts.append(plural(p.threads, "thread"))
    return ", ".join(parts) or "-"


def by_workload(points: Iterable[Point]) -> dict[tuple, list[Point]]:
    """Points grouped by :meth:`Point.workload_key`, in first-seen order."""
    out: dict[tuple, list[Point]] = {}
    for p in points:
        out.setdefault(p.workload_key(), []).append(p)
    return out


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
