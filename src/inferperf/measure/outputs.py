"""Outputs of one backend on a few feeds, in a fresh process, for output agreement between runtimes.

``python -m inferperf.measure.outputs JOB.json OUT.npz`` loads the backend,
builds the seeded input pool from the case's workload settings (or reads the
reference's feeds, so every runtime sees the very same arrays), runs
``backend.fetch`` on each feed (never timed) and writes inputs, outputs and a
JSON header to ``OUT.npz``; errors go back as the measure worker's do
(:mod:`inferperf.measure.jobs`), so the parent raises the same class with the same line.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..config import BenchConfig
from ..errors import UsageError
from ..fsutil import atomic_open
from .jobs import run_job, serve_job


def fetch_outputs(model: str, cfg: BenchConfig, n_feeds: int,
                  feeds: list[dict[str, np.ndarray]] | None = None) -> dict[str, Any]:
    """Run ``n_feeds`` feeds through ``cfg.backend`` in this process.

    Args:
        model: path, ``zoo:NAME`` or ``module:function`` (torch).
        cfg: the case (backend, session, workload: shapes, dims, seed, ranges).
        n_feeds: how many feeds of the seeded pool to run (ignored when ``feeds`` is given).
        feeds: the exact feeds to run (the reference runtime's), input name -> array.

    Returns:
        ``{"feeds": [...], "outputs": [[array, ...], ...], "int_ranges": {...}, "shapes": {...}}``.

    Raises:
        UsageError / ModelError / BackendUnavailable: as a measured run would.
    """
    from ..backends.base import create_backend
    from ..workload.data import build_workload
    from ..workload.signature import inspect_model
    from ..zoo import resolve as zoo_resolve

    path = zoo_resolve(str(model))
    index_ranges: dict[str, tuple[int, int]] = {}
    if str(path).lower().endswith(".onnx"):
        index_ranges = inspect_model(path).index_ranges
    backend = create_backend(cfg.backend, cfg.session)
    backend.load(path)
    try:
        if feeds is None:
            w = cfg.workload
            wl = build_workload(
                backend.inputs(), shapes=w.shapes, dims=w.dims, batch_size=w.batch_size,
                pool_size=max(n_feeds, 1), seed=w.seed, int_ranges=w.int_ranges, values=w.values,
                index_ranges=index_ranges, input_data=w.input_data, force=w.force,
            )
            feeds = wl.feeds[:n_feeds]
            int_ranges = {k: list(v) for k, v in wl.int_ranges.items()}
            shapes = wl.shapes
        else:
            names = [i.name for i in backend.inputs()]
            if sorted(names) != sorted(feeds[0]):
                raise UsageError(
                    f"{cfg.backend} sees inputs {names} but the reference runtime's are {sorted(feeds[0])}:"
                    " compare runtimes on the same model (export it with the same input names)"
                )
            int_ranges, shapes = {}, {k: list(v.shape) for k, v in feeds[0].items()}
        fetch = getattr(backend, "fetch", None)
        if fetch is None:
            raise UsageError(f"backend {cfg.backend!r} cannot return outputs: leave it out of the comparison")
        outputs = [fetch(f) for f in feeds]
    finally:
        backend.close()
    return {"feeds": feeds, "outputs": outputs, "int_ranges": int_ranges, "shapes": shapes}


def outputs_in_worker(model: str, cfg: BenchConfig, n_feeds: int, feeds_from: Path | None = None,
                      timeout_s: float = 600.0, keep_in: Path | None = None) -> tuple[dict[str, Any], Path | None]:
    """:func:`fetch_outputs` in a fresh process; returns its result and, with ``keep_in``, the ``.npz`` it wrote.

    Args:
        model, cfg, n_feeds: as :func:`fetch_outputs`.
        feeds_from: an ``.npz`` another runtime's call kept: run its very feeds.
        timeout_s: seconds before the worker is killed.
        keep_in: a folder (the caller's, which the caller removes) to keep the ``.npz`` in, for
            ``feeds_from`` of later calls; without it nothing is left on disk.

    Raises:
        the worker's own error class with its one-line message (traceback chained, see
        :mod:`inferperf.measure.jobs`); MeasurementError on a crash or timeout.
    """
    job = {"model": str(model), "config": cfg.model_dump(mode="json"), "n_feeds": n_feeds,
           "feeds_from": str(feeds_from) if feeds_from else None}
    env = {**os.environ, **cfg.env, "INFERPERF_WORKER": "1"}
    with run_job("inferperf.measure.outputs", job, "out.npz", what=f"{cfg.backend}: computing outputs",
                 timeout_s=timeout_s, env=env) as out:
        doc = read_npz(out)
        kept = None
        if keep_in is not None:
            kept = Path(keep_in) / f"outputs-{cfg.backend}.npz"
            shutil.move(str(out), kept)
    return doc, kept


def write_npz(path: Path, doc: dict[str, Any]) -> None:
    """Write feeds and outputs as ``in/I/NAME`` and ``out/I/K`` arrays plus a ``header`` JSON string."""
    arrays: dict[str, np.ndarray] = {}
    for i, feed in enumerate(doc["feeds"]):
        for name, arr in feed.items():
            arrays[f"in/{i}/{name}"] = np.asarray(arr)
    for i, outs in enumerate(doc["outputs"]):
        for k, arr in enumerate(outs):
            arrays[f"out/{i}/{k}"] = np.asarray(arr)
    header = {"n": len(doc["feeds"]), "names": list(doc["feeds"][0]) if doc["feeds"] else [],
              "n_out": [len(o) for o in doc["outputs"]], "int_ranges": doc["int_ranges"], "shapes": doc["shapes"]}
    arrays["header"] = np.array(json.dumps(header))
    with atomic_open(path, "wb") as f:
        np.savez(f, **arrays)


def read_npz(path: Path) -> dict[str, Any]:
    """Read what :func:`write_npz` wrote."""
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(str(z["header"]))
        feeds = [{n: z[f"in/{i}/{n}"] for n in header["names"]} for i in range(header["n"])]
        outputs = [[z[f"out/{i}/{k}"] for k in range(header["n_out"][i])] for i in range(header["n"])]
    return {"feeds": feeds, "outputs": outputs, "int_ranges": header["int_ranges"], "shapes": header["shapes"]}


def _fetch_job(job: dict[str, Any], out: Path) -> None:
    cfg = BenchConfig.model_validate(job["config"])
    feeds = read_npz(Path(job["feeds_from"]))["feeds"] if job.get("feeds_from") else None
    write_npz(out, fetch_outputs(job["model"], cfg, int(job["n_feeds"]), feeds))


def main(argv: list[str]) -> int:
    """Worker entry: run one outputs job; returns the exit code."""
    return serve_job(argv, _fetch_job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
