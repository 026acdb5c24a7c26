"""The tuning search space: axes (flags or YAML), machine-derived defaults, pruning of impossible combinations.

Every axis is optional. An axis given no values is not searched: the base
configuration's value is kept. With no axis given at all, the default space
comes from the machine inventory and the model: intra-op threads from the
sweep's thread ladder, concurrency 1..effective CPUs in powers of two,
session mode (shared / per-stream), and every installed CPU backend.

Parameters keep the field's names (ONNX Runtime's ``SessionOptions`` names,
Triton's ``max_batch_size`` / ``max_queue_delay_us`` / ``instance_count``);
``session_config`` entries are searched as ``session_config:KEY``. Impossible
combinations are pruned before anything is measured (:meth:`TuneSpace.infeasible`):
inter-op threads outside parallel execution mode, a session mode with one
stream, and oversubscription (streams x intra-op threads, or instances x threads
for a served model, above ``max_oversubscription`` x the effective CPUs).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from ..config import BenchConfig, canonical_backend, load_mapping
from ..errors import UsageError, first_error
from ..results.model import SystemInfo
from ..sweep.space import RuntimeAxes

#: where the space format is documented (named in every space error)
SPACE_DOC = "docs/tune.md"

#: the serving knobs (searched only with --serve)
SERVE_AXES = ("max_batch_size", "max_queue_delay_us", "instance_count")

#: ONNX Runtime session settings other backends ignore (OpenVINO notes them as ignored; see backends/openvino_backend.py)
ORT_ONLY = ("execution_mode", "inter_op_num_threads", "graph_optimization_level", "enable_mem_pattern",
            "enable_cpu_mem_arena")

#: the order parameters are suggested in (a parameter conditional on another comes after it)
ORDER = ("precision", "backend", "intra_op_num_threads", "execution_mode", "inter_op_num_threads", "graph_optimization_level",
         "enable_mem_pattern", "enable_cpu_mem_arena", "batch_size", "concurrency", "session_mode", "allocator",
         *SERVE_AXES)  # fmt: skip


class TuneSpace(RuntimeAxes):
    """Values per axis; ``None`` (or absent) = not searched.

    Attributes:
        precision: model variants from an ``inferperf optimize`` folder (``fp32``, ``fp16``, ``int8-dynamic``, ...;
            ``--variants DIR``): only those that passed their accuracy gate.
        backend: runtimes (``onnxruntime``, ``openvino``, ...).
        intra_op_num_threads, inter_op_num_threads: thread counts (ints >= 1).
        execution_mode: ``sequential`` / ``parallel``.
        graph_optimization_level: ``disable`` / ``basic`` / ``extended`` / ``all``.
        enable_mem_pattern, enable_cpu_mem_arena: booleans.
        batch_size: rows per query (the objective is then samples/s).
        concurrency: closed-loop streams (in-process, or HTTP clients with ``--serve``).
        session_mode: ``shared`` / ``per-stream`` (in-process, concurrency > 1).
        allocator: ``system`` / ``jemalloc`` / ``tcmalloc`` (LD_PRELOAD in the trial's worker; in-process trials).
        session_config: ``session.*`` entry -> values (``add_session_config_entry``).
        max_batch_size, max_queue_delay_us, instance_count: the server's batching and instances (``--serve``).
        max_oversubscription: the most streams x threads per effective CPU a configuration may ask for.
    """

    precision: list[str] | None = None
    graph_optimization_level: list[str] | None = None
    enable_mem_pattern: list[bool] | None = None
    enable_cpu_mem_arena: list[bool] | None = None
    session_config: dict[str, list[str]] = Field(default_factory=dict)
    max_batch_size: list[int] | None = None
    max_queue_delay_us: list[int] | None = None
    instance_count: list[int] | None = None
    max_oversubscription: float = Field(default=1.0, gt=0)

    @field_validator("backend")
    @classmethod
    def _canonical(cls, v: list[str] | None) -> list[str] | None:
        return list(dict.fromkeys(canonical_backend(b) for b in v)) if v else v

    @field_validator("intra_op_num_threads", "inter_op_num_threads", "batch_size", "concurrency", "instance_count")
    @classmethod
    def _positive(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and (not v or min(v) < 1):
            raise ValueError("give one or more integers >= 1")
        return sorted(set(v)) if v else v

    @field_validator("max_batch_size", "max_queue_delay_us")
    @classmethod
    def _non_negative(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and (not v or min(v) < 0):
            raise ValueError("give one or more integers >= 0")
        return sorted(set(v)) if v else v

    def axes(self) -> dict[str, list[Any]]:
        """The searched axes in suggestion order: name -> values (``session_config:KEY`` for config entries)."""
        out: dict[str, list[Any]] = {}
        for name in ORDER:
            values = getattr(self, name)
            if values:
                out[name] = list(values)
        for key, values in self.session_config.items():
            out[f"session_config:{key}"] = list(values)
        return out

    def size(self) -> int:
        """Number of points in the full grid (before pruning)."""
        n = 1
        for values in self.axes().values():
            n *= len(values)
        return n

    def grid(self, info: SystemInfo, base_concurrency: int = 1) -> list[dict[str, Any]]:
        """Every feasible point, conditional parameters dropped where they cannot matter (duplicates merged)."""
        axes = self.axes()
        seen: dict[str, dict[str, Any]] = {}
        for combo in itertools.product(*axes.values()):
            params = self.normalize(dict(zip(axes, combo)), base_concurrency)
            if self.infeasible(params, info) is None:
                seen.setdefault(repr(sorted(params.items())), params)
        return list(seen.values())

    @staticmethod
    def normalize(params: dict[str, Any], base_concurrency: int = 1) -> dict[str, Any]:
        """Drop parameters that cannot change the configuration: ONNX Runtime-only settings on another backend,
        inter-op threads outside parallel mode,
        session mode with one stream (``base_concurrency`` when concurrency is not searched), queue delay
        without batching."""
        p = dict(params)
        if p.get("backend", "onnxruntime") != "onnxruntime":  # OpenVINO and torch take the thread count only
            for name in ORT_ONLY:
                p.pop(name, None)
            for name in [k for k in p if k.startswith("session_config:")]:
                p.pop(name)
        if p.get("execution_mode", "sequential") != "parallel":
            p.pop("inter_op_num_threads", None)
        if p.get("concurrency", base_concurrency) <= 1:
            p.pop("session_mode", None)
        if "max_batch_size" in p and p["max_batch_size"] <= 1:
            p.pop("max_queue_delay_us", None)
        return p

    def infeasible(self, params: dict[str, Any], info: SystemInfo) -> str | None:
        """Why a configuration is pruned before it is measured, or None when it may run.

        Oversubscription: (streams or server instances) x intra-op threads above
        ``max_oversubscription`` x ``info.effective_cpus``.
        """
        threads = params.get("intra_op_num_threads") or 0
        if not threads:
            return None
        # a shared session still runs one call per stream at once; a server runs one batch per instance
        parallel = params["instance_count"] if "instance_count" in params else params.get("concurrency", 1)
        asked = parallel * threads
        limit = self.max_oversubscription * info.effective_cpus
        if asked > limit:
            return (f"oversubscribed: {parallel} x {threads} threads = {asked} > {self.max_oversubscription:g} x"
                    f" {info.effective_cpus} effective CPUs (raise --max-oversubscription to measure it)")
        return None


def default_space(info: SystemInfo, installed: list[str], serve: bool = False) -> TuneSpace:
    """The space searched when no axis is given: threads x concurrency x session mode (x backends installed);
    with ``serve``, threads x instances x max_batch_size {0, 4, 8} x max_queue_delay_us {0, 2000} x concurrency.

    Args:
        info: the machine inventory (effective CPUs, physical cores, SMT, quota).
        installed: CPU backends available here (``onnxruntime`` first).
    """
    from ..sweep.space import thread_ladder

    threads = [n for n, marks in thread_ladder(info) if "SMT" not in marks]
    conc = sorted({1 << k for k in range(8) if (1 << k) <= info.effective_cpus} | {info.effective_cpus})
    if serve:
        return TuneSpace(intra_op_num_threads=threads, instance_count=conc, max_batch_size=[0, 4, 8],
                         max_queue_delay_us=[0, 2000], concurrency=sorted({1, 2 * info.effective_cpus}))
    backends = [b for b in installed if b in ("onnxruntime", "openvino")]
    return TuneSpace(backend=backends if len(backends) > 1 else None, intra_op_num_threads=threads,
                     concurrency=conc, session_mode=["shared", "per-stream"] if max(conc) > 1 else None)


def load_space(path: Path) -> TuneSpace:
    """Read a YAML/JSON space file (the keys of :class:`TuneSpace`; format in ``docs/tune.md``).

    Raises:
        UsageError: missing file, unparsable, unknown axis or a bad value (one line naming it).
    """
    source = f"--space '{path}'"
    doc = load_mapping(path, source, f"a mapping of axes, e.g. intra_op_num_threads: [1, 2] (format: {SPACE_DOC})")
    return validate_space(doc, source)


def validate_space(doc: dict[str, Any], source: str) -> TuneSpace:
    """A TuneSpace from plain data; an unknown axis or a bad value is one UsageError line naming it.

    Raises:
        UsageError: unknown axis (the known ones listed), a value of the wrong type or out of range.
    """
    try:
        return TuneSpace.model_validate(doc)
    except ValidationError as e:
        kind, where, msg, got = first_error(e, indices=False)
        if kind == "extra_forbidden":
            known = ", ".join(k for k in TuneSpace.model_fields)
            raise UsageError(f"{source}: unknown axis '{where}': use one of {known} (format: {SPACE_DOC})") from None
        raise UsageError(f"{source}: {where}: {msg} (got {got!r};"
                         f" format: {SPACE_DOC})") from None


#: the values each choice axis accepts (the backend axis is checked against the registry: :func:`check_values`)
CHOICES = {
    "execution_mode": ["sequential", "parallel"],
    "graph_optimization_level": ["disable", "basic", "extended", "all"],
    "session_mode": ["shared", "per-stream"],
    "allocator": ["system", "jemalloc", "tcmalloc"],
}


def value_error(space: TuneSpace, known_backends: list[str] | None = None) -> str | None:
    """The first value no configuration accepts, as the one line that refuses it (None when all are fine):
    an unknown execution mode, graph level or session mode, an empty session-config entry, and, when
    ``known_backends`` is given, an unknown backend. :class:`~inferperf.tune.run.TuneSpec` refuses with it.
    """
    choices = {**({"backend": known_backends} if known_backends is not None else {}), **CHOICES}
    for axis, allowed in choices.items():
        for v in getattr(space, axis) or []:
            if v not in allowed:
                return f"--{axis.replace('_', '-')} {v!r}: unknown value: choose from {', '.join(allowed)}"
    for key, values in space.session_config.items():
        if not values:
            return f"--session-config {key}: give one or more values, e.g. {key}=0|1"
    return None


def check_values(space: TuneSpace, known_backends: list[str]) -> None:
    """Refuse values no configuration accepts, before any trial runs (:func:`value_error`).

    Raises:
        UsageError: an unknown backend, execution mode, graph level or session mode; an empty config entry.
    """
    why = value_error(space, known_backends)
    if why is not None:
        raise UsageError(why)


def apply(base: BenchConfig, params: dict[str, Any]) -> BenchConfig:
    """``base`` with the in-process parameters of ``params`` set (serving knobs are ignored here).

    Raises:
        UsageError: a combination the config refuses (named).
    """
    doc = base.model_dump(mode="json")
    sess = doc["session"]
    for name in ("intra_op_num_threads", "inter_op_num_threads", "execution_mode", "graph_optimization_level",
                 "enable_mem_pattern", "enable_cpu_mem_arena"):
        if name in params:
            sess[name] = params[name]
    for name, value in params.items():
        if name.startswith("session_config:"):
            sess["session_config"] = {**sess.get("session_config", {}), name.split(":", 1)[1]: str(value)}
    if "backend" in params:
        doc["backend"] = params["backend"]
    if "batch_size" in params:
        doc["workload"]["batch_size"] = params["batch_size"]
    if "concurrency" in params:
        doc["concurrency"] = params["concurrency"]
        if params["concurrency"] > 1 and doc["scenario"] == "single-stream":
            doc["scenario"] = "concurrent"
        if params["concurrency"] <= 1 and doc["scenario"] == "concurrent":
            doc["scenario"] = "single-stream"
    if "session_mode" in params:
        doc["session_mode"] = params["session_mode"]
    if "allocator" in params:
        doc["allocator"] = params["allocator"]
    try:
        return BenchConfig.model_validate(doc)
    except ValidationError as e:
        raise UsageError(f"tune configuration {params}: {first_error(e)[2]}") from None


def load_variants(folder: Path) -> dict[str, str]:
    """The precision variants of an ``inferperf optimize -o DIR`` folder that passed their accuracy gate:
    variant name -> model file (``fp32``, the reference, always included when its file exists).

    Raises:
        UsageError: no ``optimize-summary.json`` there, or no variant passed.
    """
    import json

    summary = folder / "optimize-summary.json"
    if not summary.is_file():
        raise UsageError(f"--variants '{folder}': no optimize-summary.json there: run inferperf optimize MODEL -o"
                         f" {folder} first (it builds the variants and checks their accuracy)")
    rows = json.loads(summary.read_text()).get("rows", [])
    out = {}
    for r in rows:
        path = r.get("path")
        if not path or not Path(path).is_file():
            continue
        if r.get("variant") == "fp32" or r.get("accuracy_passed"):
            out[r["variant"]] = path
    if not out:
        raise UsageError(f"--variants '{folder}': no variant there passed its accuracy gate (and no fp32 file)")
    return out


def serve_params(params: dict[str, Any]) -> dict[str, Any]:
    """The serving knobs of ``params`` as ServeOptions fields (``max_batch_size`` > 0 turns dynamic batching on)."""
    out = {k: params[k] for k in SERVE_AXES if k in params}
    if out.get("max_batch_size"):
        out["dynamic_batching"] = True
    return out
