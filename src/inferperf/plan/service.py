"""Service times for the planner, from measured Results (or measured now: :func:`measure`).

A *candidate* is one way to run the model in a replica: backend, threads per instance and instances side by
side. Its service-time model (:class:`~inferperf.analysis.service_model.Empirical`) holds, per batch size,
the raw latency samples of in-process runs (``bench`` / ``sweep`` Results: one model call per query) made
with that many instances running at once (``--concurrency I --session-mode per-stream``; one instance:
concurrency 1), so instances sharing CPUs slow each other in the samples, not by assumption. Runs of one
case (repeats, sweep rounds) pool their samples.

The server's own work per request (HTTP, decode, encode) comes from ``serve`` Results: request time minus
queue time minus model time (means of ``metrics.server``), a constant per request; without one the plan
says it left the server's work out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.service_model import Deterministic, Empirical
from ..config import BenchConfig
from ..errors import UsageError
from ..results.io import load, result_files
from ..results.model import Result


@dataclass
class Candidate:
    """One measured way to run the model in a replica.

    Attributes:
        model: model name (zoo name or file stem). backend: runtime. threads: intra-op threads per instance.
        instances: instances measured side by side. service: the samples per batch size (ns).
        sources: batch size -> Result files its samples came from. invalid: Result files whose verdict was not
        VALID (kept, named in the plan). example: its Result at the largest batch size (model file and config
        for the plan and its deployable files).
    """

    model: str
    backend: str
    threads: int
    instances: int
    service: Empirical
    sources: dict[int, list[str]]
    invalid: list[str]
    example: Result

    @property
    def cores(self) -> int:
        """Cores one replica takes: threads x instances."""
        return self.threads * self.instances

    @property
    def label(self) -> str:
        """``onnxruntime 2 threads x 1 instance``."""
        return f"{self.backend} {self.threads} thread{'s' * (self.threads != 1)} x {self.instances} instance" + \
            ("s" if self.instances != 1 else "")


@dataclass
class Overhead:
    """The server's own time per request (ns, constant) and the serve Results it came from."""

    model: Deterministic
    mean_ms: float
    sources: list[str] = field(default_factory=list)


def _threads(r: Result) -> int:
    eff = r.config.session.effective or {}
    req = r.config.session.requested or {}
    t = eff.get("intra_op_num_threads") or req.get("intra_op_num_threads")
    return int(t or r.system.effective_cpus or 1)


def _model_name(r: Result) -> str:
    zoo = getattr(r.model, "zoo_name", None) or (r.model.model_extra or {}).get("zoo_name")
    return str(zoo) if zoo else Path(r.model.path).stem


def read_results(paths: Iterable[str | Path]) -> list[tuple[Path, Result]]:
    """Every Result under ``paths`` (files or folders), skipping JSON that is not a Result.

    Raises:
        UsageError: a path that does not exist, or no Result found at all.
    """
    out: list[tuple[Path, Result]] = []
    for f in result_files(paths):
        try:
            out.append((f, load(f)))
        except UsageError:
            continue
    if not out:
        raise UsageError(f"no inferperf Result under {', '.join(map(str, paths))}: pass a folder of bench/sweep "
                         "Results, or measure with --measure")
    return out


def candidates(results: list[tuple[Path, Result]], model: str | None = None) -> list[Candidate]:
    """Group the in-process Results (``bench``, ``sweep``; single-stream, or concurrent with one session per
    stream) by (model, backend, threads, instances) and pool their samples per batch size.

    Args:
        results: ``(path, Result)`` pairs. model: keep only this model (zoo name, file stem or path).

    Returns:
        Candidates sorted by cores, then threads.
    """
    want = None if model is None else Path(model.removeprefix("zoo:")).stem
    groups: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for path, r in results:
        if r.kind not in ("bench", "sweep") or not r.samples.latency_ns:
            continue
        c = r.config
        if c.scenario not in ("single-stream", "concurrent") or (c.concurrency > 1 and c.session_mode != "per-stream"):
            continue
        name = _model_name(r)
        if want is not None and name != want:
            continue
        key = (name, c.backend, _threads(r), int(c.concurrency))
        g = groups.setdefault(key, {"samples": {}, "sources": {}, "invalid": [], "example": (0, r)})
        b = int(c.workload.batch_size or 1)
        if b > g["example"][0]:
            g["example"] = (b, r)
        g["samples"].setdefault(b, []).append(np.asarray(r.samples.latency_ns, dtype=np.float64))
        g["sources"].setdefault(b, []).append(str(path))
        if r.validity.verdict != "VALID":
            g["invalid"].append(str(path))
    out = []
    for (name, backend, threads, inst), g in groups.items():
        samples = {b: np.concatenate(v) for b, v in g["samples"].items()}
        srcs = {b: ", ".join(v) for b, v in g["sources"].items()}
        out.append(Candidate(name, backend, threads, inst, Empirical(samples, srcs), g["sources"], g["invalid"],
                             g["example"][1]))
    return sorted(out, key=lambda c: (c.cores, c.threads, c.backend))


