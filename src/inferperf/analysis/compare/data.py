"""What `compare` compares: Result files gathered into cases, each case a list of runs with run-level figures.

A *run* is one measurement in one process. A pooled ``--repeat`` Result holds several
(its samples carry ``run_ids``, its throughput and cold start list ``per_run`` figures);
a single-run Result (``bench --repeat 1``, the ``runs/`` folder beside a pooled Result, or
one slot of a CI job's ABBA order) holds one. Runs of one case on one side are pooled by
their match key, so four ``--repeat 1`` files of one configuration are four runs.

Loading is built for speed (two 100-case folders in well under 5 s): a pooled Result lists each
run's own p50/p99 in ``run.pooled_runs``, so samples are read only for single runs and for pooled
Results written before that field; then as numpy arrays straight from the JSON or the
``.npz`` sidecar, never validated element by element, latency and run ids only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from ...errors import UsageError
from ...results.io import is_result_file, migrate, result_files
from ...results.model import Result
from ...stats import percentile

MatchMode = Literal["auto", "case_key", "config"]
#: Per-run figures compared, in display order. Units: queries/s, ms, ms, ms, bytes.
FIGURES = ("throughput", "p50", "p99", "cold_start", "rss_peak")
_SAMPLE_FIELDS = ("latency_ns", "run_ids")


@dataclass
class Run:
    """One run's figures: ``figures[name]`` (see :data:`FIGURES`; missing when not measured) and its
    time windows as ``(queries_per_s, p50_ms, p99_ms)`` rows (the blocks of a one-run comparison)."""

    figures: dict[str, float]
    windows: list[tuple[float, float, float]] = field(default_factory=list)


@dataclass
class Case:
    """One case on one side: its Results (the first is shown), its runs, the files they came from."""

    key: str
    results: list[Result]
    runs: list[Run]
    paths: list[Path]

    @property
    def first(self) -> Result:
        """The Result whose model, config and machine stand for the case."""
        return self.results[0]


def _listed_percentiles(run: dict[str, Any]) -> list[tuple[float, float]] | None:
    """Per-run (p50_ms, p99_ms) from a pooled Result's ``run.pooled_runs``, or None when any is missing."""
    listed = run.get("pooled_runs") if isinstance(run, dict) else None
    if not isinstance(listed, list) or not listed:
        return None
    out = []
    for x in listed:
        if not isinstance(x, dict) or x.get("p50_ms") is None or x.get("p99_ms") is None:
            return None
        out.append((float(x["p50_ms"]), float(x["p99_ms"])))
    return out


def _needs_samples(doc: dict[str, Any]) -> bool:
    """Whether run-level p50/p99 must come from the samples: a single run (its samples are the figures'
    source), or a pooled Result without per-run figures for every run (files written before the field)."""
    metrics = doc.get("metrics") or {}
    n = max(len((metrics.get("throughput") or {}).get("per_run") or []),
            len((metrics.get("cold_start") or {}).get("per_run") or []), 1)
    if n == 1:
        return True
    listed = _listed_percentiles(doc.get("run") or {})
    return listed is None or len(listed) != n


def load_fast(path: Path) -> tuple[Result, dict[str, np.ndarray]]:
    """A Result without its sample lists, and ``{"latency_ns", "run_ids"}`` as int64 arrays.

    Raises:
        UsageError: unreadable JSON, not a Result, a missing sidecar.
    """
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"'{path}' is not readable JSON ({e}): pass Result files written by inferperf") from e
    if not isinstance(doc, dict):
        raise UsageError(f"'{path}' is not an inferperf Result: pass Result files")
    doc = migrate(doc)
    samples = doc.get("samples") or {}
    need = _needs_samples(doc)
    arrays = {f: np.asarray(samples.get(f) or [] if need else [], dtype=np.int64) for f in _SAMPLE_FIELDS}
    for f in ("latency_ns", "warmup_latency_ns", "start_offsets_ns", "stream_ids", "run_ids"):
        samples[f] = []
    samples["timeline"] = None
    if need and samples.get("sidecar"):
        side = path.with_name(samples["sidecar"])
        if not side.exists():
            raise UsageError(f"result '{path}' needs its samples file '{side.name}' beside it: copy it along")
        with np.load(side) as z:
            arrays = {f: z[f].astype(np.int64, copy=False) if f in z.files else arrays[f] for f in _SAMPLE_FIELDS}
    try:
        return Result.model_validate(doc), arrays
    except ValidationError as e:
        err = e.errors()[0]
        raise UsageError(f"'{path}' is not a valid Result: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def config_doc(r: Result) -> dict[str, Any]:
    """The configuration :func:`config_key` hashes, as plain data: backend, requested session settings,
    workload (shapes, batch, data, seed), scenario, concurrency, rate, session mode, env, placement and the
    model variant; not how long it ran, the repeat count, the percentile method or the machine."""
    doc = r.config.model_dump(mode="json", exclude={"warmup", "stop", "percentile_method", "repeat"})
    doc["session"] = doc["session"]["requested"]
    doc["workload"].pop("batching", None)
    doc["workload"]["data_source"] = str(doc["workload"].get("data_source", "")).split(":", 1)[0]
    doc["placement"].pop("memory_bound", None)
    doc["variant"] = r.model.variant
    return doc


def config_key(r: Result) -> str:
    """Key of the case's configuration without the model file's hash (``--match config``): a hash of
    :func:`config_doc` (the machine is compared apart, with warnings)."""
    blob = json.dumps(config_doc(r), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def config_differences(b: Result, c: Result) -> list[tuple[str, Any, Any]]:
    """``(dotted field, baseline value, current value)`` for each field of :func:`config_doc` that differs
    (``session.intra_op_num_threads``, 2, 1), in sorted order; a field missing on a side is ``None``."""
    def flat(d: Any, prefix: str = "") -> dict[str, Any]:
        if not isinstance(d, dict) or not d:
            return {prefix: d}
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}.{k}" if prefix else str(k)) if isinstance(v, dict) and v
                       else {f"{prefix}.{k}" if prefix else str(k): v})
        return out

    fb, fc = flat(config_doc(b)), flat(config_doc(c))
    return [(k, fb.get(k), fc.get(k)) for k in sorted(set(fb) | set(fc)) if fb.get(k) != fc.get(k)]


