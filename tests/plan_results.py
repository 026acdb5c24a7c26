"""Synthetic measured Results for the planner's tests: one real bench Result (null backend, seeded MLP) copied
with other batch sizes, thread and instance counts and scripted latency samples."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from inferperf.results.io import load, save
from inferperf.results.model import Result
from tests.models import seeded_mlp_onnx


def base_result(folder: Path) -> Result:
    """A real bench Result of a seeded MLP (null backend: no model runs), its backend set to onnxruntime."""
    model = seeded_mlp_onnx(folder / "mlp.onnx")
    out = folder / "base.json"
    subprocess.run([sys.executable, "-m", "inferperf", "bench", str(model), "--backend", "null", "--null-latency-ms",
                    "1", "--iterations", "20", "--duration-s", "0.1", "--warmup", "1", "-o", str(out)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    r = load(out)
    out.unlink()
    return r.model_copy(update={"config": r.config.model_copy(update={"backend": "onnxruntime"})}, deep=True)


def measured(base: Result, batch: int, threads: int, instances: int, mean_ms: float, n: int = 400,
             seed: int = 0, **config: object) -> Result:
    """``base`` as a run at ``batch`` rows with ``instances`` per-stream sessions of ``threads`` threads, its
    latency samples uniform in ``mean_ms`` +- 10 %."""
    c = base.config
    shapes = {k: [batch, *v[1:]] for k, v in c.workload.shapes.items()}  # as bench records them: the batch leads
    upd = {"workload": c.workload.model_copy(update={"batch_size": batch, "shapes": shapes}), "concurrency": instances,
           "scenario": "concurrent" if instances > 1 else "single-stream",
           "session_mode": "per-stream" if instances > 1 else "shared",
           "session": c.session.model_copy(update={"requested": {**c.session.requested, "intra_op_num_threads": threads},
                                                   "effective": {**c.session.effective, "intra_op_num_threads": threads}}),
           **config}  # fmt: skip
    lat = np.random.default_rng(seed).uniform(0.9, 1.1, n) * mean_ms * 1e6
    r = base.model_copy(update={"config": c.model_copy(update=upd)}, deep=True)
    r.samples.latency_ns = np.round(lat).astype(np.int64).tolist()
    r.samples.start_offsets_ns = []
    r.samples.stream_ids = []
    r.samples.run_ids = []
    return r


def write_ladder(base: Result, folder: Path) -> Path:
    """A folder of Results: 1 thread x 1 instance at batch 1 (1 ms) and 4 (1.6 ms)."""
    folder.mkdir(parents=True, exist_ok=True)
    for b, ms in ((1, 1.0), (4, 1.6)):
        save(measured(base, b, 1, 1, ms, seed=b), folder / f"b{b}.json")
    return folder
