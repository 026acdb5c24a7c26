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
