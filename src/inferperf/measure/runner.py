"""Run cases in fresh worker processes: repeats, interleaved shuffled rounds, aggregation.

Each run is a new Python process (``python -m inferperf.measure.worker``), so
cold start is a real cold start and run-level figures (throughput, cold
start) get a distribution. Several cases are measured in rounds
(:func:`inferperf.measure.rounds.shuffled_rounds`): every round runs each case
once, in an order shuffled with a recorded seed, so machine drift spreads over
all cases instead of biasing the last ones.

Workers are always reaped: on timeout or Ctrl-C the running worker is killed
and waited for; finished runs are handed to ``on_result`` as they complete, so
a caller that saves them keeps everything finished.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import BenchConfig
from ..results.model import ColdStart, LatencySummary, Result, Throughput, Validity
from ..stats import latency_summary, mean_ci, percentile_notes
from .allocator import allocator_env
from .energy_pool import pool_energy
from .jobs import run_job
from .placement import numactl_prefix
from .rounds import shuffled_rounds


def worker_timeout_s(cfg: BenchConfig) -> float:
    """Seconds a worker may take: the measurement cap plus generous room for load, warm-up and batching checks."""
    if cfg.worker_timeout_s:
        return cfg.worker_timeout_s
    return cfg.stop.max_duration_s * 1.5 + cfg.warmup.duration_s * 2 + 180.0


def run_in_worker(model: str, cfg: BenchConfig, repeat_index: int = 0, command: list[str] | None = None) -> Result:
    """Measure one run of ``model`` in a fresh worker process and return its Result.

    Raises:
        the worker's own error class (UsageError, ModelError, ...) with its one-line message, the worker's
        traceback chained for ``--debug`` (see :mod:`inferperf.measure.jobs`); MeasurementError when the
        worker times out, is killed (e.g. out of memory) or writes nothing.
    """
    if command is None:
        command = list(sys.argv)  # the invocation that asked for the run, not the worker's own argv
    job = {"model": str(model), "config": cfg.model_dump(mode="json"), "repeat_index": repeat_index,
           "command": command}
    env = {**os.environ, **cfg.env, **allocator_env(cfg.allocator), "INFERPERF_WORKER": "1"}
    prefix = numactl_prefix(cfg.placement.numa_node) if cfg.placement.numa_node is not None else None
    if prefix:
        env["INFERPERF_NUMACTL"] = "1"
    with run_job("inferperf.measure.worker", job, "out.json", what=f"run {repeat_index}",
                 timeout_s=worker_timeout_s(cfg), timeout_fix="lower --max-duration-s or check the model loads",
                 env=env, argv_prefix=prefix) as out:
        return Result.model_validate(json.loads(out.read_text()))


def run_rounds(
    cases: Sequence[tuple[str, BenchConfig]],
    repeat: int,
    seed: int = 0,
    on_result: Callable[[int, int, Result], None] | None = None,
    command: list[str] | None = None,
) -> list[list[Result]]:
    """Run every case ``repeat`` times in shuffled, interleaved rounds, each run in a fresh worker.

    Args:
        cases: (model, config) pairs.
        repeat: rounds; each round runs every case once.
        seed: seed of the shuffle (``random.Random(seed)``); recorded by callers.
        on_result: called as ``on_result(case_index, round, result)`` when a run finishes.

    Returns:
        results[case_index] = that case's runs in round order.

    Raises:
        the first run's error (a bad model or flag fails fast).
    """
    out: list[list[Result]] = [[] for _ in cases]
    for slot in shuffled_rounds(len(cases), repeat, seed):
        model, cfg = cases[slot.case]
        res = run_in_worker(model, cfg.model_copy(update={"repeat": 1}), repeat_index=slot.round, command=command)
        res.run.update(slot.marks())
        out[slot.case].append(res)
        if on_result:
            on_result(slot.case, slot.round, res)
    return out


def _ci(values: list[float]) -> list[float]:
    """Student's t 95 % CI over runs of a non-negative figure (a rate, a time): the lower bound is clipped at 0,
    since with 2-3 noisy runs the t interval can reach below zero, where no rate or time lies."""
    if len(values) < 2:
        return []
    lo, hi = mean_ci(values)
    return [max(0.0, lo), hi]


def _pooled_reference(runs: Sequence[Result], samples_per_s: float) -> dict[str, Any]:
    """The Offline batch-1 reference over runs: mean batch-1 samples/s, the pooled ratio, each run's ratio."""
    refs = [getattr(r.metrics.throughput, "batch1_reference", None) for r in runs]
    refs = [x for x in refs if x]
    if not refs:
        return {}
    ref_sps = float(np.mean([x["samples_per_s"] for x in refs]))
    return {"batch1_reference": {
        "batch_size": 1,
        "samples_per_s": ref_sps,
        "queries": int(sum(x["queries"] for x in refs)),
        "duration_s": float(sum(x["duration_s"] for x in refs)),
        "per_sample_ratio": samples_per_s / ref_sps if ref_sps > 0 else None,
        "per_run_ratio": [x["per_sample_ratio"] for x in refs],
    }}


def _pooled_cold_start(runs: Sequence[Result]) -> ColdStart | None:
    """Cold start over runs: means, each run's figures, Student's t intervals (None when no run has one)."""
    cold = [r.metrics.cold_start for r in runs if r.metrics.cold_start]
    if not cold:
        return None
    creates = [c.session_create_ms for c in cold]
    firsts = [c.first_inference_ms for c in cold]
    return ColdStart(
        session_create_ms=float(np.mean(creates)),
        first_inference_ms=float(np.mean(firsts)),
        phases={k: float(np.mean([c.phases[k] for c in cold if k in c.phases]))
                for k in dict.fromkeys(k for c in cold for k in c.phases)},
        per_run=[{"session_create_ms": c.session_create_ms, "first_inference_ms": c.first_inference_ms,
                  **c.phases} for c in cold],
        session_create_ms_ci95=_ci(creates),
        first_inference_ms_ci95=_ci(firsts),
    )


