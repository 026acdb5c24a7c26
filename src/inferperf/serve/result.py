"""The server-side Result (kind ``serve``) written when ``inferperf serve --output`` stops.

Figures are the server's own over its serving window (start to stop): the
request duration (the route receiving the request to the answer handed to the transport) as ``metrics.latency_ms``,
answered requests per second as throughput, and ``metrics.server`` with the
queue, compute, decode and encode distributions and the batch-size histogram
(see docs/results-schema.md, "Server block"), so ``report`` can set them beside
client-side figures of the same run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..config import BenchConfig
from ..measure.allocator import loaded_allocator
from ..results.build import new_result
from ..results.model import (CaseConfig, ErrorCounts, LatencySummary, Metrics, ModelInfo, Result, Samples,
                             SessionConfig, TensorInfo, Throughput, Validity, WarmupConfig)  # fmt: skip
from ..workload.signature import file_sha256
from ..zoo import resolve as zoo_resolve
from ..zoo import zoo_name
from .app import ServeApp


def _model_info(model_arg: Any, served: Any) -> ModelInfo:
    md = served.metadata
    path = Path(zoo_resolve(str(model_arg))) if isinstance(model_arg, str) else Path(str(model_arg))
    exists = path.is_file()

    def tensors(ts: Any) -> list[TensorInfo]:
        return [TensorInfo(name=t.name, dtype=t.datatype.lower(), shape=list(t.shape)) for t in ts]

    return ModelInfo(
        path=str(path),
        sha256=file_sha256(path) if exists else "",
        size_bytes=path.stat().st_size if exists else 0,
        inputs=tensors(md.inputs),
        outputs=tensors(md.outputs),
        zoo_name=zoo_name(str(model_arg)) if isinstance(model_arg, str) else None,
    )


def serve_result(app: ServeApp, model_arg: Any, cfg: BenchConfig, command: list[str] | None = None) -> Result:
    """Build the kind-``serve`` Result of a server that has stopped (or is running: figures so far).

    Args:
        app: the served app (its one model and its metrics).
        model_arg: the model argument as given (path or ``zoo:NAME``).
        cfg: the BenchConfig the model was loaded with.
        command: argv to record.
    """
    served = next(iter(app.models.values()))
    window = app.metrics.window_summary()
    duration_s = window["window_s"]
    request_ms = window.get("request_ms")
    stats = served.stats()
    ok = stats["inference_stats"]["success"]["count"]
    fail = stats["inference_stats"]["fail"]["count"]
    latency = LatencySummary(**request_ms) if request_ms else LatencySummary.empty()
    opts = served.options.model_dump(mode="json")
    case = CaseConfig(
        backend=cfg.backend,
        session=SessionConfig(
            requested=cfg.session.model_dump(mode="json"), effective=dict(getattr(served, "effective", {}) or {})
        ),
        workload={
            "shapes": {t.name: list(t.shape) for t in served.metadata.inputs},
            "dtypes": {t.name: t.datatype.lower() for t in served.metadata.inputs},
            "batch_size": max(1, served.max_batch_size),
            "input_pool_size": 0,
            "data_source": "http-clients",
            "seed": cfg.workload.seed,
        },
        warmup=WarmupConfig(iterations=cfg.warmup.iterations if getattr(served, "warmup_feeds", None) else 0,
                            duration_s=cfg.warmup.duration_s),
        stop={"min_iterations": 0, "min_duration_s": 0.0, "max_duration_s": max(duration_s, 1e-9)},
        allocator=cfg.allocator,
    )
    info = _model_info(model_arg, served)
    key_doc = {"kind": "serve", "backend": cfg.backend, "session": case.session.requested, "serve": opts,
               "shapes": case.workload.shapes}  # fmt: skip
    if cfg.allocator != "system":
        key_doc["allocator"] = cfg.allocator
    notes = list(getattr(served, "notes", []) or [])
    sampled = {k: n for k, n in window["sampling"]["kept"].items()
               if window.get(f"{k}_ms") and window[f"{k}_ms"]["count"] > n}
    if sampled:
        sp = window["sampling"]
        notes.append(f"server percentiles of {', '.join(sampled)} come from a uniform sample of {sp['capacity']}"
                     f" durations each over the whole window ({sp['method']}, seed {sp['seed']}); their count,"
                     " mean, min and max are exact")
    server_block = {**window, "max_batch_size": served.max_batch_size, "options": opts,
                    "inference_count": stats["inference_count"], "execution_count": stats["execution_count"]}  # fmt: skip
    return new_result(
        kind="serve",
        model_sha256=info.sha256,
        key_doc=key_doc,
        command=command,
        run={"pid": os.getpid(), "model_name": served.name, "allocator": loaded_allocator()},
        model=info,
        config=case,
        metrics=Metrics(
            latency_ms=latency,
            throughput=Throughput(
                queries_per_s=ok / duration_s if duration_s > 0 else 0.0,
                samples_per_s=stats["inference_count"] / duration_s if duration_s > 0 else 0.0,
                duration_s=duration_s,
            ),
            errors=ErrorCounts(count=fail, by_kind={"model_failed": fail} if fail else {}),
            server=server_block,
            energy=app.metrics.energy_summary(ok),
        ),
        samples=Samples(),
        validity=Validity(
            valid=latency.count > 0, reasons=[] if latency.count else ["the server answered no requests"]
        ),
        notes=notes,
    )
