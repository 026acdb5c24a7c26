"""From a Result to its history points: one per metric, each keyed by its series.

A *series* is one metric of one workload on one machine. The workload is the model's *name* (so new weights
continue the series), the resolved shapes and the configuration that defines the case (backend, scenario,
concurrency or rate, batch size, the requested session settings, session mode, variant, placement, env, the
command kind); the machine is a fingerprint of the CPU model, core counts, memory and GPUs. The runtime
version is not part of the key: it is stored on each point, and a change of it inside a series is a marked
boundary (a major version change is an environment change to the change-point detector,
:func:`inferperf.analysis.changepoints.change_points`).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..results.model import Result

Direction = Literal["higher", "lower"]
#: metric -> whether higher or lower is better; the metrics a point is made for when the Result has them
METRICS: dict[str, Direction] = {"samples_per_s": "higher", "p50_ms": "lower", "p99_ms": "lower",
                                  "ttft_p50_ms": "lower", "ttft_p99_ms": "lower", "tpot_p50_ms": "lower",
                                  "output_tokens_per_s": "higher"}
#: the backend name -> the package whose version is the runtime's
RUNTIME_PACKAGE = {"onnxruntime": "onnxruntime", "openvino": "openvino", "torch": "torch", "null": "inferperf"}


@dataclass(frozen=True, kw_only=True)
class Figures:
    """What one point of a series holds, stored or not (the one point type: :class:`PointDraft` before it is stored,
    :class:`~.query.Point` read back).

    ``values``: the per-run values (one entry for a single run; the metric's unit: samples/s or ms);
    ``median``: their median; ``lo``/``hi``: the 95 % interval the Result gives for it (``None`` = none);
    ``runtime``: ``"package version"`` of the runtime measured; ``env``: the label whose change the detector
    treats as an environment change (machine fingerprint and runtime major version); ``verdict``: the Result's.
    """

    values: list[float]
    median: float
    lo: float | None
    hi: float | None
    runtime: str
    env: str
    verdict: str = "VALID"


@dataclass(frozen=True, kw_only=True)
class PointDraft(Figures):
    """One metric of one Result, before it is stored: its :class:`Figures` and the series it belongs to."""

    series_key: str
    series_name: str
    metric: str
    direction: Direction
    workload: dict[str, Any]
    machine: str
    extra: dict[str, Any] = field(default_factory=dict)


def _digest(doc: Any, n: int = 16) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:n]


def model_name(result: Result) -> str:
    """The model's name: its zoo name, else its file's stem (``resnet50`` for ``/x/resnet50.onnx``)."""
    return result.model.zoo_name or Path(result.model.path).stem or "model"


def series_machine(result: Result) -> str:
    """12 hex digits naming the machine in a series key: CPU model, logical and effective cores, memory (GiB), GPU
    names. Not :func:`inferperf.system.machine_fingerprint` (which also covers affinity, quota and runtime
    versions: what makes two measurements comparable); this one is part of every stored series key, so it stays as
    it is, and a runtime version change is an environment change within a series instead."""
    s = result.system
    gib = round(s.memory_bytes / 2**30) if s.memory_bytes else None
    return _digest([s.cpu_model, s.logical_cores, s.effective_cpus, gib, sorted(g.name for g in s.gpus)], 12)


def workload_doc(result: Result) -> dict[str, Any]:
    """The plain-data workload a series is keyed by (see the module docstring). The null backend's scripted
    latencies (``session.requested.latencies_s``) stand for the model's speed, so, like new weights, a change of
    them continues the series."""
    c = result.config
    session = {k: v for k, v in c.session.requested.items() if not (c.backend == "null" and k == "latencies_s")}
    return {"model": model_name(result), "kind": result.kind, "backend": c.backend, "scenario": c.scenario,
            "concurrency": c.concurrency, "request_rate": c.request_rate, "batch_size": c.workload.batch_size,
            "shapes": c.workload.shapes, "session": session, "session_mode": c.session_mode,
            "variant": result.model.variant, "placement": c.placement.model_dump(mode="json"), "env": c.env}


def runtime_version(result: Result) -> str:
    """``"package version"`` of the runtime the Result measured (``"onnxruntime 1.32.0"``; ``"?"`` when absent)."""
    pkg = RUNTIME_PACKAGE.get(result.config.backend, result.config.backend)
    return f"{pkg} {result.system.packages.get(pkg, '?')}"


def _major(runtime: str) -> str:
    pkg, _, ver = runtime.partition(" ")
    return f"{pkg} {ver.split('.')[0]}"


def _per_run_percentile(result: Result, q: float) -> list[float]:
    lat, ids = result.samples.latency_ns, result.samples.run_ids
    if not lat or len(ids) != len(lat) or len(set(ids)) < 2:
        return []
    a, r = np.asarray(lat, dtype=float) / 1e6, np.asarray(ids)
    return [float(np.percentile(a[r == k], q)) for k in sorted(set(ids))]


def _interval(ci: list[float]) -> tuple[float | None, float | None]:
    return (float(ci[0]), float(ci[1])) if len(ci) == 2 and all(math.isfinite(v) for v in ci) else (None, None)


def metric_values(result: Result) -> dict[str, tuple[list[float], float | None, float | None]]:
    """metric -> (per-run values, interval low, interval high) for the metrics the Result has.

    samples/s: ``throughput.per_run`` (queries/s) x batch rows, else the pooled figure, with
    ``samples_per_s_ci95``; p50 and p99 (ms): per run from the raw samples when they carry run ids, else the
    pooled summary; p50's interval is ``latency_ms.p50_ci95`` (order statistics), p99 has none.
    """
    m, batch = result.metrics, result.config.workload.batch_size
    out: dict[str, tuple[list[float], float | None, float | None]] = {}
    if m.throughput.samples_per_s > 0:
        runs = [q * batch for q in m.throughput.per_run] or [m.throughput.samples_per_s]
        out["samples_per_s"] = (runs, *_interval(m.throughput.samples_per_s_ci95))
    if m.latency_ms.count > 0:
        out["p50_ms"] = (_per_run_percentile(result, 50) or [m.latency_ms.p50], *_interval(m.latency_ms.p50_ci95))
        out["p99_ms"] = (_per_run_percentile(result, 99) or [m.latency_ms.p99], None, None)
    out.update(token_values(getattr(m, "generation", None)))
    return out


def token_values(gen: Any) -> dict[str, tuple[list[float], float | None, float | None]]:
    """The token metrics of a load step's ``metrics.generation`` block (OpenAI-compatible or KServe generate
    streams): TTFT p50/p99 and TPOT p50 (ms, with the block's ``p50_ci95``/``p99_ci95``), output tokens/s."""
    if not isinstance(gen, dict):
        return {}
    out: dict[str, tuple[list[float], float | None, float | None]] = {}
    for metric, block, q in (("ttft_p50_ms", "ttft_ms", "p50"), ("ttft_p99_ms", "ttft_ms", "p99"),
                             ("tpot_p50_ms", "tpot_ms", "p50")):  # fmt: skip
        b = gen.get(block)
        if isinstance(b, dict) and b.get(q) is not None and b.get("count", 1):
            ci = [v for v in b.get(f"{q}_ci95") or [] if v is not None]
            out[metric] = ([float(b[q])], *_interval(ci))
    if gen.get("output_tokens_per_s"):
        out["output_tokens_per_s"] = ([float(gen["output_tokens_per_s"])], None, None)
    return out


def series_name(workload: dict[str, Any], metric: str, key: str) -> str:
    """A readable series name: ``model.backend.scenario.cN.bN.metric#key8`` (``--series`` globs match it)."""
    w = workload
    load = f"r{w['request_rate']:g}" if w.get("request_rate") else f"c{w['concurrency']}"
    return f"{w['model']}.{w['backend']}.{w['kind']}.{w['scenario']}.{load}.b{w['batch_size']}.{metric}#{key[:8]}"


def drafts(result: Result) -> list[PointDraft]:
    """The history points of one Result, one per metric it has (see :data:`METRICS`)."""
    workload, machine, runtime = workload_doc(result), series_machine(result), runtime_version(result)
    out = []
    for metric, (values, lo, hi) in metric_values(result).items():
        key = _digest({"workload": workload, "machine": machine, "metric": metric}, 32)
        out.append(PointDraft(series_key=key, series_name=series_name(workload, metric, key), metric=metric,
                              direction=METRICS[metric], workload=workload, machine=machine,
                              values=[float(v) for v in values], median=float(statistics.median(values)), lo=lo, hi=hi,
                              runtime=runtime, env=f"{machine}|{_major(runtime)}", verdict=result.validity.verdict))
    return out


__all__ = ["METRICS", "Figures", "PointDraft", "drafts", "series_machine", "metric_values", "model_name", "runtime_version",
           "series_name", "token_values", "workload_doc"]
