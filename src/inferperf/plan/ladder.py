"""What the planner reads and measures: Results from ``--from`` (:func:`read_results`) and the ``--measure``
ladder (:func:`ladder_configs`, :func:`measure`), each run in a fresh worker process.

The candidates and the server's own time are built from them by :mod:`inferperf.analysis.candidates`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import BenchConfig
from ..errors import UsageError
from ..results.io import is_result_file, load, result_files
from ..results.model import Result


def read_results(paths: Iterable[str | Path], skipped: list[str] | None = None) -> list[tuple[Path, Result]]:
    """Every Result under ``paths`` (files or folders), skipping JSON that is not a Result (named in ``skipped``).

    Raises:
        UsageError: a path that does not exist, or no Result found at all.
    """
    out: list[tuple[Path, Result]] = []
    for f in result_files(paths):
        if not is_result_file(f):  # the one rule (results.io); a file that says it is one and fails to load, too
            if skipped is not None:
                skipped.append(str(f))
            continue
        try:
            out.append((f, load(f)))
        except UsageError:
            if skipped is not None:
                skipped.append(str(f))
    if not out:
        raise UsageError(f"no inferperf Result under {', '.join(map(str, paths))}: pass a folder of bench/sweep "
                         "Results, or measure with --measure")
    return out


def rows(shapes: dict[str, list[int]], batch: int) -> dict[str, list[int]]:
    """``shapes`` (``--shape`` values: full shapes, the leading dim the rows) with the leading dim set to ``batch``,
    so a ``--shape x:1x3x640x640`` measures every size of a ladder (and a served replica takes one row)."""
    return {k: [batch, *v[1:]] if v else v for k, v in shapes.items()}


#: samples the rounds of one ladder case pool at least (a p99 needs 100): each run takes its share
MIN_POOLED_SAMPLES = 100
#: a ladder run stops by its rule (iterations and duration both met); this cap only guards a hung worker (s)
LADDER_CAP_S = 600.0


def ladder_configs(batch_sizes: list[int], instances: list[int], cpus: int, duration_s: float,
                   base: BenchConfig | None = None, pin: list[int] | None = None, rounds: int = 1) -> list[BenchConfig]:
    """The ``--measure`` ladder: for each instance count ``I`` (threads ``cpus // I``, at least 1) and batch
    size, one in-process run with ``I`` instances side by side (per-stream sessions), ``duration_s`` long.
    ``pin``: the CPU ids every run is pinned to (the replica's own CPUs: instances measured side by side on more
    CPUs than the replica will have would predict capacity it does not have); None leaves the runs unpinned.

    Each run needs ``ceil(MIN_POOLED_SAMPLES / rounds)`` calls and ``duration_s``, whichever takes longer (the
    ``rounds`` runs of a case pool at least :data:`MIN_POOLED_SAMPLES`), and gets the time that takes: the cap
    (:data:`LADDER_CAP_S`) only guards a hung worker. A 9 s cap had stopped slow batches short of their count
    (INVALID, a truncated sample).

    Raises:
        UsageError: an empty ladder, a size / count < 1, or rounds < 1.
    """
    if not batch_sizes or not instances or min(batch_sizes) < 1 or min(instances) < 1:
        raise UsageError("--measure needs batch sizes >= 1 and instance counts >= 1 (e.g. --batch-sizes 1,2,4,8)")
    if rounds < 1:
        raise UsageError(f"--measure-rounds {rounds}: must be >= 1 (3 shows the spread of a noisy machine)")
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise UsageError(f"--measure-duration-s {duration_s!r}: must be a positive number of seconds (e.g. 3)")
    base = base or BenchConfig()
    batch_sizes, instances = sorted(set(batch_sizes)), sorted(set(instances))  # 1,1 would measure one file twice
    calls = max(1, math.ceil(MIN_POOLED_SAMPLES / rounds))
    out = []
    for inst in instances:
        threads = max(1, cpus // inst)
        for b in batch_sizes:
            upd = {"placement": base.placement.model_copy(update={"cpus": list(pin)}) if pin else base.placement,
                   "concurrency": inst, "scenario": "concurrent" if inst > 1 else "single-stream",
                   "session_mode": "per-stream" if inst > 1 else "shared", "repeat": 1,
                   "session": base.session.model_copy(update={"intra_op_num_threads": threads}),
                   "workload": base.workload.model_copy(update={"batch_size": b, "shapes": rows(base.workload.shapes, b)}),
                   "stop": base.stop.model_copy(update={"min_iterations": calls, "min_duration_s": duration_s,
                                                        "max_duration_s": max(LADDER_CAP_S, duration_s * 3)})}
            out.append(base.model_copy(update=upd))
    return out


def measure(model: str, configs: list[BenchConfig], out_dir: Path, command: list[str] | None = None,
            progress: Any = None, rounds: int = 1, seed: int = 0) -> list[tuple[Path, Result]]:
    """Run the ladder in ``rounds`` interleaved rounds (every config once a round, in an order shuffled per round:
    :func:`inferperf.measure.rounds.shuffled_rounds`, so a machine whose load drifts spreads it over every config
    instead of biasing the last), each run in a fresh worker process (as ``sweep`` does), and save each Result in
    ``out_dir`` as it comes (``b{batch}-i{instances}-t{threads}-r{round}.json``), so an interrupted ladder keeps
    its runs and a later ``plan --from`` reuses them.

    Raises:
        the worker's error (UsageError, ModelError, MeasurementError) for the first run that fails.
    """
    from ..measure.rounds import shuffled_rounds
    from ..measure.runner import run_in_worker
    from ..results.io import save

    out_dir.mkdir(parents=True, exist_ok=True)
    out = []
    total = len(configs) * rounds
    for i, slot in enumerate(shuffled_rounds(len(configs), rounds, seed)):
        cfg = configs[slot.case]
        name = (f"b{cfg.workload.batch_size}-i{cfg.concurrency}-t{cfg.session.intra_op_num_threads}"
                f"-r{slot.round + 1}.json")
        if progress:
            progress(f"measure {i + 1}/{total} (round {slot.round + 1}/{rounds}): batch {cfg.workload.batch_size}, "
                     f"{cfg.concurrency} instance(s) x {cfg.session.intra_op_num_threads} thread(s), "
                     f"{cfg.stop.min_duration_s:g} s")
        r = run_in_worker(model, cfg, command=command)
        out.append((save(r, out_dir / name), r))
    return out


__all__ = ["LADDER_CAP_S", "MIN_POOLED_SAMPLES", "ladder_configs", "measure", "read_results", "rows"]
