"""The sweep's parameter space: axes from flags or a YAML matrix, expanded into isolated cases.

Expansion is validated and printed before anything runs (``--dry-run``).
Combinations that cannot differ are collapsed with a warning instead of being
measured twice: inter-op threads under sequential execution (ORT uses the
inter-op pool only in parallel mode), and session mode with one stream.
Each case carries marks: ``SMT`` (threads beyond the physical cores),
``over quota`` (beyond the cgroup CPU quota) and ``oversubscribed``
(streams x threads > effective CPUs).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..config import BenchConfig, load_mapping
from ..errors import UsageError, settings_message
from ..results.model import SystemInfo
from ..zoo import with_default_shapes


def thread_ladder(info: SystemInfo, beyond: bool = False) -> list[tuple[int, list[str]]]:
    """Default intra-op thread counts for a thread sweep, with marks.

    Powers of two up to the physical cores (or the CPU quota, rounded up), the
    top itself if it is not a power of two; then, with SMT active and no
    tighter limit, physical x 1.5 and the logical count, both marked ``SMT``.
    A count above a fractional quota is marked ``over quota``. ``beyond`` adds
    2x the effective CPUs (to show where oversubscription starts to hurt).

    Examples (tests/unit/test_sweep_space.py): 8 logical / 4 physical, SMT ->
    [1, 2, 4, 6, 8] with 6 and 8 marked SMT; a 1.5-CPU quota -> [1, 2] with 2
    marked over quota.
    """
    physical = info.physical_cores or info.logical_cores
    allowed = len(info.cpu_affinity) or info.logical_cores
    quota = info.cgroup_cpu_limit
    top = min(physical, allowed)
    if quota is not None:
        top = min(top, math.ceil(quota))
    counts = [1 << k for k in range(0, 16) if (1 << k) <= top]
    if top not in counts:
        counts.append(top)
    marks: dict[int, list[str]] = {n: [] for n in counts}
    smt_limit = min(info.logical_cores, allowed)
    if info.smt_active and quota is None and smt_limit > physical:
        for n in sorted({round(physical * 1.5), smt_limit}):
            if physical < n <= smt_limit:
                marks.setdefault(n, []).append("SMT")
    if beyond:
        marks.setdefault(2 * info.effective_cpus, []).append("oversubscribed")
    for n in marks:
        if quota is not None and n > quota:
            marks[n].append("over quota")
    return sorted(marks.items())


class ModelEntry(BaseModel):
    """One model of a matrix and its own shape/dim sets (each a dict: input -> shape, symbol -> size).

    A bare string (``models: [zoo:ppocr-det]``) is read as ``{path: zoo:ppocr-det}``.
    """

    model_config = ConfigDict(extra="forbid")
    path: str
    shapes: list[dict[str, list[int]]] = Field(default_factory=list)
    dims: list[dict[str, int]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _bare_path(cls, data: Any) -> Any:
        return {"path": data} if isinstance(data, str) else data


class RuntimeAxes(BaseModel):
    """The axes a sweep and a tune both vary, one BenchConfig setting each (values per axis; ``None``: not varied,
    the base config's value). :class:`Axes` and :class:`inferperf.tune.space.TuneSpace` add their own."""

    model_config = ConfigDict(extra="forbid")
    backend: list[str] | None = None
    intra_op_num_threads: list[int] | None = None
    inter_op_num_threads: list[int] | None = None
    execution_mode: list[str] | None = None
    batch_size: list[int] | None = None
    concurrency: list[int] | None = None
    session_mode: list[str] | None = None
    allocator: list[str] | None = None


class Axes(RuntimeAxes):
    """Axis values; ``None`` means "not swept" (the base config's value)."""

    env: list[dict[str, str]] | None = None


class Matrix(BaseModel):
    """A whole sweep: models (with per-model shapes), axes, base settings for every case, repeat and seed."""

    model_config = ConfigDict(extra="forbid")
    models: list[ModelEntry]
    axes: Axes = Field(default_factory=Axes)
    settings: dict[str, Any] = Field(default_factory=dict)
    repeat: int = Field(default=1, ge=1)
    seed: int = 0


@dataclass
class Case:
    """One point of the matrix: the model, its full config, marks and a readable label."""

    model: str
    config: BenchConfig
    marks: list[str] = field(default_factory=list)
    label: str = ""


#: where the matrix format is documented (named in every matrix error)
MATRIX_DOC = "docs/sweep-matrix.md"

#: what each matrix key takes, as a one-line YAML example (used in error messages)
_EXAMPLES: dict[str, str] = {
    "models": "models: [{path: zoo:ppocr-det, shapes: [{x: [1, 3, 224, 224]}]}]",
    "path": "- path: zoo:ppocr-det  (an ONNX file or zoo:NAME)",
    "shapes": "shapes: [{x: [1, 3, 224, 224]}, {x: [1, 3, 640, 640]}]  (one {input: shape} per set)",
    "dims": "dims: [{seq: 64}, {seq: 128}]  (one {symbol: size} per set)",
    "axes": "axes: {intra_op_num_threads: [1, 2], concurrency: [1, 2]}",
    "backend": "backend: [onnxruntime, openvino]",
    "intra_op_num_threads": "intra_op_num_threads: [1, 2, 4]",
    "inter_op_num_threads": "inter_op_num_threads: [1, 2]  (parallel mode only)",
    "execution_mode": "execution_mode: [sequential, parallel]",
    "batch_size": "batch_size: [1, 4, 8]",
    "concurrency": "concurrency: [1, 2]",
    "session_mode": "session_mode: [shared, per-stream]",
    "env": "env: [{OMP_WAIT_POLICY: PASSIVE}, {OMP_WAIT_POLICY: ACTIVE}]",
    "allocator": "allocator: [system, jemalloc, tcmalloc]",
    "settings": "settings: {stop: {min_duration_s: 2, min_iterations: 50}, warmup: {iterations: 5}}",
    "repeat": "repeat: 3  (an integer >= 1)",
    "seed": "seed: 0",
}

_KEYS: dict[str, type[BaseModel]] = {"": Matrix, "models": ModelEntry, "axes": Axes}


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "the top level"


def matrix_error(source: str, err: dict[str, Any]) -> str:
    """One line for the first pydantic error of a matrix: where (``models[0].shapes``), what is wrong, the fix.

    Args:
        source: how to name the matrix (``--matrix 'sweep.yaml'``).
        err: one entry of ``ValidationError.errors()``.
    """
    loc = tuple(p for p in err.get("loc", ()) if not str(p).startswith("function-"))
    where = _where(loc)
    names = [p for p in loc if isinstance(p, str)]
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        parent = names[-2] if len(names) >= 2 else ""
        model = _KEYS.get(parent, Matrix)
        allowed = ", ".join(model.model_fields)
        what = f"unknown key '{names[-1]}'" + (f" in {_where(loc[:-1])}" if len(loc) > 1 else "")
        fix = f"use one of: {allowed}"
        if parent == "" and names[-1] in Axes.model_fields:
            fix = f"put it under axes: ({_EXAMPLES.get(names[-1], '')})"
    elif kind == "missing":
        what = f"{where}: missing"
        fix = f"e.g. {_EXAMPLES.get(names[-1], names[-1] + ': ...')}" if names else ""
    else:
        key = next((n for n in reversed(names) if n in _EXAMPLES), "")
        got = err.get("input")
        shown = repr(got) if not isinstance(got, dict | list) or len(repr(got)) < 60 else type(got).__name__
        what = f"{where}: {err.get('msg', 'invalid')} (got {shown})"
        fix = f"e.g. {_EXAMPLES[key]}" if key else ""
    return f"{source}: {what}" + (f": {fix}" if fix else "") + f" (format: {MATRIX_DOC})"


def load_matrix(path: Path) -> Matrix:
    """Read a YAML (or JSON) matrix file; the format is documented in ``docs/sweep-matrix.md``.

    Raises:
        UsageError: missing file, unparsable YAML, not a mapping, unknown keys or wrong types: one line naming
            the key (``models[0].shapes``) and the fix.
    """
    source = f"--matrix '{path}'"
    doc = load_mapping(path, source, f"a mapping with a models: key, e.g. {_EXAMPLES['models']} (format: {MATRIX_DOC})")
    try:
        return Matrix.model_validate(doc)
    except ValidationError as e:
        errs = e.errors()  # a misspelt key also leaves the right one missing: name the misspelling first
        first = next((x for x in errs if x.get("type") == "extra_forbidden"), errs[0])
        raise UsageError(matrix_error(source, first)) from None


def _label(model: str, cfg: BenchConfig) -> str:
    parts = [model.removeprefix("zoo:").rsplit("/", 1)[-1]]
    w = cfg.workload
    if w.shapes:
        parts.append(",".join(f"{k + ':' if k else ''}{'x'.join(map(str, v))}" for k, v in w.shapes.items()))
    if w.dims:
        parts.append(",".join(f"{k}={v}" for k, v in w.dims.items()))
    if w.batch_size:
        parts.append(f"b{w.batch_size}")
    t = cfg.session.intra_op_num_threads
    parts.append(f"t{t}" if t is not None else "t-default")
    if cfg.session.execution_mode == "parallel":
        parts.append(f"parallel(inter {cfg.session.inter_op_num_threads or 'default'})")
    if cfg.concurrency > 1:
        parts.append(f"c{cfg.concurrency}-{cfg.session_mode}")
    if cfg.backend != "onnxruntime":
        parts.append(cfg.backend)
    if cfg.env:
        parts.append(",".join(f"{k}={v}" for k, v in cfg.env.items()))
    if cfg.allocator != "system":
        parts.append(cfg.allocator)
    return " ".join(parts)


def expand(matrix: Matrix, info: SystemInfo, beyond: bool = False) -> tuple[list[Case], list[str]]:
    """Expand a matrix into cases (validated BenchConfigs), collapsing combinations that cannot differ.

    With no ``intra_op_num_threads`` axis, the :func:`thread_ladder` of ``info`` is swept
    (``beyond`` adds 2x the effective CPUs).

    Returns:
        (cases, warnings). Warnings name each collapse.

    Raises:
        UsageError: an invalid combination or setting (names it).
    """
    a = matrix.axes
    warnings: list[str] = []
    if a.intra_op_num_threads:
        threads: list[int | None] = list(a.intra_op_num_threads)
    else:
        threads = [n for n, _ in thread_ladder(info, beyond)]
        warnings.append(f"no --intra-op-num-threads given: sweeping the default ladder {threads}")
    modes = a.execution_mode or [None]
    inter: list[int | None] = list(a.inter_op_num_threads) if a.inter_op_num_threads else [None]
    if a.inter_op_num_threads and all(m in (None, "sequential") for m in modes):
        warnings.append("inter-op threads only matter in parallel execution mode: the inter-op axis is collapsed")
        inter = [None]
    conc = a.concurrency or [None]
    smodes = a.session_mode or [None]
    cases: list[Case] = []
    seen: set[str] = set()
    collapsed = 0
    for entry in matrix.models:
        shape_sets: list[dict[str, list[int]] | None] = list(entry.shapes) or [None]
        dim_sets: list[dict[str, int] | None] = list(entry.dims) or [None]
        for backend, shapes, dims, batch, t, mode, it, c, sm, env, alloc in itertools.product(
            a.backend or [None], shape_sets, dim_sets, a.batch_size or [None], threads, modes, inter, conc, smodes,
            a.env or [None], a.allocator or [None],
        ):
            doc: dict[str, Any] = _merge(matrix.settings, {})
            if backend:
                doc["backend"] = backend
            sess = doc.setdefault("session", {})
            wl = doc.setdefault("workload", {})
            if shapes:
                wl["shapes"] = shapes
            if dims:
                wl["dims"] = dims
            if batch is not None:
                wl["batch_size"] = batch
            if t is not None:
                sess["intra_op_num_threads"] = t
            if mode:
                sess["execution_mode"] = mode
            if it is not None and mode == "parallel":
                sess["inter_op_num_threads"] = it
            if c is not None:
                doc["concurrency"] = c
            if sm and (c or doc.get("concurrency", 1)) > 1:
                doc["session_mode"] = sm
            if env:
                doc["env"] = env
            if alloc:
                doc["allocator"] = alloc
            doc["repeat"] = 1
            try:
                cfg = with_default_shapes(entry.path, BenchConfig.model_validate(doc))  # zoo defaults, as bench
            except ValidationError as e:  # the settings' own line (a field's path, or the rule's flags)
                raise UsageError(f"sweep case {entry.path}: {settings_message(e)} (matrix settings take bench's"
                                 f" config keys: {MATRIX_DOC})") from None
            ident = entry.path + "|" + cfg.model_dump_json()
            if ident in seen:
                collapsed += 1
                continue
            seen.add(ident)
            cases.append(Case(entry.path, cfg, _marks(cfg, info), _label(entry.path, cfg)))
    if collapsed:
        warnings.append(
            f"{collapsed} combination(s) identical to another (e.g. session mode with 1 stream, inter-op threads in"
            " sequential mode) were collapsed, not measured twice"
        )
    return cases, warnings


def preflight(cases: list[Case]) -> None:
    """Check every case's model, backend and shapes before anything runs (no runtime is loaded).

    Each distinct model is resolved and read with ``onnx`` once; each distinct shape
    setting is resolved against its signature. A sweep with a typo then fails in one
    line with exit 2 instead of recording the same failure for every case.

    Raises:
        UsageError / ModelError: the first problem found, naming the case.
    """
    from ..backends.base import backend_names
    from ..backends.null import NullBackend
    from ..workload.shapes import resolve_shapes
    from ..workload.signature import inspect_model
    from ..zoo import resolve

    known = set(backend_names()) | {"ort", "ov", "pytorch"}
    signatures: dict[str, Any] = {}
    for case in cases:
        cfg = case.config
        if cfg.backend not in known:
            raise UsageError(f"sweep case '{case.label}': unknown backend {cfg.backend!r}: choose from {sorted(known)}")
        if cfg.backend in ("torch", "pytorch", "null") or not case.model.lower().endswith((".onnx",)) and not case.model.startswith("zoo:"):
            continue
        if case.model not in signatures:
            path = resolve(case.model)
            inspect_model(path)  # missing, not ONNX, truncated: ModelError with the fix
            sig = NullBackend(cfg.session)
            sig.load(path)
            signatures[case.model] = sig.inputs()
        w = cfg.workload
        try:
            resolve_shapes(signatures[case.model], w.shapes, w.dims, w.batch_size)
        except UsageError as e:
            raise UsageError(f"sweep case '{case.label}': {e}") from None


def _marks(cfg: BenchConfig, info: SystemInfo) -> list[str]:
    t = cfg.session.intra_op_num_threads
    threads = t if t else max(1, info.effective_cpus // cfg.concurrency)
    marks = []
    physical = info.physical_cores or info.logical_cores
    if info.smt_active and threads > physical:
        marks.append("SMT")
    if info.cgroup_cpu_limit is not None and threads > info.cgroup_cpu_limit:
        marks.append("over quota")
    if cfg.concurrency * threads > info.effective_cpus:
        marks.append("oversubscribed")
    return marks


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = {k: (_merge(v, {}) if isinstance(v, dict) else v) for k, v in base.items()}
    for k, v in over.items():
        out[k] = _merge(out.get(k, {}), v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
