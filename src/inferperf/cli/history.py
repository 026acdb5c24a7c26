"""``inferperf history ...``: keep every Result in a database, find change points over time, gate CI on the
newest point (docs/history.md)."""

from __future__ import annotations

import datetime as _dt
import json
import re
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import GateFailed, UsageError
from . import app

Opt = typer.Option
history_app = typer.Typer(name="history", no_args_is_help=True, rich_markup_mode=None,
                          help="Keep Results in a database (a SQLite file, or PostgreSQL by URL), find change points "
                               "over time, and gate CI on the newest point (exit 3).")  # fmt: skip
app.add_typer(history_app, name="history")

DbOpt = Annotated[Optional[str], Opt("--db", help="history database: a file path (SQLite) or a postgresql+psycopg:// "
                                                  "URL (default $INFERPERF_HISTORY_DB, else ./inferperf-history.db)")]
SeriesOpt = Annotated[Optional[str], Opt("--series", help="only the series whose name matches this glob")]


def _engine(db: str | None):
    from ..history.store import open_store

    return open_store(db)


@history_app.command("add")
def add_command(
    paths: Annotated[list[Path], typer.Argument(help="Result files or folders of them (bench, sweep cases, load "
                                                     "steps, tune, pipeline)")],
    db: DbOpt = None,
    commit: Annotated[Optional[str], Opt(help="the commit measured (default: git HEAD of the current folder)")] = None,
    branch: Annotated[Optional[str], Opt(help="its branch (default: git's current branch)")] = None,
    time: Annotated[Optional[str], Opt("--time", help="the points' time, ISO-8601 (default: each Result's "
                                                      "created_at)")] = None,
    git: Annotated[bool, Opt("--git/--no-git", help="read commit and branch from git when not given")] = True,
) -> int:
    """Add Results to the history: the same Result twice is one point; one add is one transaction."""
    from ..history.ingest import Provenance, add, git_provenance, parse_time, read_results

    found = read_results(paths)
    g = git_provenance() if git and (commit is None or branch is None) else None
    prov = Provenance(commit=commit or (g.commit if g else None), branch=branch or (g.branch if g else None),
                      time=parse_time(time) if time else None)
    rep = add(_engine(db), found, prov)
    where = f" at {prov.commit[:12]}" if prov.commit else ""
    print(f"history add: {rep.added} Result(s) added ({rep.points} points){where}, {rep.duplicates} already there")
    return 0


def _analysed(engine, glob: str | None):
    from ..history.query import established, matching, usable

    out = []
    for s, every in matching(engine, glob):
        pts = usable(every)
        out.append((s, pts, established(pts), every))
    return out


def _console():
    from rich.console import Console

    return Console(width=200 if not sys.stdout.isatty() else None)


@history_app.command("ls")
def ls_command(db: DbOpt = None, series: SeriesOpt = None) -> int:
    """List the series with their point counts, newest value and last change."""
    from .history_view import series_table

    rows = _analysed(_engine(db), series)
    if not rows:
        print("no series" + (f" match {series!r}" if series else " yet: `inferperf history add RESULTS`"))
        return 0
    _console().print(series_table(rows))
    return 0


@history_app.command("show")
def show_command(series: Annotated[str, typer.Argument(help="a series name (from `history ls`), key or glob")],
                 db: DbOpt = None) -> int:  # fmt: skip
    """One series: its points (time, commit, median, interval, runtime, the change at each) and a sparkline."""
    from ..history.query import established, find_series, series_points, usable
    from .history_view import points_table, sparkline

    engine = _engine(db)
    s = find_series(engine, series)
    every = series_points(engine, s.id)
    pts = usable(every)
    cps = established(pts)
    con = _console()
    con.print(points_table(s, pts, cps, every))
    print(f"{s.metric}: {sparkline([p.median for p in pts], {c.index for c in cps})}  (| = change point; the newest "
          "point is left out of the detection: `history check` judges it)")
    return 0


