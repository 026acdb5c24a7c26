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
