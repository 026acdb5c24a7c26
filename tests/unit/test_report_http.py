"""Issue 24 items 8-10: the report reads HTTP load Results as HTTP runs, not in-process runs.

Load steps are made on the fake clock (tests/unit/test_report_load.py); in-process Results come from the golden
fixtures (tests/fixtures/report)."""

from __future__ import annotations

from pathlib import Path

from inferperf.report.build import ReportOptions, build
from inferperf.results.io import load, save
from tests.unit.test_report_load import closed, opened

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "report"


def _served(r, command: list[str], client_cpus: int = 1):
    """A step as `inferperf load MODEL` writes it: the generator pinned to CPU 1 (its system says 1 effective
    CPU), the server it started pinned to CPU 0."""
    r.command = command
    r.system.effective_cpus, r.system.cpu_affinity = client_cpus, [1]
    r.config.placement.cpus = [1]
    r.run["placement"] = {"generator_cpus": [1], "server_cpus": [0], "disjoint": True}
    return r


def _save(folder: Path, results) -> Path:
    for i, r in enumerate(results):
        save(r, folder / f"step{i}.json")
    return folder


def test_http_connections_are_not_threads_and_client_and_server_are_apart(tmp_path: Path) -> None:
    cmd = ["inferperf", "load", "m.onnx", "--concurrency", "1,4,8"]
    rep = build([_save(tmp_path, [_served(closed(c), cmd) for c in (1, 4, 8)])])
    env = rep.environment
    text = " ".join(w for m in env for w in m["warnings"])
    assert "oversubscribed" not in text and "SMT" not in text  # 8 connections on a 1-CPU client is no oversubscription
    labels = [row["label"] for row in rep.rows]
    assert not any("streams" in lab or "shared" in lab for lab in labels), labels
    assert any("8 connections (closed loop)" in lab for lab in labels), labels
    rows = dict(env[0]["rows"])
    assert "pinned to CPUs 1" not in rows["placement"]  # the generator's pinning is not the test environment
    setup = dict(env[0]["setups"][0]["rows"])
    assert setup["server CPUs"] == "pinned to CPUs 0"
    assert setup["client CPUs"].startswith("pinned to CPUs 1, disjoint")
    assert "not threads" in setup["client (load generator)"]


def test_capacity_never_from_load_runs_or_profile_runs(tmp_path: Path) -> None:
    """Issue 36 item 8: capacity is simulated from in-process service times (plan's model); an HTTP load run, open
    or a saturated closed-loop ladder, and a profiled run give none, and the note says why."""
    cmd = ["inferperf", "load", "m.onnx", "--request-rate", "10,20"]
    _save(tmp_path / "open", [_served(opened(r), cmd) for r in (10, 20)])
    ladder = ["inferperf", "load", "m.onnx", "--concurrency", "1,2,4,8"]
    _save(tmp_path / "closed", [_served(closed(c), ladder) for c in (1, 2, 4, 8)])
    prof = load(next((FIX / "sweep" / "cases").glob("*.json")))
    prof.kind = "profile"
    save(prof, tmp_path / "prof" / "profile.json")
    rep = build([tmp_path], ReportOptions(target_qps=100, slo_p99_ms=50))
    assert rep.capacity == []  # was "N instances" from a 10 req/s step, a ladder's saturation, the profiled run
    notes = [r["text"] for r in rep.recommendations if r["kind"] == "capacity"]
    assert any(t.startswith("HTTP load runs are not planned from: capacity is simulated") for t in notes), notes


def test_two_results_of_one_case_are_two_labels_and_one_candidate(tmp_path: Path) -> None:
    case = next((FIX / "sweep" / "cases").glob("*.json"))
    r = load(case)
    save(r, tmp_path / "a" / "x.json")
    r.created_at = "2026-01-01T00:00:01+00:00"
    save(r, tmp_path / "b" / "x.json")
    rep = build([tmp_path], ReportOptions(target_qps=100))
    labels = [row["label"] for row in rep.rows]
    assert len(set(labels)) == len(labels) == 2, labels
    assert rep.capacity == []  # a fleet is sized under a p99: the note asks for one
    assert any("pass --slo-p99-ms as well" in x["text"] for x in rep.recommendations if x["kind"] == "capacity")
    rep = build([tmp_path], ReportOptions(target_qps=100, slo_p99_ms=1e4))
    (cap,) = rep.capacity
    opts = cap["options"]  # the two runs of one case pool into one candidate: batching off and nothing else
    assert sum(o["chosen"] for o in opts) == 1 and len({o["label"] for o in opts}) == len(opts)
    assert sorted(cap["options"][0]["measured_from"]["1"]) == sorted(str(tmp_path / d / "x.json") for d in "ab")


def test_separate_runs_are_separate_series_and_no_knee_from_one_step(tmp_path: Path) -> None:
    ladder = [_served(closed(c), ["inferperf", "load", "m.onnx", "--concurrency", "1,2,4"]) for c in (1, 2, 4)]
    ramp = [_served(closed(c), ["inferperf", "load", "m.onnx", "--stress"]) for c in (1, 2, 4, 8)]
    soak = _served(closed(2), ["inferperf", "load", "m.onnx", "--soak-s", "3"])
    single = [_served(closed(2), ["inferperf", "load", "m.onnx", "--concurrency", "2"])]
    for r in ramp:  # one server for all (same target): the runs must still be apart
        r.metrics.client["stress"] = {"mode": "stress", "step": r.config.concurrency}
    soak.metrics.client["soak"] = {"intervals": [], "verdict": "no leak"}
    rep = build([_save(tmp_path, [*ladder, *ramp, soak, *single])])
    tput = [c for c in rep.charts if c.id.startswith("load-tput-")]
    xs = sorted(tuple(c.figure["data"][0]["x"]) for c in tput)
    assert xs == [(1, 2, 4), (1, 2, 4, 8), (2,)], xs  # no zig-zag 1,1,2,2,2,4,4,8
    lines = [s["text"] for s in rep.summary if s["kind"] == "load"]
    one = next(t for t in lines if "1 step" in t)
    assert "knee" not in one.replace("no knee from fewer than 3", ""), one
    assert sum("knee at" in t for t in lines) == 2, lines


def test_a_copy_of_a_result_is_read_once(tmp_path: Path) -> None:
    """tune's best.json repeats its validation winner (plus the summary): the report keeps one of them."""
    r = load(next((FIX / "sweep" / "cases").glob("*.json")))
    save(r, tmp_path / "validation" / "trial-2.json")
    r.run["tune_summary"] = {"goal": "throughput"}
    save(r, tmp_path / "best.json")
    rep = build([tmp_path])
    assert len(rep.rows) == 1 and rep.rows[0]["file"].endswith("best.json")
    assert any("copies of another Result" in n for n in rep.notes)
