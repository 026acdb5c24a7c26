"""One Result-file finder for compare and report (issue 25 item 4): the same side files are left out of a folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferperf.analysis.compare.data import load_side
from inferperf.errors import UsageError
from inferperf.report.collect import collect
from inferperf.results.io import SIDE_FILES, result_files, save

from .test_compare import make_result


def _folder(tmp_path: Path) -> tuple[Path, Path]:
    """A folder with one Result (in a subfolder) and every side file inferperf writes beside Results."""
    folder = tmp_path / "out"
    res = save(make_result(5.0, runs=2), folder / "cases" / "r0.json")
    for name in SIDE_FILES:  # each a plain JSON object, as sweep/optimize/runtimes/tune write them
        (folder / name).write_text(json.dumps({"what": name, "schema_version": 1}))
    return folder, res


def test_a_folder_gives_its_results_without_side_files(tmp_path: Path) -> None:
    folder, res = _folder(tmp_path)
    assert result_files([folder]) == [res]
    assert {"tune.json", "index.json", "findings.json", "optimize-summary.json"} <= SIDE_FILES


def test_compare_and_report_read_the_same_files_and_skip_side_files_quietly(tmp_path: Path) -> None:
    folder, res = _folder(tmp_path)
    loaded, notes = load_side([folder], "baseline")
    assert [f for f, _, _ in loaded] == [res]
    assert notes == []  # tune.json was read as a Result and noted as skipped by compare's own finder
    got = collect([folder])
    assert [e.path for e in got.entries] == [res] and got.notes == []


def test_a_named_file_is_kept_and_a_missing_path_is_refused(tmp_path: Path) -> None:
    folder, res = _folder(tmp_path)
    assert result_files([folder / "tune.json", res, res]) == [folder / "tune.json", res]
    with pytest.raises(UsageError, match="'.*nope' not found: pass Result files or folders"):
        result_files([tmp_path / "nope"])


def test_one_rule_says_which_json_in_a_folder_is_a_result(tmp_path: Path) -> None:
    """Issue 38 item 2: history add, report, compare and plan each had a rule of their own (a 4 KiB peek, the side
    files, a load that failed). results.io.is_result_file is the one; every reader of a folder agrees with it."""
    from inferperf.history.ingest import read_results as history_read
    from inferperf.plan.ladder import read_results as plan_read
    from inferperf.results.io import is_result_file

    folder, res = _folder(tmp_path)
    (folder / "run.intervals.json").write_text(json.dumps({"intervals": []}))  # a soak's side log
    (folder / "h.json").write_text(json.dumps({"format": "inferperf-history/1", "series": [],
                                               "schema_version": 1}))  # a history export
    assert is_result_file(res)
    assert not any(is_result_file(f) for f in folder.glob("*.json"))
    assert [p for p, _ in history_read([folder])] == [res]
    skipped: list[str] = []
    assert [p for p, _ in plan_read([folder], skipped)] == [res] and len(skipped) == 2
    assert [e.path for e in collect([folder]).entries] == [res]
