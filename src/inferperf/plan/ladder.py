"""What the planner reads and measures: Results from ``--from`` (:func:`read_results`) and the ``--measure``
ladder (:func:`ladder_configs`, :func:`measure`), each run in a fresh worker process.

The candidates and the server's own time are built from them by :mod:`inferperf.analysis.candidates`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import BenchConfig
from ..errors import UsageError
from ..results.io import load, result_files
from ..results.model import Result


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


__all__ = ["ladder_configs", "measure", "read_results", "rows"]
