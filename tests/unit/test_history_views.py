"""history ls / show over INVALID points (issue 37 item 4): kept and shown marked, never analysed."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from inferperf.cli.history_view import points_table, series_table
from inferperf.history import store
from inferperf.history.ingest import add
from inferperf.history.query import established, matching, usable
from tests.history_results import make


def _text(renderable) -> str:  # noqa: ANN001
    con = Console(width=240, record=True)
    con.print(renderable)
    return con.export_text()


def test_invalid_points_are_shown_marked_not_hidden(tmp_path: Path) -> None:
    """A first history on a busy machine (every point INVALID) had read 'points 0' and looked empty."""
    e = store.open_store(str(tmp_path / "h.db"))
    add(e, [(str(i), make(2.0, seed=i, created_at=f"2026-12-01T00:{i:02d}:00+00:00", valid=i not in (1, 3)))
            for i in range(4)])
    (s, every), = [(s, p) for s, p in matching(e, "*p50*")]
    pts = usable(every)
    assert len(every) == 4 and len(pts) == 2
    ls = _text(series_table([(s, pts, established(pts), every)]))
    assert "2 (+2 INVALID)" in ls and "(newer: INVALID)" in ls
    show = _text(points_table(s, pts, established(pts), every))
    assert show.count("INVALID: kept, not analysed") == 2
    assert all(str(p.id) in show for p in every)
    only_bad = [p for p in every if p.verdict == "INVALID"]
    assert "0 (+2 INVALID)" in _text(series_table([(s, [], [], only_bad)]))


def test_ack_takes_a_short_commit_a_git_ref_and_a_glob_of_series(tmp_path: Path) -> None:
    """Issue 37 item 4: ack could not match commits shorter than 6 characters, nor a ref, and acked one series at
    a time (one commit moves p50, p99 and throughput together)."""
    import subprocess

    from inferperf.cli import main
    from inferperf.history.ingest import Provenance
    from inferperf.history.query import ack, all_series, series_points

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    db = tmp_path / "h.db"
    e = store.open_store(str(db))
    add(e, [("a", make(2.0, seed=1, created_at="2026-12-01T00:00:00+00:00"))], Provenance(commit="0" * 40))
    add(e, [("b", make(2.4, seed=2, created_at="2026-12-01T00:01:00+00:00"))], Provenance(commit=sha))
    (p50,) = all_series(e, "*p50*")
    assert ack(e, p50, sha[:4], "why").ack == "why"  # 4 hex, as git rev-parse takes
    import os

    here = os.getcwd()
    os.chdir(repo)
    try:
        assert ack(e, p50, "HEAD", "a ref").ack == "a ref"  # resolved by git rev-parse
        assert main(["history", "ack", "*", sha[:7], "--why", "one commit, every series", "--db", str(db)]) == 0
    finally:
        os.chdir(here)
    acked = {s.metric: series_points(e, s.id)[-1].ack for s in all_series(e)}
    assert len(acked) >= 2 and set(acked.values()) == {"one commit, every series"}
