"""Locust's stats CSVs -> summary-only load Results (issue 13, item 9): exact values from real Locust output.

The fixtures (tests/fixtures/locust/, README there) are real ``locust --csv`` files: a clean run with a
ramp, and one where every request failed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inferperf.errors import UsageError
from inferperf.loadgen.locust_import import STABILITY_REASON, locust_results, read_locust_csv
from inferperf.results.io import load, save
from inferperf.system import collect_system

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "locust"
NAME = "/v2/models/tiny/infer"


def _one(prefix: str):
    rs = locust_results(FIX / prefix, system=collect_system(), command=["locust"], created_at="2026-12-01T11:46:48+00:00")
    assert len(rs) == 1
    return rs[0]


def test_parser_reads_named_rows_aggregated_history_and_failures() -> None:
    data = read_locust_csv(FIX / "tiny_binary")
    assert [(r.type, r.name, r.count, r.failures) for r in data.rows] == [("POST", NAME, 729, 0)]
    assert data.aggregated is not None and data.aggregated.name == "Aggregated" and data.aggregated.count == 729
    assert [(h.timestamp_s, h.users, h.total_count) for h in data.history] == [
        (1796125602, 0, 0), (1796125603, 2, 138), (1796125604, 4, 356), (1796125605, 4, 439),
        (1796125606, 4, 523), (1796125607, 4, 631), (1796125608, 4, 729)]  # fmt: skip
    assert data.history[0].percentiles_ms["50%"] is None  # Locust's N/A before the first request
    assert data.rows[0].percentiles_ms["99.99%"] == 92.0
    assert data.failures == []


def test_clean_run_becomes_one_marked_summary_only_load_result() -> None:
    r = _one("tiny_binary")
    assert r.kind == "load" and r.config.scenario == "concurrent" and r.config.concurrency == 4
    assert r.run["imported"] == "locust" and r.metrics.client["imported"] == "locust"
    assert r.run["locust"]["name"] == NAME and r.run["locust"]["type"] == "POST" and r.run["locust"]["users"] == 4
    assert r.model.path == NAME and r.model.served_name == "tiny"
    # no raw samples: nothing to recompute from
    assert r.samples.latency_ns == [] and r.samples.start_offsets_ns == []
    lat = r.metrics.latency_ms
    assert (lat.count, lat.mean, lat.min, lat.max) == (729, 29.433590214016295, 1.2590839996846626, 91.61765199951333)
    assert (lat.p50, lat.p90, lat.p95, lat.p99, lat.p999) == (26.0, 57.0, 65.0, 80.0, 92.0)
    assert lat.percentiles_from == "locust" and lat.percentile_method == "nearest-rank" and "std" in lat.not_reported
    tp = r.metrics.throughput
    assert tp.duration_s == pytest.approx(729 / 121.1951991181617, rel=1e-12)
    assert tp.queries_per_s == pytest.approx(121.1951991181617, rel=1e-12)
    assert r.metrics.client["achieved_rate"] == 121.1951991181617
    assert r.metrics.client["littles_law"]["measured"] == pytest.approx(121.1951991181617 * 29.433590214016295 / 1000)
    assert r.metrics.errors.count == 0 and r.metrics.errors.by_kind == {}
    # windows between history rows: exact counts from the totals, Locust's current p50/p99
    assert [(w.t_s, w.count, w.queries_per_s, w.p50_ms, w.p99_ms) for w in r.metrics.windows] == [
        (0.0, 138, 138.0, 12.0, 32.0), (1.0, 218, 218.0, 9.0, 61.0), (2.0, 83, 83.0, 19.0, 69.0),
        (3.0, 84, 84.0, 23.0, 69.0), (4.0, 108, 108.0, 24.0, 71.0), (5.0, 98, 98.0, 26.0, 80.0)]  # fmt: skip
    assert r.validity.valid and r.validity.reasons == [STABILITY_REASON] and r.validity.stability_judged is False
    assert any("no raw samples" in n for n in r.notes)
    assert any("1 s with fewer than 4 users" in n for n in r.notes)  # the ramp is in Locust's totals
    assert not any("failed requests" in n for n in r.notes)


def test_all_failed_run_is_invalid_with_errors_by_kind() -> None:
    r = _one("bad_shape")
    assert r.metrics.latency_ms.count == 278 and r.metrics.throughput.queries_per_s == 0.0
    assert r.metrics.errors.count == 278 and r.metrics.errors.by_kind == {"LocustBadStatusCode(code=400)": 278}
    assert not r.validity.valid
    assert r.validity.reasons == [STABILITY_REASON, f"no successful {NAME} request (278 failed)"]
    assert any("278 failed requests: Locust's latencies and percentiles include them" in n for n in r.notes)


def test_saved_and_loaded_result_keeps_locusts_figures_and_marks(tmp_path: Path) -> None:
    r = _one("tiny_binary")
    back = load(save(r, tmp_path / "locust.json"))
    assert back.run["imported"] == "locust" and back.samples.latency_ns == []
    assert back.metrics.latency_ms.p99 == 80.0 and back.metrics.latency_ms.percentiles_from == "locust"
    assert back.validity.stability_judged is False and back.case_key == r.case_key


def test_report_reads_an_imported_result_and_says_so(tmp_path: Path) -> None:
    from inferperf.report import report

    save(_one("tiny_binary"), tmp_path / "in" / "locust.json")
    path, rep = report([tmp_path / "in"], tmp_path / "report.md", "markdown")
    text = path.read_text()
    assert "no raw samples" in text and "stability not judged" in text
    assert "timed: Locust's 4 users" in text and "pool of 0" not in text  # issue 41 item 7


@pytest.mark.parametrize("missing", ["stats", "stats_history"])
def test_missing_csv_is_one_line_naming_file_and_fix(tmp_path: Path, missing: str) -> None:
    for s in ("stats", "stats_history"):
        if s != missing:
            shutil.copy(FIX / f"tiny_binary_{s}.csv", tmp_path / f"run_{s}.csv")
    with pytest.raises(UsageError, match=rf"run_{missing}\.csv' not found: pass the PREFIX given to locust --csv"):
        locust_results(tmp_path / "run")


def test_not_locust_csv_and_no_requests_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "a_stats.csv").write_text("x,y\n1,2\n")
    shutil.copy(FIX / "tiny_binary_stats_history.csv", tmp_path / "a_stats_history.csv")
    with pytest.raises(UsageError, match="is not Locust's stats CSV"):
        locust_results(tmp_path / "a")
    header = (FIX / "tiny_binary_stats.csv").read_text().splitlines()[0]
    (tmp_path / "b_stats.csv").write_text(header + "\n,Aggregated,0,0,0,0.0,0,0,0,0.0,0.0" + ",N/A" * 11 + "\n")
    shutil.copy(FIX / "tiny_binary_stats_history.csv", tmp_path / "b_stats_history.csv")
    with pytest.raises(UsageError, match="has no request rows"):
        locust_results(tmp_path / "b")


def test_importer_never_imports_locust_or_gevent() -> None:
    code = ("import sys, inferperf.loadgen.locust_import as m\n"
            f"m.locust_results({str(FIX / 'tiny_binary')!r})\n"
            "print(sorted({'locust', 'gevent', 'geventhttpclient'} & set(sys.modules)))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_compare_treats_imports_as_summary_only(tmp_path) -> None:
    """compare reads imported Locust Results as what they are: one summary-only run a side gives no interval
    (Locust's history rows are its own rolling figures, not blocks of raw samples), so every verdict is
    inconclusive with the reason; several imported runs a side get the between-run interval."""
    from inferperf.analysis.compare import compare

    r = _one("tiny_binary")
    save(r, tmp_path / "a" / "r.json")
    save(r, tmp_path / "b" / "r.json")
    c = compare([tmp_path / "a"], [tmp_path / "b"])
    rows = {row.metric: row for row in c.rows}
    assert rows["throughput"].baseline == pytest.approx(r.metrics.throughput.queries_per_s)
    assert rows["p99"].baseline == pytest.approx(r.metrics.latency_ms.p99)
    assert {row.verdict for row in c.rows} == {"inconclusive"} and c.exit_code == 0
    assert "summary-only Results imported from locust" in rows["throughput"].why
    assert rows["throughput"].low is None  # no interval was made up
    for i, scale in enumerate((1.0, 1.01, 0.99)):  # three imported runs a side: between-run figures
        for side in ("c", "d"):
            x = r.model_copy(deep=True)
            x.created_at = f"2026-12-01T12:0{i}:00+00:00"
            x.metrics.throughput.queries_per_s *= scale
            save(x, tmp_path / side / f"r{i}.json")
    rows = {row.metric: row for row in compare([tmp_path / "c"], [tmp_path / "d"]).rows}
    assert rows["throughput"].n == (3, 3) and rows["throughput"].low is not None


def test_a_distributed_runs_stepped_totals_become_one_window_per_worker_report(tmp_path: Path) -> None:
    """Issue 41 item 7: a master writes a history row a second but its totals move only at the workers' reports
    (every 3 s): per-row windows read 150, 0, 0, 360, 0, 0, ... requests/s, a sawtooth of the reports. Windows span
    report to report instead (exact counts over 3 s), a note says so; a single process keeps one row per window."""
    for suffix in ("stats", "failures"):
        shutil.copy(FIX / f"tiny_binary_{suffix}.csv", tmp_path / f"dist_{suffix}.csv")
    lines = (FIX / "tiny_binary_stats_history.csv").read_text().splitlines()
    header = lines[0].split(",")
    base = lines[1].split(",")
    i_t, i_u, i_n = header.index("Timestamp"), header.index("User Count"), header.index("Total Request Count")
    i_50, i_99 = header.index("50%"), header.index("99%")
    totals = [0, 150, 150, 150, 510, 510, 510, 870, 870, 870]  # reports at rows 1, 4 and 7
    rows = [",".join(header)]
    for k, total in enumerate(totals):
        row = list(base)
        row[i_t], row[i_u], row[i_n] = str(1796125602 + k), "4", str(total)
        row[i_50], row[i_99] = ("N/A", "N/A") if k == 0 else ("20", "60")
        rows.append(",".join(row))
    (tmp_path / "dist_stats_history.csv").write_text("\n".join(rows) + "\n")
    r = locust_results(tmp_path / "dist", system=collect_system(), command=["locust"])[0]
    assert [(w.t_s, w.count, w.queries_per_s) for w in r.metrics.windows] == [(0.0, 150, 150.0), (1.0, 360, 120.0),
                                                                             (4.0, 360, 120.0)]
    assert any("windows span report to report, ~3 s each" in n for n in r.notes)
    single = _one("tiny_binary")  # totals move every row: one window per row, no note
    assert len(single.metrics.windows) == 6 and not any("report to report" in n for n in single.notes)