def _cold_ms(c: dict[str, float]) -> float | None:
    a, b = c.get("session_create_ms"), c.get("first_inference_ms")
    return None if a is None or b is None else float(a) + float(b)


def _by_run(lat: np.ndarray, ids: np.ndarray, n: int) -> list[np.ndarray]:
    """Each run's latencies (ns): split at the run-id boundaries (one pass when ids are sorted, as pooling writes them)."""
    if n == 1:
        return [lat]
    if ids.size != lat.size:
        return [lat[:0]] * n
    if ids.size and np.all(ids[1:] >= ids[:-1]):
        cuts = np.searchsorted(ids, np.arange(1, n))
        return np.split(lat, cuts)
    return [lat[ids == k] for k in range(n)]


def runs_of(r: Result, arrays: dict[str, np.ndarray], rss_by_run: dict[tuple, int]) -> list[Run]:
    """The runs inside one Result, with per-run figures.

    p50/p99 are each run's own in the Result's percentile method: listed in ``run.pooled_runs`` by the
    pooling, else computed from the samples (split by ``run_ids`` for older pooled files);
    throughput and cold start from ``per_run`` (else the Result's own figure, for one run); peak RSS
    of a pooled Result's run from its single-run file when one was found (``rss_by_run``).
    """
    lat, ids = arrays["latency_ns"], arrays["run_ids"]
    tp, cold = r.metrics.throughput, r.metrics.cold_start
    n = max(len(tp.per_run), len(cold.per_run) if cold else 0, 1)
    method = r.metrics.latency_ms.percentile_method
    listed = r.run.get("pooled_runs") if isinstance(r.run.get("pooled_runs"), list) else []
    runs: list[Run] = []
    per_run_pct = _listed_percentiles(r.run) if n > 1 else None
    if per_run_pct is not None and len(per_run_pct) != n:
        per_run_pct = None
    split = _by_run(lat, ids, n)
    for k in range(n):
        fig: dict[str, float] = {}
        fig["throughput"] = float(tp.per_run[k]) if len(tp.per_run) == n else tp.queries_per_s
        own = split[k]
        if per_run_pct is not None:  # each run's own summary, listed by the pooling
            fig["p50"], fig["p99"] = per_run_pct[k]
        elif own.size:
            if method == "linear":  # both levels in one partition pass: the hot path of a 100-case compare
                fig["p50"], fig["p99"] = (float(v) / 1e6 for v in np.percentile(own, [50, 99]))
            else:
                fig["p50"], fig["p99"] = percentile(own / 1e6, 50, method), percentile(own / 1e6, 99, method)
        elif n == 1:
            fig["p50"], fig["p99"] = r.metrics.latency_ms.p50, r.metrics.latency_ms.p99
        if cold is not None:
            c = _cold_ms(cold.per_run[k]) if len(cold.per_run) == n else (
                _cold_ms({"session_create_ms": cold.session_create_ms, "first_inference_ms": cold.first_inference_ms})
                if n == 1 else None)
            if c is not None:
                fig["cold_start"] = c
        res = r.metrics.resources
        if n == 1 and res is not None and res.rss_peak_bytes:
            fig["rss_peak"] = float(res.rss_peak_bytes)
        elif k < len(listed) and isinstance(listed[k], dict):
            rss = rss_by_run.get((r.case_key, listed[k].get("created_at"), listed[k].get("pid")))
            if rss:
                fig["rss_peak"] = float(rss)
        gen = r.metrics.generation
        if n == 1 and gen:  # a token-stream load step (one run per Result)
            for name, value in (("ttft_p50", (gen.get("ttft_ms") or {}).get("p50")),
                                ("itl_p50", (gen.get("itl_ms") or {}).get("p50")),
                                ("output_tokens_per_s", gen.get("output_tokens_per_s"))):
                if value is not None:
                    fig[name] = float(value)
        wins = [(w.queries_per_s, w.p50_ms, w.p99_ms) for w in r.metrics.windows if w.run == k or n == 1]
        runs.append(Run(fig, wins))
    return runs


