"""The first steps of one run: resolve the model, create the session(s), build the input pool.

:func:`resolve_model` reads the model's facts (ONNX file, ``zoo:NAME``, a torch
``module:function``), times the runtime's first import, and swaps in a verified
batchable copy of a fixed-batch model. :func:`create_sessions` creates one session
per stream (``per-stream``) or one shared session, timing each load (cold start).
:func:`build_inputs` builds the seeded input pool for the session's inputs.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ..backends.base import Backend, create_backend
from ..clock import Clock
from ..config import BenchConfig
from ..results.model import SystemInfo, TensorInfo
from ..workload.data import Workload, build_workload
from ..workload.signature import ModelFacts, check_model_file, inspect_model
from ..zoo import entries as zoo_entries
from ..zoo import resolve as zoo_resolve
from ..zoo import zoo_name
from .facts import static_shapes, torch_facts

#: backend name -> the runtime module whose first import a fresh process pays (``runtime_import_ms``).
_RUNTIME_MODULES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "torch": "torch"}


@dataclass
class ModelPlan:
    """The model as it will be measured.

    Attributes:
        facts: file facts of the model loaded (the batchable copy when one was made).
        zoo_name: ``NAME`` of ``zoo:NAME``, else None.
        batching: how a fixed-batch model was made batchable (recorded in the workload), else None.
        source_sha256: the sha256 of the file the batchable copy was made from, else None.
        phases: cold-start phases so far (``runtime_import_ms``), ms.
        notes: warnings for the Result.
    """

    facts: ModelFacts
    zoo_name: str | None
    batching: Any = None
    source_sha256: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class Sessions:
    """The created session(s): one per stream (``per-stream``) or one shared.

    Attributes:
        backends: the loaded backends (``backends[0]`` is the one whose settings are recorded).
        load_ns: each session's creation time (ns).
        streams: closed-loop streams of the scenario (1 unless concurrent).
        rss_delta_bytes: RSS the sessions added while they were created.
        name, inputs, outputs, requested: the backend's name, the model's signature as the session
            sees it and the settings as asked for, read once loaded (still known after :meth:`close`).
    """

    backends: list[Backend]
    load_ns: list[int]
    streams: int
    rss_delta_bytes: int
    name: str = ""
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    requested: dict[str, Any] = field(default_factory=dict)

    def runners(self) -> list[Any]:
        """One runtime callable per stream (the shared session's, repeated, in ``shared`` mode)."""
        runners = [b.runner() for b in self.backends]
        return runners * self.streams if len(runners) == 1 else runners

    def close(self) -> None:
        """Close every session."""
        for b in self.backends:
            b.close()


def resolve_model(model: str | Path, cfg: BenchConfig, clock: Clock) -> ModelPlan:
    """Facts of ``model`` for ``cfg.backend``; the runtime's import timed; a fixed batch made batchable if asked.

    Raises:
        ModelError: missing, not ONNX, or a model that cannot be made batchable.
    """
    zname = zoo_name(str(model))
    path = zoo_resolve(str(model))
    if cfg.backend == "null":
        p = check_model_file(path) if Path(path).exists() or zname else None
        facts = inspect_model(p) if p else ModelFacts(path=Path(str(model)), sha256="0" * 64, size_bytes=0)
    elif cfg.backend == "torch" and not str(path).lower().endswith(".onnx"):
        facts = torch_facts(str(path))
    else:
        facts = inspect_model(path)
    plan = ModelPlan(facts=facts, zoo_name=zname)
    if zname and zname in {e.name for e in zoo_entries() if e.kind == "onnx-light"}:
        plan.notes.append(f"zoo:{zname} has constant weights: its outputs ignore its inputs; use it for speed only")
    runtime_module = _RUNTIME_MODULES.get(cfg.backend)
    if runtime_module and runtime_module not in sys.modules:
        t_imp = clock.now_ns()  # a fresh process pays this once; reported apart from session creation
        try:
            importlib.import_module(runtime_module)
        except ImportError:
            pass  # create_backend reports it with the install command
        plan.phases["runtime_import_ms"] = (clock.now_ns() - t_imp) / 1e6
    if cfg.backend not in ("null", "torch"):
        from .batching import make_batchable, needs_batching

        w = cfg.workload
        if needs_batching(facts.path, w.batch_size):
            source = facts
            batched_path, plan.batching = make_batchable(facts.path, facts.sha256, w.batch_size, cfg.backend,
                                                         cfg.session)
            plan.facts = inspect_model(batched_path)
            plan.source_sha256 = source.sha256
            plan.notes.append(
                f"{source.path.name} has a fixed batch of 1; measured a verified batchable copy ({plan.batching})"
            )
    return plan


def create_sessions(cfg: BenchConfig, plan: ModelPlan, system: SystemInfo, clock: Clock,
                    backend_kwargs: dict[str, Any] | None = None) -> Sessions:
    """Create and load the session(s) the scenario needs, timing each load; phases go into ``plan.phases``.

    Raises:
        BackendUnavailable / ModelError / UsageError: as the backend's constructor and ``load`` raise them.
    """
    streams = cfg.concurrency if cfg.scenario == "concurrent" else 1
    kwargs = dict(backend_kwargs or {})
    if cfg.backend == "null":
        kwargs.setdefault("latencies_s", [x / 1e3 for x in cfg.null_latency_ms])
        kwargs.setdefault("clock", clock)
    elif streams > 1:
        kwargs.setdefault("default_threads", max(1, system.effective_cpus // streams))
        kwargs.setdefault("concurrency", streams if cfg.session_mode == "shared" else 1)  # streams per session
    if cfg.backend == "openvino" and not cfg.workload.input_data:
        kwargs.setdefault("static_shapes", static_shapes(plan.facts.path, cfg))
    n_sessions = streams if cfg.session_mode == "per-stream" else 1
    backends = [create_backend(cfg.backend, cfg.session, **kwargs) for _ in range(n_sessions)]
    proc = psutil.Process()
    rss_before = proc.memory_info().rss
    load_ns = []
    for b in backends:
        t0 = clock.now_ns()
        b.load(plan.facts.path)
        load_ns.append(clock.now_ns() - t0)
    plan.phases.update(getattr(backends[0], "load_phases", dict)())
    if n_sessions > 1:
        plan.phases["other_sessions_create_ms_mean"] = sum(load_ns[1:]) / (len(load_ns) - 1) / 1e6
    rss_delta = max(0, proc.memory_info().rss - rss_before)
    b = backends[0]
    return Sessions(backends=backends, load_ns=load_ns, streams=streams, rss_delta_bytes=rss_delta, name=b.name,
                    inputs=b.inputs(), outputs=b.outputs(), requested=b.requested_settings())


def build_inputs(cfg: BenchConfig, sessions_inputs: list[TensorInfo], plan: ModelPlan, system: SystemInfo,
                 streams: int) -> Workload:
    """The seeded input pool for the session's inputs (``input_pool_size`` feeds per stream).

    Raises:
        UsageError: unresolved dims, bad shapes or data, a pool too large for RAM.
    """
    w = cfg.workload
    return build_workload(
        sessions_inputs,
        shapes=w.shapes,
        dims=w.dims,
        batch_size=w.batch_size,
        pool_size=w.input_pool_size * streams,
        seed=w.seed,
        int_ranges=w.int_ranges,
        values=w.values,
        index_ranges=plan.facts.index_ranges,
        input_data=w.input_data,
        memory_bytes=system.memory_bytes,
        max_fraction_of_ram=w.max_pool_fraction_of_ram,
        force=w.force,
    )