@history_app.command("export")
def export_command(
    db: DbOpt = None,
    series: SeriesOpt = None,
    csv: Annotated[bool, Opt("--csv", help="one CSV row per point")] = False,
    as_json: Annotated[bool, Opt("--json", help="the JSON series document (what report reads)")] = False,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="write to this file (default: stdout)")] = None,
) -> int:
    """Export the series as CSV or as the JSON series document (points and change points)."""
    from ..history.export import export_csv, export_json

    if csv == as_json:
        raise UsageError("history export: pass exactly one of --csv or --json")
    engine = _engine(db)
    text = export_csv(engine, series) if csv else json.dumps(export_json(engine, series), indent=1) + "\n"
    if output is None:
        sys.stdout.write(text)
        return 0
    from ..fsutil import atomic_write_text

    try:
        atomic_write_text(output, text)
    except OSError as e:
        raise UsageError(f"cannot write '{output}' ({e.strerror or e}): choose another --output") from None
    print(f"wrote {output}")
    return 0


@history_app.command("check")
def check_command(
    db: DbOpt = None,
    series: SeriesOpt = None,
    max_regression: Annotated[str, Opt(help="largest tolerated change for the worse of the newest point (or of an "
                                            "unacknowledged change) against the points since the last change")] = "5%",
    alpha: Annotated[float, Opt(help="significance level of the newest point's one-sided test")] = 0.05,
    min_effect: Annotated[str, Opt(help="smallest change called a change point")] = "2%",
    allow_invalid: Annotated[bool, Opt("--allow-invalid", help="an INVALID newest point does not fail the gate: "
                                                               "the newest VALID point is judged")] = False,
) -> int:
    """The gate: exit 3 when a series' newest point is significantly worse than the segment since its last change
    point by more than --max-regression (or that change itself is, unacknowledged), or measured INVALID (nothing new
    judged; --allow-invalid judges the newest VALID point), 0 when not, 2 when no series matched."""
    from ..analysis.compare.gate import parse_percent
    from ..history.gate import check
    from .history_view import gate_line, gate_summary

    limit = parse_percent(max_regression, "--max-regression")
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: give a level between 0 and 1, e.g. 0.05")
    report = check(_engine(db), series, limit, alpha, parse_percent(min_effect, "--min-effect"), allow_invalid)
    if not report.rows:
        raise UsageError("history check: no series" + (f" match {series!r}" if series else " in the database") +
                         ": add Results first (`inferperf history add`) or fix --series")
    for r in report.rows:
        print(gate_line(r))
    print(gate_summary(report))
    if report.exit_code:
        worst = next(r for r in report.rows if r.verdict in ("regression", "invalid"))
        if worst.verdict == "invalid":
            raise GateFailed(f"history check: {worst.series.name}: {worst.reason}")
        raise GateFailed(f"history check: {worst.series.name} regressed ({(worst.worse or 0) * 100:+.1f} % worse)")
    return 0


@history_app.command("ack")
def ack_command(
    series: Annotated[str, typer.Argument(help="a series name or key, or a glob: every series it matches")],
    point: Annotated[str, typer.Argument(help="the point: its id, a commit (4+ hex) or any git ref (HEAD~1, a tag), "
                                              "or latest")],
    why: Annotated[str, Opt("--why", help="why the change is intended (kept with the point)")],
    db: DbOpt = None,
) -> int:
    """Accept an intended change at POINT of each matching series: the gate judges later points against the points
    from it on. A glob acks the POINT in every series it matches that holds it (one commit moves many series)."""
    from ..history.query import all_series, find_series
    from ..history.query import ack as ack_point

    engine = _engine(db)
    many = any(ch in series for ch in "*?[")
    targets = all_series(engine, series) if many else [find_series(engine, series)]
    if not targets:
        raise UsageError(f"no series match {series!r}: pass a name from `inferperf history ls` or a glob")
    done = []
    for s in targets:
        try:
            done.append((s, ack_point(engine, s, point, why)))
        except UsageError:
            if not many:
                raise
    if not done:
        raise UsageError(f"none of the {len(targets)} series matching {series!r} holds a point {point!r}: pass a point "
                         "id or commit from `inferperf history show`, or latest")
    for s, p in done:
        print(f"history ack: point {p.id} of {s.name} accepted ({p.ack})")
    return 0