def overhead(results: list[tuple[Path, Result]], model: str | None = None) -> Overhead | None:
    """The server's own time per request from ``serve`` Results (request - queue - model-call means; the
    request-weighted mean over them), or None when there is none.

    A request's model call is its batch's: ``compute_ms`` is per call, so the mean per request is the call
    mean (exact when the calls held one request each, as at the light loads this is best measured at).
    """
    want = None if model is None else Path(model.removeprefix("zoo:")).stem
    total = n = 0.0
    srcs: list[str] = []
    for path, r in results:
        s = r.metrics.server or {}
        if r.kind != "serve" or (want is not None and _model_name(r) != want):
            continue
        req, q, comp = (s.get(k) or {} for k in ("request_ms", "queue_ms", "compute_ms"))
        if not req.get("count") or not comp.get("count"):
            continue
        per = max(0.0, float(req["mean"]) - float(q.get("mean", 0.0)) - float(comp["mean"]))
        total += per * req["count"]
        n += req["count"]
        srcs.append(str(path))
    if not n:
        return None
    mean_ms = total / n
    return Overhead(Deterministic(max(1, round(mean_ms * 1e6))), mean_ms, srcs)


def rows(shapes: dict[str, list[int]], batch: int) -> dict[str, list[int]]:
    """``shapes`` (``--shape`` values: full shapes, the leading dim the rows) with the leading dim set to ``batch``,
    so a ``--shape x:1x3x640x640`` measures every size of a ladder (and a served replica takes one row)."""
    return {k: [batch, *v[1:]] if v else v for k, v in shapes.items()}


def ladder_configs(batch_sizes: list[int], instances: list[int], cpus: int, duration_s: float,
                   base: BenchConfig | None = None, pin: list[int] | None = None) -> list[BenchConfig]:
    """The ``--measure`` ladder: for each instance count ``I`` (threads ``cpus // I``, at least 1) and batch
    size, one in-process run with ``I`` instances side by side (per-stream sessions), ``duration_s`` long.
    ``pin``: the CPU ids every run is pinned to (the replica's own CPUs: instances measured side by side on more
    CPUs than the replica will have would predict capacity it does not have); None leaves the runs unpinned.

    Raises:
        UsageError: an empty ladder or a size / count < 1.
    """
    if not batch_sizes or not instances or min(batch_sizes) < 1 or min(instances) < 1:
        raise UsageError("--measure needs batch sizes >= 1 and instance counts >= 1 (e.g. --batch-sizes 1,2,4,8)")
    base = base or BenchConfig()
    out = []
    for inst in instances:
        threads = max(1, cpus // inst)
        for b in batch_sizes:
            upd = {"placement": base.placement.model_copy(update={"cpus": list(pin)}) if pin else base.placement,
                   "concurrency": inst, "scenario": "concurrent" if inst > 1 else "single-stream", "session_mode": "per-stream" if inst > 1 else "shared", "repeat": 1,
                   "session": base.session.model_copy(update={"intra_op_num_threads": threads}),
                   "workload": base.workload.model_copy(update={"batch_size": b, "shapes": rows(base.workload.shapes, b)}),
                   "stop": base.stop.model_copy(update={"min_duration_s": duration_s,
                                                        "max_duration_s": max(duration_s * 3, duration_s + 5)})}
            out.append(base.model_copy(update=upd))
    return out


def measure(model: str, configs: list[BenchConfig], out_dir: Path, command: list[str] | None = None,
            progress: Any = None) -> list[tuple[Path, Result]]:
    """Run each ladder config once, each in a fresh worker process (as ``sweep`` does), and save its Result in
    ``out_dir`` (``b{batch}-i{instances}-t{threads}.json``), so a later ``plan --from`` reuses them.

    Raises:
        the worker's error (UsageError, ModelError, MeasurementError) for the first run that fails.
    """
    from ..measure.runner import run_in_worker
    from ..results.io import save

    out_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for i, cfg in enumerate(configs):
        name = f"b{cfg.workload.batch_size}-i{cfg.concurrency}-t{cfg.session.intra_op_num_threads}.json"
        if progress:
            progress(f"measure {i + 1}/{len(configs)}: batch {cfg.workload.batch_size}, {cfg.concurrency} "
                     f"instance(s) x {cfg.session.intra_op_num_threads} thread(s), {cfg.stop.min_duration_s:g} s")
        r = run_in_worker(model, cfg, command=command)
        out.append((save(r, out_dir / name), r))
    return out


__all__ = ["Candidate", "Overhead", "candidates", "ladder_configs", "measure", "overhead", "read_results", "rows"]
