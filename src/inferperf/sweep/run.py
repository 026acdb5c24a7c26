"""Run a sweep: every case in a fresh worker, ``repeat`` shuffled rounds, results streamed to a folder.

Folder layout (``--output DIR``)::

    DIR/index.json            case_key -> label, model, config, marks, run files, failures (rewritten after each run)
    DIR/runs/KEY-rR.json      one Result per case and round, written as it finishes
    DIR/cases/KEY.json        each case's runs pooled (samples pooled, CIs over runs)
    DIR/sweep.csv             one row per case
    DIR/findings.json         the analysis findings

``resume`` reads the index and the run files and schedules only the missing
(case, round) pairs: finished runs keep their PIDs. A case that fails, crashes
or times out is recorded with its reason and the sweep goes on. Ctrl-C reaps
the running worker; everything finished stays on disk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis.findings import findings
from ..errors import InferperfError, UsageError
from ..fsutil import atomic_write_text
from ..measure.rounds import shuffled_rounds
from ..measure.runner import aggregate, run_in_worker
from ..results.io import load, save
from ..results.model import Result
from .outcome import SweepOutcome
from .output import write_csv
from .space import Case


def _write_json(path: Path, doc: Any) -> None:
    atomic_write_text(path, json.dumps(doc, indent=1))


def _case_id(case: Case) -> str:
    """A stable id for a case before it has run (the Result's case_key needs the model hash and resolved shapes)."""
    import hashlib

    return hashlib.sha256((case.model + "|" + case.config.model_dump_json()).encode()).hexdigest()[:16]


def check_resumable(cases: list[Case], output: Path) -> None:
    """Refuse to resume ``output`` when its index holds a different sweep (other cases).

    Raises:
        UsageError: unreadable index, or case sets that differ.
    """
    index_path = output / "index.json"
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"'{index_path}' is not readable ({e}): choose another --output") from None
    ids = {_case_id(c) for c in cases}
    if index.get("cases") and set(index["cases"]) != ids:
        raise UsageError(
            f"'{output}' holds a different sweep ({len(set(index['cases']) - ids)} of its cases are not in this"
            " one): resume with the same models, axes and settings, or choose another --output"
        )


def run_sweep(
    cases: list[Case],
    output: Path,
    repeat: int = 1,
    seed: int = 0,
    resume: bool = False,
    command: list[str] | None = None,
    on_run: Callable[[Case, int, Result | None, str | None], None] | None = None,
) -> SweepOutcome:
    """Measure every case ``repeat`` times in shuffled rounds (``random.Random(seed)``), isolated in workers.

    Args:
        cases: the expanded matrix.
        output: results folder (created; must be empty of another sweep unless ``resume``).
        repeat: rounds.
        seed: shuffle seed (recorded in each run).
        resume: skip (case, round) pairs already on disk.
        on_run: progress callback ``on_run(case, round, result_or_None, error_or_None)``.

    Raises:
        UsageError: ``output`` holds a different sweep's index and ``resume`` is off.
    """
    output.mkdir(parents=True, exist_ok=True)
    (output / "runs").mkdir(exist_ok=True)
    index_path = output / "index.json"
    try:
        index: dict[str, Any] = json.loads(index_path.read_text()) if index_path.exists() else {"cases": {}}
    except (OSError, ValueError) as e:
        raise UsageError(f"'{index_path}' is not readable ({e}): choose another --output") from None
    if index["cases"] and not resume:
        raise UsageError(f"'{output}' already holds a sweep: pass --resume to continue it, or another --output")
    ids = [_case_id(c) for c in cases]
    if resume:
        check_resumable(cases, output)
    for cid, case in zip(ids, cases):
        entry = index["cases"].setdefault(cid, {"label": case.label, "model": case.model, "runs": {}, "failures": []})
        entry.update(label=case.label, model=case.model, marks=case.marks, config=case.config.model_dump(mode="json"))
    index.update(repeat=repeat, seed=seed, command=command)
    _write_json(index_path, index)

    out = SweepOutcome(cases=cases)
    runs: dict[int, list[Result]] = {i: [] for i in range(len(cases))}
    for slot in shuffled_rounds(len(cases), repeat, seed):
        i, r = slot.case, slot.round
        cid, case = ids[i], cases[i]
        entry = index["cases"][cid]
        done = entry["runs"].get(str(r))
        if done and (output / done).exists():
            runs[i].append(load(output / done))
            out.skipped_runs += 1
            continue
        if any(f["round"] == r for f in entry["failures"]):
            out.skipped_runs += 1
            continue
        try:
            res = run_in_worker(case.model, case.config, repeat_index=r, command=command)
        except InferperfError as e:
            entry["failures"].append({"round": r, "type": type(e).__name__, "message": str(e)})
            _write_json(index_path, index)
            if on_run:
                on_run(case, r, None, str(e))
            continue
        res.run.update(**slot.marks(), marks=case.marks, label=case.label)
        res.kind = "sweep"  # the pooled Result copies it
        rel = f"runs/{cid}-r{r}.json"
        save(res, output / rel)
        entry["runs"][str(r)] = rel
        entry["case_key"] = res.case_key
        _write_json(index_path, index)
        runs[i].append(res)
        out.measured_runs += 1
        if on_run:
            on_run(case, r, res, None)
    (output / "cases").mkdir(exist_ok=True)
    for i, rs in runs.items():
        if entry_failures := index["cases"][ids[i]]["failures"]:
            out.failures[i] = entry_failures
        if rs:
            pooled = aggregate(rs, cases[i].config)
            pooled.run["marks"] = cases[i].marks
            pooled.run["label"] = cases[i].label
            save(pooled, output / "cases" / f"{pooled.case_key}.json")  # the name sweep.csv's case_key gives
            out.results[i] = pooled
    out.findings = findings(out.results.values())
    _write_json(output / "findings.json", [f.as_dict() for f in out.findings])

    write_csv(out, output / "sweep.csv")
    return out