def parse_age(text: str) -> _dt.timedelta:
    """``30d``, ``12h``, ``90m`` or ``2w`` -> a timedelta.

    Raises:
        UsageError: anything else.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*", text)
    if not m:
        raise UsageError(f"--older-than {text!r}: give an age like 30d, 12h, 90m or 2w")
    unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
    return _dt.timedelta(**{unit: float(m.group(1))})


@history_app.command("rm")
def rm_command(
    db: DbOpt = None,
    series: SeriesOpt = None,
    older_than: Annotated[Optional[str], Opt(help="only points older than this age (30d, 12h, 2w): retention")] = None,
    all_points: Annotated[bool, Opt("--all", help="with no --series and no --older-than: remove everything")] = False,
) -> int:
    """Remove points (and the series and Results left without points): by series glob, by age, or --all."""
    from ..history.query import remove

    if series is None and older_than is None and not all_points:
        raise UsageError("history rm: pass --series GLOB, --older-than AGE or --all")
    cutoff = None
    if older_than is not None:
        cutoff = _dt.datetime.now(_dt.UTC).replace(tzinfo=None) - parse_age(older_than)
    n_points, n_results = remove(_engine(db), series, cutoff)
    print(f"history rm: {n_points} point(s) and {n_results} Result(s) removed")
    return 0


def record(db: str, items: list) -> None:
    """``--history DB`` on a measuring command: add its ``(source, Result)`` items (commit and branch from git),
    one line on stderr.

    Raises:
        UsageError: the database cannot be opened (the Results are already saved where the command saves them).
    """
    from ..history.ingest import add, git_provenance

    rep = add(_engine(db), items, git_provenance())
    print(f"history: {rep.added} Result(s) added to {db} ({rep.points} points)", file=sys.stderr)


def stamps(folder: Path | None) -> dict[Path, int]:
    """The JSON files under ``folder`` and their modification times (ns), before a command writes there."""
    if folder is None or not folder.is_dir():
        return {}
    return {f: f.stat().st_mtime_ns for f in folder.rglob("*.json")}


def record_written(db: str, folder: Path, before: dict[Path, int]) -> None:
    """:func:`record` the Results a command wrote in ``folder`` (new or changed since ``before``, :func:`stamps`):
    earlier runs in the folder were measured at another commit (issue 37 item 5)."""
    from ..history.ingest import read_results

    mine = {f for f, t in stamps(folder).items() if before.get(f) != t}
    record(db, [(f, r) for f, r in read_results([folder]) if Path(f) in mine])


HistoryOpt = Annotated[Optional[str], Opt("--history", help="also add the Result(s) to this history database "
                                                            "(a file path or postgresql+psycopg:// URL)")]


def history_baseline(db: str, current: Path, folder: Path) -> Path:
    """``compare --baseline history:DB``: write to ``folder`` the stored Results of the points since the last
    change point of each CURRENT Result's series, and return ``folder``.

    Raises:
        UsageError: no CURRENT Result has a series in the history (add earlier runs with `history add`).
    """
    from ..history.baseline import baseline_results
    from ..history.ingest import read_results
    from ..results.io import save

    if not db:
        raise UsageError("--baseline history:DB needs a database: history:PATH or history:postgresql+psycopg://...")
    found = baseline_results(_engine(db), [r for _, r in read_results([current])])
    if not found:
        raise UsageError(f"no history in {db} for the Results in '{current}': add earlier runs first "
                         "(`inferperf history add`), or give a baseline folder")
    for i, r in enumerate(found):
        save(r, folder / f"{i:05d}-{r.case_key}.json")
    print(f"baseline: {len(found)} Result(s) from {db} (each series' points since its last change)", file=sys.stderr)
    return folder
