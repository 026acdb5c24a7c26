"""The planner's inputs from measured Results: one *candidate* per way of running one workload in a replica.

A candidate is one setting (backend, session settings, threads per instance, instances side by side, pinned CPUs)
of one workload (the model file, the per-row input shapes and dtypes, the data source). Its service-time model
(:class:`~inferperf.analysis.service_model.Empirical`) holds, per batch size, the raw latency samples of in-process
runs (``bench`` / ``sweep`` Results: one model call per query) made with that many instances running at once
(``--concurrency I --session-mode per-stream``; one instance: concurrency 1), so instances sharing CPUs slow each
other in the samples, not by assumption. Runs of one case (repeats, sweep rounds, ladder rounds) pool their samples;
the batch size is the one dimension pooled over, everything else keeps Results apart (issue 36 item 2: a sweep
over two input sizes had been pooled into one model, 1 ms and 10 ms runs averaged to 5.49 ms).

Results of more than one workload are never planned together: :func:`candidates` refuses them with one line naming
the field that differs (and keeps those of one shape when asked for it).

The server's own work per request (HTTP, decode, encode) comes from ``serve`` Results (:func:`overhead`): request
time minus queue time minus model time (means of ``metrics.server``), a constant per request.

Pure functions over Result documents.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..results.model import Result
from .service_model import Deterministic, Empirical

#: Result kinds whose samples are model calls measured in-process (a sweep case, an optimize variant, a runtime)
IN_PROCESS = ("bench", "sweep", "optimize", "runtimes")
#: the most the medians of one case's runs (rounds, repeats) may differ, as max / min - 1, before a plan on their
#: pooled samples is INVALID: the validation's own target for p50 and throughput (10 %) is the noise a plan can stand
ROUND_SPREAD_LIMIT = 0.10


@dataclass
class Candidate:
    """One measured way to run one workload in a replica.

    Attributes:
        model: model name (zoo name or file stem). backend: runtime. threads: intra-op threads per instance.
        instances: instances measured side by side. service: the samples per batch size (ns).
        sources: batch size -> Result files its samples came from. invalid: Result files whose verdict was not
        VALID (kept, named in the plan). example: its Result at the largest batch size (model file and config
        for the plan and its deployable files). cpus: the CPU ids the runs were pinned to (None: unpinned).
        available_cpus: the effective CPUs of the machine that measured it (an unpinned run used at most these).
        session: the session settings asked for besides the threads (ONNX Runtime's names). workload: the
        workload's fields (:func:`workload_of`). distinct: what tells it apart from a candidate with the same
        backend, threads and instances (set by :func:`candidates`; "" when nothing needs saying).
        run_medians_ns: batch size -> the median of each run pooled into it (one per Result), for the spread.
    """

    model: str
    backend: str
    threads: int
    instances: int
    service: Empirical
    sources: dict[int, list[str]]
    invalid: list[str]
    example: Result
    cpus: list[int] | None = None
    available_cpus: int | None = None
    session: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    distinct: str = ""
    run_medians_ns: dict[int, list[float]] = field(default_factory=dict)

    def spread(self) -> dict[int, dict[str, Any]]:
        """Per batch size with 2 or more runs: ``{"runs", "p50_ms": [per run], "spread": max / min - 1,
        "agree": spread <= ROUND_SPREAD_LIMIT}``."""
        out = {}
        for b, med in sorted(self.run_medians_ns.items()):
            if len(med) >= 2:
                sp = max(med) / min(med) - 1
                out[b] = {"runs": len(med), "p50_ms": [m / 1e6 for m in med], "spread": sp,
                          "agree": sp <= ROUND_SPREAD_LIMIT}
        return out

    @property
    def cores(self) -> int:
        """Cores one replica takes: the CPUs its runs were pinned to, else threads x instances (at most the
        measuring machine's effective CPUs: a run never used more than it had)."""
        if self.cpus:
            return len(self.cpus)
        want = self.threads * self.instances
        return min(want, self.available_cpus) if self.available_cpus else want

    @property
    def label(self) -> str:
        """``onnxruntime 2 threads x 1 instance`` (``, pinned to 1 CPU``, then what tells it apart)."""
        text = f"{self.backend} {self.threads} thread{'s' * (self.threads != 1)} x {self.instances} instance" + \
            ("s" if self.instances != 1 else "")
        if self.cpus:
            text += f", pinned to {len(self.cpus)} CPU{'s' * (len(self.cpus) != 1)}"
        return text + (f", {self.distinct}" if self.distinct else "")


@dataclass
class Overhead:
    """The server's own time per request (ns, constant) and the serve Results it came from.

    ``calibrated``: measured as the event loop's CPU time under load (:mod:`inferperf.plan.calibrate`): ``model``
    is then the loop's part before the batcher and ``loop_out_ms`` its part after the call (``mean_ms`` both, per
    request), ``loop_batch_ms`` its part per model call (0: not split, every loop cost in ``mean_ms``),
    ``call_in_ms`` / ``call_out_ms`` an instance's Python work per call before / after the runtime call (plus
    ``call_in_per_row_ms`` / ``call_out_per_row_ms`` per row), and options
    of one replica are simulated as the replica runs
    (:mod:`inferperf.analysis.replica_sim`: the loop and the instances sharing the replica's cores)."""

    model: Deterministic
    mean_ms: float
    sources: list[str] = field(default_factory=list)
    loop_out_ms: float = 0.0
    calibrated: bool = False
    loop_batch_ms: float = 0.0
    call_in_ms: float = 0.0
    call_out_ms: float = 0.0
    call_in_per_row_ms: float = 0.0
    call_out_per_row_ms: float = 0.0


def threads_of(r: Result) -> int:
    """Intra-op threads per instance: effective, else requested, else the measuring machine's effective CPUs."""
    eff = r.config.session.effective or {}
    req = r.config.session.requested or {}
    t = eff.get("intra_op_num_threads") or req.get("intra_op_num_threads")
    return int(t or r.system.effective_cpus or 1)


def model_name(r: Result) -> str:
    """The zoo name, else the model file's stem."""
    zoo = getattr(r.model, "zoo_name", None) or (r.model.model_extra or {}).get("zoo_name")
    return str(zoo) if zoo else Path(r.model.path).stem


def source_model(r: Result) -> str:
    """Which model file was measured, the same for every batch size: the first 16 hex digits of its sha256, or of
    the file a made-batchable copy came from (``bench --batch-size N`` on a fixed-batch model measures a copy
    named ``<source sha256[:16]>-dynbatch.onnx``, recorded as ``model.source_sha256`` too)."""
    src = getattr(r.model, "source_sha256", None) or (r.model.model_extra or {}).get("source_sha256")
    if src:
        return str(src)[:16]
    name = Path(r.model.path).name
    if name.endswith("-dynbatch.onnx") and len(name) == 16 + len("-dynbatch.onnx"):
        return name[:16]
    return r.model.sha256[:16]


def per_row(shapes: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Input shapes without their leading (batch) dim: what one row of a request is."""
    return {k: list(v[1:]) for k, v in sorted(shapes.items())}


def workload_of(r: Result) -> dict[str, Any]:
    """The workload a Result measured, batch left out: ``{"model", "per-row input shapes", "input dtypes",
    "data source", "input values"}`` (``--value`` constants and ``--int-range`` bounds: the fields :func:`candidates`
    refuses to mix)."""
    w = r.config.workload
    return {"model": source_model(r), "per-row input shapes": per_row(dict(w.shapes or {})),
            "input dtypes": dict(sorted((w.dtypes or {}).items())), "data source": w.data_source,
            "input values": {"values": dict(sorted((w.values or {}).items())),
                             "int_ranges": {k: list(v) for k, v in sorted((w.int_ranges or {}).items())}}}


def setting_of(r: Result) -> dict[str, Any]:
    """How the workload was run, batch left out: backend, session settings (asked for, threads apart), threads,
    instances, pinned CPUs, NUMA node, allocator, environment."""
    c = r.config
    session = {k: v for k, v in sorted((c.session.requested or {}).items())
               if k != "intra_op_num_threads" and v is not None}
    return {"backend": c.backend, "session": session, "threads": threads_of(r), "instances": int(c.concurrency),
            "cpus": sorted(c.placement.cpus) if c.placement.cpus else None, "numa_node": c.placement.numa_node,
            "allocator": getattr(c, "allocator", None), "env": dict(sorted((c.env or {}).items()))}


def _key(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, default=str)


def _plannable(r: Result) -> bool:
    c = r.config
    return (r.kind in IN_PROCESS and bool(r.samples.latency_ns) and c.scenario in ("single-stream", "concurrent")
            and not (c.concurrency > 1 and c.session_mode != "per-stream"))


def _shape_text(shapes: dict[str, list[Any]]) -> str:
    return ", ".join(f"{k or 'x'}: {'x'.join(map(str, v)) or 'scalar'}" for k, v in shapes.items()) or "no shapes"


def _same_shapes(wanted: dict[str, list[Any]], have: dict[str, list[Any]]) -> bool:
    """``wanted`` (``--shape``: ``""`` names the only input) against a Result's per-row shapes: every input named
    has that shape (inputs not named may have any)."""
    if list(wanted) == [""] and len(have) == 1:
        return list(wanted.values()) == list(have.values())
    return all(k in have and have[k] == v for k, v in wanted.items())  # the inputs named; others free


def _refuse_mixed(groups: dict[str, list[tuple[Path, Result]]]) -> None:
    """One line naming the first workload field that differs, two Result files that differ in it, and the fix."""
    docs = [(workload_of(rs[0][1]), rs[0][0]) for rs in groups.values()]
    (a, pa), rest = docs[0], docs[1:]
    for name in ("model", "per-row input shapes", "input dtypes", "data source", "input values"):
        other = next(((b, pb) for b, pb in rest if b[name] != a[name]), None)
        if other is None:
            continue
        b, pb = other
        show = (lambda v: _shape_text(v)) if name == "per-row input shapes" else (lambda v: str(v))
        fix = ("pass --shape with one of them to plan that shape" if name == "per-row input shapes" else
               "plan from Results of one workload (--from a folder holding only them)")
        verb = "differ" if name.endswith("s") else "differs"
        raise UsageError(f"--from mixes workloads: {name} {verb} ({pa}: {show(a[name])}; {pb}: {show(b[name])}): "
                         f"{fix}")


def candidates(results: list[tuple[Path, Result]], model: str | None = None,
               shapes: dict[str, list[int]] | None = None, model_sha256: str | None = None) -> list[Candidate]:
    """The in-process Results (``bench``, ``sweep``; single-stream, or concurrent with one session per stream) of
    one workload, one candidate per setting (:func:`setting_of`), samples pooled per batch size.

    Args:
        results: ``(path, Result)`` pairs. model: keep only this model (zoo name, file stem or path).
        shapes: keep only Results of these input shapes (``--shape`` values; the leading dim is the rows and is
            ignored), to plan one workload out of several.
        model_sha256: the sha256 of the model file planned for: keep only Results that measured it (or a
            made-batchable copy of it); a file name says nothing of its content.

    Returns:
        Candidates sorted by cores, threads, instances; empty when no Result qualifies.

    Raises:
        UsageError: the Results left measure more than one workload (the line names the field that differs), or
            ``shapes`` matches none of them (the line lists the shapes there are), or none measured the file
            ``model_sha256`` names.
    """
    want = None if model is None else Path(model.removeprefix("zoo:")).stem
    kept = [(p, r) for p, r in results if _plannable(r) and (want is None or model_name(r) == want)]
    if model_sha256 and kept:
        same = [(p, r) for p, r in kept if source_model(r) == model_sha256[:16]]
        if not same:
            p0, r0 = kept[0]
            raise UsageError(f"--from: {p0} measured another file named {model_name(r0)} (sha256 "
                             f"{source_model(r0)}..., this model is {model_sha256[:16]}...): plan from Results of this "
                             "model file")
        kept = same
    if shapes:
        wanted = per_row(shapes)
        match = [(p, r) for p, r in kept if _same_shapes(wanted, workload_of(r)["per-row input shapes"])]
        if kept and not match:
            there = sorted({_shape_text(workload_of(r)["per-row input shapes"]) for _, r in kept})
            raise UsageError(f"--shape {_shape_text(wanted)} (per row): no Result in --from has it; they have "
                             f"{'; '.join(there)}")
        kept = match
    kept = distinct_runs(kept)
    by_workload: dict[str, list[tuple[Path, Result]]] = {}
    for p, r in kept:
        by_workload.setdefault(_key(workload_of(r)), []).append((p, r))
    if len(by_workload) > 1:
        _refuse_mixed(by_workload)
    groups: dict[str, dict[str, Any]] = {}
    for path, r in kept:
        s = setting_of(r)
        g = groups.setdefault(_key(s), {"setting": s, "samples": {}, "sources": {}, "invalid": [], "example": (0, r),
                                           "medians": {}})
        b = int(r.config.workload.batch_size or 1)
        if b > g["example"][0]:
            g["example"] = (b, r)
        arr = np.asarray(r.samples.latency_ns, dtype=np.float64)
        g["samples"].setdefault(b, []).append(arr)
        ids = np.asarray(r.samples.run_ids or [], dtype=np.int64)
        runs = [arr[ids == k] for k in np.unique(ids)] if ids.size == arr.size and ids.size else [arr]
        g["medians"].setdefault(b, []).extend(float(np.median(x)) for x in runs if x.size)  # a pooled case: per run
        g["sources"].setdefault(b, []).append(str(path))
        if r.validity.verdict != "VALID":
            g["invalid"].append(str(path))
    out = []
    for g in groups.values():
        s, ex = g["setting"], g["example"][1]
        samples = {b: np.concatenate(v) for b, v in g["samples"].items()}
        srcs = {b: ", ".join(v) for b, v in g["sources"].items()}
        out.append(Candidate(model_name(ex), s["backend"], s["threads"], s["instances"], Empirical(samples, srcs),
                             g["sources"], g["invalid"], ex, cpus=s["cpus"], available_cpus=ex.system.effective_cpus,
                             session=s["session"], workload=workload_of(ex), run_medians_ns=g["medians"]))
    _distinguish(out, {id(c): setting_of(c.example) for c in out})
    return sorted(out, key=lambda c: (c.cores, c.threads, c.instances, c.backend, c.distinct))


def _run_keys(r: Result) -> list[tuple[str, Any, Any]]:
    """``(case_key, pid, repeat index)`` of each run a Result holds (a sweep's pooled case lists its runs)."""
    runs = r.run.get("runs") if isinstance(r.run.get("runs"), list) else [r.run]
    return [(r.case_key, x.get("pid"), x.get("repeat_index")) for x in runs if isinstance(x, dict)]


def distinct_runs(results: list[tuple[Path, Result]]) -> list[tuple[Path, Result]]:
    """Each measured run once: a copy of a Result (same runs, same time) is dropped, and a pooled case (a sweep's
    ``cases/X.json``) whose runs are all there on their own (``runs/X-r0.json``, ...) is dropped for them (pooling
    both had counted every sample twice and taken the pooled file for one more run)."""
    singles = {k for _, r in results for k in _run_keys(r) if "runs" not in r.run}
    out, seen = [], set()
    for p, r in results:
        keys = _run_keys(r)
        lat = r.samples.latency_ns
        ident = (tuple(keys), r.created_at, len(lat), tuple(lat[:8]))  # a copy has the same samples too
        pooled = "runs" in r.run and len(keys) > 1
        if ident in seen or (pooled and keys and all(k in singles for k in keys)):
            continue
        seen.add(ident)
        out.append((p, r))
    return out


def _distinguish(cands: list[Candidate], settings: dict[int, dict[str, Any]]) -> None:
    """Set ``distinct`` on candidates whose label would otherwise repeat: the settings that differ among them."""
    labels: dict[str, list[Candidate]] = {}
    for c in cands:
        labels.setdefault(c.label, []).append(c)
    for same in labels.values():
        if len(same) < 2:
            continue
        flat = [{**{f"session.{k}": v for k, v in settings[id(c)]["session"].items()},
                 **{k: v for k, v in settings[id(c)].items() if k not in ("session", "threads", "instances", "backend")}}
                for c in same]
        keys = sorted({k for d in flat for k in d if len({_key(x.get(k)) for x in flat}) > 1})
        for c, d in zip(same, flat):
            c.distinct = ", ".join(f"{k.removeprefix('session.')} {d.get(k)}" for k in keys)


def workload_text(r: Result) -> str:
    """A workload in words: model name, variant when not fp32, the input shapes of one row (``ppocr-det
    1x3x640x640``)."""
    w = workload_of(r)
    variant = getattr(r.model, "variant", "fp32")
    shapes = "/".join("x".join(map(str, [1, *v])) for v in w["per-row input shapes"].values())
    return " ".join(x for x in (model_name(r), variant if variant != "fp32" else "", shapes) if x)


def by_workload(results: list[tuple[Path, Result]]) -> dict[str, list[tuple[Path, Result]]]:
    """The plannable Results (see :func:`candidates`) grouped by model and workload, keyed by
    :func:`workload_text` (made unique when two workloads read alike), in first-seen order."""
    groups: dict[str, list[tuple[Path, Result]]] = {}
    for p, r in results:
        if _plannable(r):
            groups.setdefault(_key({"name": model_name(r), **workload_of(r)}), []).append((p, r))
    out: dict[str, list[tuple[Path, Result]]] = {}
    for rs in groups.values():
        text = workload_text(rs[0][1])
        name, k = text, 1
        while name in out:
            k += 1
            name = f"{text} ({k})"
        out[name] = rs
    return out


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
        if r.kind != "serve" or (want is not None and model_name(r) != want):
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


__all__ = ["IN_PROCESS", "ROUND_SPREAD_LIMIT", "Candidate", "Overhead", "by_workload", "candidates", "distinct_runs", "model_name", "overhead", "per_row", "setting_of",
           "source_model", "threads_of", "workload_of", "workload_text"]
