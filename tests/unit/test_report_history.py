"""Issue 28 item 5: the report draws one trend chart per series of a history document (``history export
--json``), change points marked with their size and commit, and lists the changes in its summary."""

from __future__ import annotations

import json
from pathlib import Path

from inferperf.history import store
from inferperf.history.export import export_json
from inferperf.history.ingest import Provenance, add
from inferperf.report.build import build
from inferperf.report.render import render_html
from tests.history_results import make


def _doc(tmp_path: Path) -> Path:
    e = store.open_store(str(tmp_path / "h.db"))
    for i, lv in enumerate([2.0] * 10 + [2.4] * 6):
        add(e, [(str(i), make(lv, seed=i, created_at=f"2026-12-01T{i:02d}:00:00+00:00"))],
            Provenance(commit=f"{i:02d}" + "c" * 38))
    out = tmp_path / "history.json"
    out.write_text(json.dumps(export_json(e, "*p50_ms*")))
    return out


def test_a_history_document_gets_a_trend_chart_with_its_change_marked(tmp_path: Path) -> None:
    rep = build([_doc(tmp_path)])
    (chart,) = [c for c in rep.charts if c.group == "history"]
    (shape,) = chart.figure["layout"]["shapes"]
    x = chart.figure["data"][0]["x"]
    assert shape["x0"] == x[10] == "2026-12-01T10:00:00Z"  # the planted change, at run 11
    (note,) = chart.figure["layout"]["annotations"]
    assert note["text"].startswith("+") and note["text"].endswith("10cccccccccc")
    doc = json.loads((tmp_path / "history.json").read_text())
    assert chart.figure["data"][0]["y"] == [p["median"] for p in doc["series"][0]["points"]]
    (line,) = [s["text"] for s in rep.summary if s["kind"] == "history"]
    assert "p50_ms" in line and "change +" in line and "at 10cccccccccc" in line
    html = render_html(rep)
    assert "Performance history" in html and "history-0" in html


def test_a_folder_of_results_and_a_history_document_report_both(tmp_path: Path) -> None:
    from inferperf.results.io import save

    doc = _doc(tmp_path)
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "history.json").write_text(doc.read_text())
    save(make(2.0, seed=99), folder / "bench.json")
    rep = build([folder])
    assert len(rep.rows) == 1 and [c.group for c in rep.charts].count("history") == 1


def test_the_committed_example_document_draws_its_planted_change() -> None:
    """examples/history/history.json (`history export --json` of examples/history/results): the p50 chart marks
    the planted change at run 11 (index 9: one INVALID run before it is left out)."""
    doc = Path(__file__).resolve().parents[2] / "examples" / "history" / "history.json"
    rep = build([doc])
    p50 = next(c for c in rep.charts if c.group == "history" and ".p50_ms#" in c.title)
    (shape,) = p50.figure["layout"]["shapes"]
    assert shape["x0"] == p50.figure["data"][0]["x"][9]
    assert "-13" in p50.figure["layout"]["annotations"][0]["text"]


def test_a_history_report_says_what_it_was_made_from_and_plans_no_capacity() -> None:
    """Issue 37 item 4: a history report said "from 0 Result(s)" and carried a capacity item about nothing."""
    from inferperf.report.build import build
    from inferperf.report.render import render_markdown

    rep = build([Path(__file__).resolve().parents[2] / "examples" / "history" / "history.json"])
    assert rep.source == "a history of 3 series" and not [r for r in rep.recommendations if r["kind"] == "capacity"]
    assert "from a history of 3 series in" in render_markdown(rep)
