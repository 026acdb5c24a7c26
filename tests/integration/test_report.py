"""``inferperf report`` on the golden Result fixtures (tests/fixtures/report, see its README).

Each section appears exactly when its data exist, the summary's numbers are the Results', the HTML is
self-contained (plotly.js embedded, no CDN) and small, and the Markdown carries the same sections.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from inferperf.cli import main
from inferperf.report import ReportOptions, build
from inferperf.report.collect import collect
from inferperf.report.downsample import MAX_POINTS_PER_CHART
from inferperf.report.render import render_html, render_markdown
from inferperf.results.io import load
from inferperf.stats import intervals_separate

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "report"
SWEEP, OPT, RT, SWEEP2 = FIX / "sweep", FIX / "opt", FIX / "rt", FIX / "sweep2"


@pytest.fixture(scope="module")
def full():
    return build([SWEEP, OPT, RT])


def test_collect_pools_runs_and_tells_kinds():
    c = collect([SWEEP, OPT, RT])
    kinds = [e.kind for e in c.entries]
    assert kinds.count("sweep") == len(list((SWEEP / "cases").glob("*.json")))
    assert kinds.count("optimize") == 3 and kinds.count("runtimes") == 2
    assert any("pooled in another Result" in n for n in c.notes)  # runs/ beside cases/ are not counted twice


def test_every_section_present_with_all_kinds(full):
    assert full.sections == ["summary", "environment", "method", "raw-data", "charts", "bottlenecks",
                             "recommendations"]
    groups = {c.group for c in full.charts}
    assert {"distribution", "timeline", "threads", "precision", "runtimes"} <= groups
    sampled = any(e.result.samples.timeline for e in collect([SWEEP, OPT, RT]).entries
                  if any(run and run.get("t_s") for run in e.result.samples.timeline.get("runs", [e.result.samples.timeline])))
    assert ("resources" in groups) == sampled  # the 10 Hz sampler saw nothing in these 20 ms runs
    assert "batch" not in groups and "size" not in groups and "concurrency" not in groups  # not swept
    assert all(c.points <= MAX_POINTS_PER_CHART for c in full.charts)
    assert len(full.precision) == 1 and len(full.runtimes) == 1


def test_sections_follow_the_data():
    sweep_only = build([SWEEP])
    groups = {c.group for c in sweep_only.charts}
    assert "threads" in groups and "precision" not in groups and "runtimes" not in groups
    assert not sweep_only.precision and not sweep_only.runtimes
    assert not any(s["kind"] in ("precision", "runtime") for s in sweep_only.summary)
    opt_only = build([OPT])
    groups = {c.group for c in opt_only.charts}
    assert "precision" in groups and "threads" not in groups and "runtimes" not in groups
    md = render_markdown(opt_only)
    assert "## Precision comparison" in md and "## Runtime comparison" not in md


def test_summary_names_no_best_from_two_runs(full):
    # the fixtures ran --repeat 2: the t interval over 2 runs cannot decide, so no "best" is named
    c = collect([SWEEP, OPT, RT])
    sweep_cases = [e for e in c.entries if e.kind == "sweep"]
    item = next(s for s in full.summary if s["kind"] == "best-throughput")
    assert item["values"]["status"] == "too few runs" and item["values"]["case_key"] is None
    assert "too few runs (2)" in item["text"] and "--repeat 3" in item["text"]
    assert sorted(item["values"]["candidates"]) == sorted(e.result.case_key for e in sweep_cases if e.result.validity.valid)
    assert not any("ship" in r["text"] for r in full.recommendations if r["kind"] in ("latency", "throughput"))
    rt = next(s for s in full.summary if s["kind"] == "runtime")
    by = {e.result.config.backend: e.result for e in c.entries if e.kind == "runtimes"}
    ratio = by["openvino"].metrics.throughput.queries_per_s / by["onnxruntime"].metrics.throughput.queries_per_s
    assert f"{ratio:.2f}x" in rt["text"]


def test_real_two_size_sweep_never_compares_workloads():
    # PP-OCRv4 det at 224x224 and 640x640 x 1-3 threads, 3 rounds (fixtures/report/sweep2, see the README)
    rep = build([SWEEP2], ReportOptions(target_qps=5000, slo_p99_ms=500))
    said = [*rep.summary, *rep.recommendations, *rep.bottlenecks]
    for s in said:
        assert not ("224x224" in s["text"] and "640x640" in s["text"]), s["text"]
    best = [s for s in rep.summary if s["kind"] == "best-throughput"]
    assert sorted(b["values"]["workload"] for b in best) == ["ppocr-det 1x3x224x224", "ppocr-det 1x3x640x640"]
    results = {e.result.case_key: e.result for e in collect([SWEEP2]).entries}
    for b in best:  # a named winner separates from every other case of its workload, from >= 3 runs each
        if b["values"]["case_key"] is not None:
            w = results[b["values"]["case_key"]].metrics.throughput
            for k in b["values"]["candidates"]:
                if k != b["values"]["case_key"]:
                    assert intervals_separate(w.samples_per_s_ci95, results[k].metrics.throughput.samples_per_s_ci95)
    assert [c["workload"] for c in rep.capacity] == ["ppocr-det 1x3x224x224", "ppocr-det 1x3x640x640"]
    by_path = {str(e.path): e.result for e in collect([SWEEP2]).entries}
    for c in rep.capacity:  # each fleet sized from its own workload's runs only
        shapes = {str(by_path[f].config.workload.shapes) for o in c["options"] for fs in o["measured_from"].values()
                  for f in fs}
        assert len(shapes) == 1 and c["workload"].split()[-1] in next(iter(shapes)).replace(", ", "x")
    md = render_markdown(rep)
    assert "Capacity for workload ppocr-det 1x3x224x224" in md and "--target-qps 5000 --slo-p99-ms 500" in md
    without = build([SWEEP2])
    assert without.capacity == [] and any("pass --target-qps" in r["text"].lower() or "--target-qps" in r["text"]
                                          for r in without.recommendations if r["kind"] == "capacity")


def test_html_is_self_contained(full):
    html = render_html(full)
    assert "<script src=" not in html and "<link" not in html  # nothing fetched: plotly.js is inline
    assert html.count("Plotly.newPlot(") == 1
    assert len(html) < 8_000_000
    for c in full.charts:
        assert f'id="{c.id}"' in html
    for s in full.sections:
        assert f'<section id="{s}">' in html
    assert "data:text/csv" in html  # the CSV download is embedded


def test_markdown_has_the_same_sections(full):
    md = render_markdown(full)
    for title in ("## Summary", "## Test environment", "## Method", "## Raw data", "## Bottleneck analysis",
                  "## Recommendations and deployment plan", "## Precision comparison", "## Runtime comparison"):
        assert title in md
    for s in full.summary:
        assert s["text"] in md


def test_cli_writes_html_and_markdown(tmp_path, capsys):
    assert main(["report", str(SWEEP), str(OPT), "-o", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 1_000_000
    assert main(["report", str(RT), "--format", "markdown", "-o", str(tmp_path / "r.md"),
                 "--target-qps", "5000", "--slo-p99-ms", "1"]) == 0
    md = (tmp_path / "r.md").read_text()
    assert "5,000 queries/s" in md and "p99 <= 1 ms" in md
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(RT), "--format", "pdf"]) == 2
    assert "error:" in capsys.readouterr().err


# --- issue 10 item 12: a typed Result kind; issue 11: pooled runs named, not guessed from PIDs ---

def _doc(path: Path) -> dict:
    return json.loads(path.read_text())


def test_old_files_without_kind_load_with_the_kind_their_run_block_names(tmp_path):
    expected = {SWEEP / "cases": "sweep", SWEEP / "runs": "sweep", OPT: "optimize", RT: "runtimes"}
    for folder, kind in expected.items():
        for f in folder.glob("*.json"):
            if f.name in ("optimize-summary.json", "comparison.json"):
                continue
            assert "kind" not in _doc(f), f  # the fixtures predate the field
            assert load(f).kind == kind, f
    plain = _doc(next(RT.glob("onnxruntime-*.json")))
    del plain["run"]["comparison"]
    (tmp_path / "bench.json").write_text(json.dumps(plain))
    assert load(tmp_path / "bench.json").kind == "bench"


def test_report_reads_the_kind_field_instead_of_guessing(tmp_path):
    doc = _doc(next((SWEEP / "cases").glob("*.json")))
    doc["kind"] = "bench"  # run.label says sweep; the typed field wins
    (tmp_path / "case.json").write_text(json.dumps(doc))
    c = collect([tmp_path, RT])
    assert [e.kind for e in c.entries].count("bench") == 1
    assert set(c.sources("runtimes")) and all(e.kind == "runtimes" for es in c.sources("runtimes").values() for e in es)


def test_a_reused_pid_does_not_drop_another_cases_run(tmp_path):
    pooled = _doc(next((SWEEP / "cases").glob("*.json")))
    other = _doc(next(RT.glob("onnxruntime-*.json")))
    single = {**other, "run": {"pid": pooled["run"]["pids"][0], "repeat_index": 0}, "kind": "bench"}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pooled.json").write_text(json.dumps(pooled))
    (tmp_path / "a" / "single.json").write_text(json.dumps(single))  # same PID, another machine/boot, another case
    c = collect([tmp_path / "a"])
    assert len(c.entries) == 2 and not c.notes


def test_only_the_runs_a_pooled_result_lists_are_dropped(tmp_path):
    runs = sorted((SWEEP / "runs").glob("*.json"))
    first = _doc(runs[0])
    pooled = _doc(SWEEP / "cases" / (runs[0].name.split("-r")[0] + ".json"))
    pooled["run"]["pooled_runs"] = [{"created_at": first["created_at"], "pid": first["run"]["pid"]}]
    again = {**first, "created_at": "2030-01-01T00:00:00+00:00"}  # same case and PID, a later boot
    for name, d in (("pooled.json", pooled), ("r0.json", first), ("again.json", again)):
        (tmp_path / name).write_text(json.dumps(d))
    c = collect([tmp_path])
    assert sorted(e.path.name for e in c.entries) == ["again.json", "pooled.json"]


def test_a_sweep_sets_kind_names_case_files_by_case_key_and_lists_pooled_runs(tmp_path):
    from inferperf.results.model import SystemInfo
    from inferperf.sweep.run import run_sweep
    from inferperf.sweep.space import Axes, Matrix, ModelEntry, expand

    info = SystemInfo(logical_cores=2, physical_cores=2, smt_active=False, cpu_affinity=[0, 1], effective_cpus=2,
                      os="x", python="3.11")
    m = Matrix(models=[ModelEntry(path="zoo:tiny-cnn")], axes=Axes(intra_op_num_threads=[1, 2]),
               settings={"warmup": {"iterations": 2}, "stop": {"min_iterations": 10, "min_duration_s": 0.05}})
    cases, _ = expand(m, info)
    run_sweep(cases, tmp_path, repeat=2)
    keys = {row["case_key"] for row in csv.DictReader(open(tmp_path / "sweep.csv"))}
    assert keys == {f.stem for f in (tmp_path / "cases").glob("*.json")}
    for f in [*(tmp_path / "cases").glob("*.json"), *(tmp_path / "runs").glob("*.json")]:
        assert _doc(f)["kind"] == "sweep"
    for f in (tmp_path / "cases").glob("*.json"):
        assert len(_doc(f)["run"]["pooled_runs"]) == 2
    c = collect([tmp_path])
    assert len(c.entries) == 2 and "4 single-run Result(s) left out" in c.notes[0]