def _pool_resources(pooled: Any, runs: Sequence[Result]) -> None:
    """Peak RSS of the highest run (and where that peak came from); mean CPU % over runs."""
    peaks = [r.metrics.resources for r in runs if r.metrics.resources and r.metrics.resources.rss_peak_bytes]
    cpus = [r.metrics.resources.cpu_percent_mean for r in runs
            if r.metrics.resources and r.metrics.resources.cpu_percent_mean is not None]
    top = max(peaks, key=lambda res: res.rss_peak_bytes) if peaks else None
    pooled.rss_peak_bytes = top.rss_peak_bytes if top else None
    pooled.rss_peak_source = getattr(top, "rss_peak_source", None) if top else None
    pooled.cpu_percent_mean = float(np.mean(cpus)) if cpus else None


def aggregate(runs: Sequence[Result], cfg: BenchConfig) -> Result:
    """Pool R runs of one case into one Result: samples pooled (never percentiles averaged),
    run-level throughput and cold start as means with Student's t 95 % intervals over runs.

    Raises:
        ValueError: no runs, or runs of different cases.
    """
    if not runs:
        raise ValueError("no runs to aggregate")
    keys = {r.case_key for r in runs}
    if len(keys) != 1:
        raise ValueError(f"runs of different cases {sorted(keys)} cannot be pooled")
    first = runs[0]
    lat: list[int] = []
    starts: list[int] = []
    streams: list[int] = []
    run_ids: list[int] = []
    warm: list[int] = []
    for k, r in enumerate(runs):
        lat.extend(r.samples.latency_ns)
        starts.extend(r.samples.start_offsets_ns)
        streams.extend(r.samples.stream_ids)
        run_ids.extend([k] * len(r.samples.latency_ns))
        warm.extend(r.samples.warmup_latency_ns)
    qps = [r.metrics.throughput.queries_per_s for r in runs]
    sps = [r.metrics.throughput.samples_per_s for r in runs]
    summary = LatencySummary(**latency_summary(lat, cfg.percentile_method))
    notes = [n for n in first.notes if not n.startswith(("p9", "p99"))] + percentile_notes(summary.count)
    reasons = [f"run {k}: {why}" for k, r in enumerate(runs) for why in r.validity.reasons]
    pids = [r.run.get("pid") for r in runs]
    per_stream = np.mean([r.metrics.throughput.per_stream for r in runs], axis=0).tolist() if all(
        len(r.metrics.throughput.per_stream) == len(first.metrics.throughput.per_stream) for r in runs
    ) else []
    doc = first.model_copy(deep=True)
    doc.run = {"pids": pids, "repeats": len(runs), "runs": [r.run for r in runs]}
    # which run files were pooled, and each run's own p50/p99 (its summary, same percentile method), so `compare`
    # gets run-level latency figures without reading every sample back
    doc.run["pooled_runs"] = [{"created_at": r.created_at, "pid": r.run.get("pid"),
                               "p50_ms": r.metrics.latency_ms.p50 if r.metrics.latency_ms else None,
                               "p99_ms": r.metrics.latency_ms.p99 if r.metrics.latency_ms else None}
                              for r in runs]
    doc.config.repeat = len(runs)
    doc.metrics.latency_ms = summary
    doc.metrics.throughput = Throughput(
        queries_per_s=float(np.mean(qps)),
        samples_per_s=float(np.mean(sps)),
        per_stream=per_stream,
        duration_s=float(sum(r.metrics.throughput.duration_s for r in runs)),
        per_run=qps,
        queries_per_s_ci95=_ci(qps),
        samples_per_s_ci95=_ci(sps),
        **_pooled_reference(runs, float(np.mean(sps))),
    )
    doc.metrics.cold_start = _pooled_cold_start(runs) or doc.metrics.cold_start
    doc.metrics.windows = [w.model_copy(update={"run": k}) for k, r in enumerate(runs) for w in r.metrics.windows]
    doc.metrics.errors.count = sum(r.metrics.errors.count for r in runs)
    by_kind: dict[str, int] = {}
    for r in runs:
        for kind, c in r.metrics.errors.by_kind.items():
            by_kind[kind] = by_kind.get(kind, 0) + c
    doc.metrics.errors.by_kind = by_kind
    if doc.metrics.resources is not None:
        _pool_resources(doc.metrics.resources, runs)
    doc.metrics.energy = pool_energy([getattr(r.metrics, "energy", None) for r in runs])
    doc.samples.latency_ns, doc.samples.start_offsets_ns = lat, starts
    doc.samples.stream_ids, doc.samples.run_ids, doc.samples.warmup_latency_ns = streams, run_ids, warm
    doc.samples.timeline = {"runs": [r.samples.timeline for r in runs]} if any(r.samples.timeline for r in runs) else None
    doc.validity = Validity(valid=not reasons, reasons=reasons, rules=first.validity.rules)
    doc.notes = list(dict.fromkeys(notes))
    return doc


def run_repeats(model: str | Path, cfg: BenchConfig, command: list[str] | None = None,
                on_result: Callable[[int, int, Result], None] | None = None) -> Result:
    """``cfg.repeat`` runs of one case, each in a fresh worker, pooled by :func:`aggregate`."""
    runs = run_rounds([(str(model), cfg)], cfg.repeat, seed=cfg.workload.seed, on_result=on_result,
                      command=command)[0]
    return aggregate(runs, cfg)