def _pooled_ids(results: Sequence[Result]) -> set[tuple]:
    """``(case_key, created_at, pid)`` of every single run a pooled Result lists in ``run.pooled_runs``."""
    out: set[tuple] = set()
    for r in results:
        for x in r.run.get("pooled_runs") or []:
            if isinstance(x, dict):
                out.add((r.case_key, x.get("created_at"), x.get("pid")))
    return out


def load_side(paths: Sequence[str | Path], what: str) -> tuple[list[tuple[Path, Result, dict]], list[str]]:
    """Every Result under ``paths`` with its sample arrays, and notes on files skipped.

    Raises:
        UsageError: a path is missing, a file named directly is not a Result, or nothing was found.
    """
    given = {Path(p) for p in paths}
    loaded: list[tuple[Path, Result, dict]] = []
    notes: list[str] = []
    files = [f for f in result_files(paths) if f in given or is_result_file(f)]  # a folder's other JSON: not read
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 1)) as pool:  # zlib and json release the GIL
        futures = [pool.submit(load_fast, f) for f in files]
    for f, fut in zip(files, futures):
        try:
            r, arrays = fut.result()
        except UsageError as e:
            if f in given:
                raise
            notes.append(f"skipped {f}: {e}")
            continue
        loaded.append((f, r, arrays))
    if not loaded:
        raise UsageError(f"no inferperf Results found in {what} " + ", ".join(map(str, paths))
                         + ": pass Result files or the folders bench, sweep or load wrote")
    return loaded, notes


def group_cases(loaded: Sequence[tuple[Path, Result, dict]], key_of: Any) -> dict[str, Case]:
    """Cases by ``key_of(result)``: runs pooled elsewhere are left out (their peak RSS kept for the pool)."""
    pooled = _pooled_ids([r for _, r, _ in loaded])
    rss_by_run: dict[tuple, int] = {}
    keep: list[tuple[Path, Result, dict]] = []
    for f, r, arrays in loaded:
        ident = (r.case_key, r.created_at, r.run.get("pid"))
        if "pooled_runs" not in r.run and ident in pooled:
            if r.metrics.resources and r.metrics.resources.rss_peak_bytes:
                rss_by_run[ident] = r.metrics.resources.rss_peak_bytes
            continue
        keep.append((f, r, arrays))
    cases: dict[str, Case] = {}
    for f, r, arrays in keep:
        k = key_of(r)
        case = cases.setdefault(k, Case(k, [], [], []))
        case.results.append(r)
        case.paths.append(f)
        case.runs.extend(runs_of(r, arrays, rss_by_run))
    return cases


def match_cases(base: Sequence[tuple[Path, Result, dict]], cur: Sequence[tuple[Path, Result, dict]],
                mode: MatchMode = "auto") -> tuple[str, list[tuple[Case, Case]], list[Case], list[Case]]:
    """Pair the cases of the two sides.

    ``auto``: by ``case_key``, unless each side holds one case or no model hash appears on both sides,
    then by configuration (:func:`config_key`); when each side holds one configuration they are paired
    whatever differs (the differences are warned about).

    Returns:
        (mode used, matched (baseline, current) pairs, unmatched baseline cases, unmatched current cases).
    """
    by_key = (group_cases(base, lambda r: r.case_key), group_cases(cur, lambda r: r.case_key))
    used = mode
    if mode == "auto":
        shas = ({r.model.sha256 for _, r, _ in base}, {r.model.sha256 for _, r, _ in cur})
        one_each = len(by_key[0]) == 1 and len(by_key[1]) == 1
        used = "config" if one_each or not (shas[0] & shas[1]) else "case_key"
    sides = by_key if used == "case_key" else (group_cases(base, config_key), group_cases(cur, config_key))
    if used == "config" and len(sides[0]) == 1 and len(sides[1]) == 1:
        (b,), (c,) = sides[0].values(), sides[1].values()
        return used, [(b, c)], [], []
    pairs = [(b, sides[1][k]) for k, b in sides[0].items() if k in sides[1]]
    return (used, pairs, [b for k, b in sides[0].items() if k not in sides[1]],
            [c for k, c in sides[1].items() if k not in sides[0]])
