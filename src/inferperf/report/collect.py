"""Gather the Result documents a report is built from: files and folders, mixed kinds.

A folder is searched recursively for ``*.json`` (:func:`inferperf.results.io.result_files`, the finder
``compare`` uses too); files that are not Results (:data:`inferperf.results.io.SIDE_FILES`: ``index.json``,
``findings.json``, ``tune.json``, ...; or JSON without ``schema_version``) are skipped quietly, since
everything a report needs is inside the Results. A run that is part of a pooled Result (as in a sweep's
``runs/`` beside ``cases/``) is dropped so no sample counts twice: a pooled Result lists the runs it pooled in
``run.pooled_runs`` (``created_at`` and ``pid`` of each, under its ``case_key``),
and only a single-run Result named there is dropped. PIDs alone are not enough:
they are reused across boots and machines.

Each Result carries its *kind* (``Result.kind``: ``sweep``, ``optimize``,
``runtimes``, ``bench``, ...; old files get it on load) and gets a *source*: the
command that made it, so that analysis never mixes two invocations' cases into
one scaling curve.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..results.io import SIDE_FILES, is_result_file, load, result_files
from ..results.model import Result



@dataclass
class Entry:
    """One Result and where it came from.

    Attributes:
        result: the document; path: its file.
        kind: ``Result.kind`` (``sweep`` | ``optimize`` | ``runtimes`` | ``bench`` | ...), read, never guessed.
        source: the command that made it (argv joined), grouping Results of one invocation.
    """

    result: Result
    path: Path
    kind: str
    source: str


@dataclass
class Collection:
    """Every Result found, plus notes on what was skipped and why."""

    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)  # history series documents (report/history.py)

    @property
    def results(self) -> list[Result]:
        """The Results, in collection order."""
        return [e.result for e in self.entries]

    def of_kind(self, *kinds: str) -> list[Entry]:
        """Entries of the given kinds."""
        return [e for e in self.entries if e.kind in kinds]

    def sources(self, *kinds: str) -> dict[str, list[Entry]]:
        """Entries of the given kinds grouped by source, in first-seen order."""
        out: dict[str, list[Entry]] = {}
        for e in self.of_kind(*kinds):
            out.setdefault(e.source, []).append(e)
        return out


def pooled_run_ids(results: Iterable[Result]) -> set[tuple]:
    """Identities of the single runs the pooled Results among ``results`` pooled.

    ``(case_key, created_at, pid)`` from ``run.pooled_runs``; a pooled Result written before that field
    gives ``(case_key, None, pid)`` from ``run.pids`` (a PID counts only under the same case_key).
    """
    out: set[tuple] = set()
    for r in results:
        if "pids" not in r.run:
            continue
        listed = r.run.get("pooled_runs")
        if isinstance(listed, list):
            out.update((r.case_key, x.get("created_at"), x.get("pid")) for x in listed if isinstance(x, dict))
        else:
            out.update((r.case_key, None, pid) for pid in r.run.get("pids") or [] if pid is not None)
    return out


def is_pooled_elsewhere(r: Result, pooled: set[tuple]) -> bool:
    """A single-run Result that a pooled Result lists (see :func:`pooled_run_ids`)."""
    if "pids" in r.run or r.run.get("pid") is None:
        return False
    pid = r.run["pid"]
    return (r.case_key, r.created_at, pid) in pooled or (r.case_key, None, pid) in pooled


def drop_copies(loaded: list[tuple[Path, Result]]) -> tuple[list[tuple[Path, Result]], int]:
    """``loaded`` without Results that copy another (same kind, ``case_key``, ``created_at``, command, sample
    count, throughput and p99),
    keeping the copy that carries more in ``run`` (tune's ``best.json``, with its summary, over the validation
    Result it repeats), and how many were dropped: a sample is never counted twice."""
    best: dict[tuple, tuple[Path, Result]] = {}
    for f, r in loaded:
        k = (r.kind, r.case_key, r.created_at, tuple(r.command), r.metrics.latency_ms.count,
             r.metrics.throughput.queries_per_s, r.metrics.latency_ms.p99)
        if k not in best or len(r.run) > len(best[k][1].run):
            best[k] = (f, r)
    keep = {id(x[1]) for x in best.values()}
    return [(f, r) for f, r in loaded if id(r) in keep], len(loaded) - len(best)


def _history_doc(path: Path) -> dict | None:
    """The history series document in ``path`` (``inferperf history export --json``), else None."""
    from .history import FORMAT, is_history_doc

    try:
        with open(path, "rb") as f:
            if FORMAT.encode() not in f.read(4096):
                return None
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return doc if is_history_doc(doc) else None


def collect(paths: Iterable[str | Path]) -> Collection:
    """Load every Result under ``paths`` (files or folders), dropping runs already pooled elsewhere.

    Raises:
        UsageError: a path does not exist, a file given by name is not a Result, or nothing was found.
    """
    given = [Path(p) for p in paths]
    out = Collection()
    loaded: list[tuple[Path, Result]] = []
    for f in result_files(given):
        named = f in given
        if not is_result_file(f):
            doc = _history_doc(f)
            if doc is not None:
                out.history.append(doc)
                continue
            if named and f.name not in SIDE_FILES:
                raise UsageError(f"'{f}' is not an inferperf Result (no schema_version): pass Result files")
            continue
        try:
            loaded.append((f, load(f)))
        except UsageError as e:
            if named:
                raise
            out.notes.append(f"skipped {f}: {e}")
    pooled = pooled_run_ids(r for _, r in loaded)
    dropped = 0
    kept: list[tuple[Path, Result]] = []
    for f, r in loaded:
        if is_pooled_elsewhere(r, pooled):
            dropped += 1
            continue
        kept.append((f, r))
    kept, copies = drop_copies(kept)
    for f, r in kept:
        out.entries.append(Entry(r, f, r.kind, " ".join(r.command) or str(f.parent)))
    if dropped:
        out.notes.append(f"{dropped} single-run Result(s) left out: their runs are pooled in another Result")
    if copies:
        out.notes.append(f"{copies} Result(s) left out: copies of another Result read (same case, run time and"
                         " samples; e.g. tune's best.json repeats its validation winner)")
    if not out.entries and not out.history:
        raise UsageError("no inferperf Results found in " + ", ".join(map(str, given))
                         + ": pass the output of bench, sweep or optimize")
    return out
