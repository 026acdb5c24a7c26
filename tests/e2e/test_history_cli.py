"""Issue 28 items 2 and 4: ``inferperf history`` as a subprocess: add (idempotent, git provenance), ls, show
(table + sparkline), export --csv/--json, check's exit codes (3 regressed, 0 not, 2 nothing matched), ack,
rm, and one-line errors."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import inferperf
from inferperf.results.io import save
from tests.history_results import make


def _run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferperf", "history", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """10 Results at 2.0 ms then 4 at 2.4 ms (a planted 20 % slowdown), created an hour apart."""
    for i, lv in enumerate([2.0] * 10 + [2.4] * 4):
        save(make(lv, seed=i, created_at=f"2026-12-01T{i:02d}:00:00+00:00"), tmp_path / "r" / f"{i:02d}.json")
    return tmp_path


def test_add_ls_show_check_ack_round_trip(folder: Path) -> None:
    env = {"INFERPERF_HISTORY_DB": str(folder / "h.db")}
    p = _run("add", "r", "--commit", "c0ffee123456", "--branch", "main", cwd=folder, env=env)
    assert p.returncode == 0, p.stderr
    assert "14 Result(s) added (42 points) at c0ffee123456, 0 already there" in p.stdout
    again = _run("add", "r", "--no-git", cwd=folder, env=env)
    assert "0 Result(s) added (0 points), 14 already there" in again.stdout
    ls = _run("ls", cwd=folder, env=env)
    assert ls.returncode == 0 and ls.stdout.count("m.onnxruntime.bench.single-stream.c1.b1.") == 3
    assert "change +" in ls.stdout and "at c0ffee123456" in ls.stdout
    show = _run("show", "*p50_ms*", cwd=folder, env=env)
    assert show.returncode == 0, show.stderr
    spark = next(line for line in show.stdout.splitlines() if line.startswith("p50_ms: "))
    assert spark.split()[1].index("|") == 10  # the change starts at the 11th point
    check = _run("check", cwd=folder, env=env)
    assert check.returncode == 3, check.stdout + check.stderr
    assert check.stdout.count("REGRESSION") == 3 and "3 regression(s)" in check.stdout
    assert check.stderr.strip().startswith("error: history check: ") and len(check.stderr.splitlines()) == 1
    for metric in ("p50_ms", "p99_ms", "samples_per_s"):
        doc = json.loads(_run("export", "--json", "--series", f"*{metric}*", cwd=folder, env=env).stdout)
        (s,) = doc["series"]
        at = [c["point"] for c in s["change_points"] if c["kind"] == "change"][-1]  # the one the segment starts at
        ok = _run("ack", f"*{metric}*", str(at), "--why", "intended: bigger input", cwd=folder, env=env)
        assert ok.returncode == 0 and "accepted (intended: bigger input)" in ok.stdout
    passed = _run("check", cwd=folder, env=env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "gate passed" in passed.stdout and "REGRESSION" not in passed.stdout


def test_check_exit_codes_0_and_2(folder: Path) -> None:
    db = str(folder / "ok.db")
    assert _run("add", *[f"r/{i:02d}.json" for i in range(10)], "--db", db, "--no-git", cwd=folder).returncode == 0
    ok = _run("check", "--db", db, cwd=folder)
    assert ok.returncode == 0 and "gate passed" in ok.stdout
    none = _run("check", "--db", db, "--series", "nothing*", cwd=folder)
    assert none.returncode == 2 and "no series match 'nothing*'" in none.stderr
    assert len(none.stderr.splitlines()) == 1 and "Traceback" not in none.stderr
    empty = _run("check", "--db", str(folder / "empty.db"), cwd=folder)
    assert empty.returncode == 2 and "no series in the database" in empty.stderr


def test_export_csv_and_json_documents(folder: Path) -> None:
    db = str(folder / "h.db")
    _run("add", "r", "--db", db, "--no-git", cwd=folder)
    rows = list(csv.DictReader(io.StringIO(_run("export", "--csv", "--db", db, cwd=folder).stdout)))
    assert len(rows) == 42 and {r["metric"] for r in rows} == {"samples_per_s", "p50_ms", "p99_ms"}
    assert all(len(r["values"].split()) == int(r["runs"]) == 3 for r in rows)
    out = folder / "series.json"
    assert _run("export", "--json", "--db", db, "-o", str(out), cwd=folder).returncode == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "inferperf-history/1" and len(doc["series"]) == 3
    s = next(s for s in doc["series"] if s["metric"] == "p50_ms")
    assert [c["index"] for c in s["change_points"]] == [10] and s["change_points"][0]["rel_change"] > 0.15
    both = _run("export", "--db", db, cwd=folder)
    assert both.returncode == 2 and "exactly one of --csv or --json" in both.stderr


def test_add_reads_commit_and_branch_from_git(folder: Path) -> None:
    g = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["init", "-q", "-b", "feature"], ["add", "r"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *cmd], cwd=folder, check=True, env={**os.environ, **g}, timeout=30)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True).stdout.strip()
    db = str(folder / "h.db")
    assert f"at {head[:12]}" in _run("add", "r/00.json", "--db", db, cwd=folder).stdout
    rows = list(csv.DictReader(io.StringIO(_run("export", "--csv", "--db", db, cwd=folder).stdout)))
    assert {(r["commit"], r["branch"]) for r in rows} == {(head, "feature")}


def test_rm_by_series_and_age(folder: Path) -> None:
    db = str(folder / "h.db")
    _run("add", "r", "--db", db, "--no-git", cwd=folder)
    assert _run("rm", "--db", db, cwd=folder).returncode == 2
    gone = _run("rm", "--db", db, "--series", "*p99_ms*", cwd=folder)
    assert "14 point(s) and 0 Result(s) removed" in gone.stdout
    old = _run("rm", "--db", db, "--older-than", "1d", cwd=folder)  # the Results are from 2026-12-01
    assert old.returncode == 0 and "28 point(s) and 14 Result(s) removed" in old.stdout
    bad = _run("rm", "--db", db, "--older-than", "soon", cwd=folder)
    assert bad.returncode == 2 and "give an age like 30d" in bad.stderr


def test_errors_are_one_line(folder: Path) -> None:
    cases = [(["add", "nope"], "'nope' not found"),
             (["check", "--db", "redis://x"], "use a file path, sqlite:///PATH or postgresql"),
             (["check", "--db", str(folder / "h.db"), "--max-regression", "lots"], "is not a percentage"),
             (["show", "x", "--db", str(folder / "h.db")], "no series match 'x'"),
             (["add", "r", "--time", "yesterday", "--db", str(folder / "h.db")], "is not ISO-8601")]
    for args, msg in cases:
        p = _run(*args, cwd=folder)
        assert p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)


def test_the_library_calls(folder: Path) -> None:
    rep = inferperf.history_add(folder / "r", db=str(folder / "lib.db"), commit="abc")
    assert (rep.added, rep.points) == (14, 42)
    assert inferperf.history_check(str(folder / "lib.db")).exit_code == 3


def test_bench_and_sweep_add_to_the_history_directly(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    flags = ["--backend", "null", "--null-latency-ms", "1", "--iterations", "20", "--duration-s", "0",
             "--max-duration-s", "1", "--warmup", "1"]
    b = subprocess.run([sys.executable, "-m", "inferperf", "bench", *flags, "--no-sampler", "-o", str(tmp_path / "b.json"),
                        "--history", db], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert b.returncode == 0, b.stderr
    assert f"history: 1 Result(s) added to {db} (3 points)" in b.stderr
    s = subprocess.run([sys.executable, "-m", "inferperf", "sweep", "zoo:tiny-cnn", "--intra-op-num-threads", "1,2",
                        "--warmup", "2", "--iterations", "10", "--duration-s", "0.1", "-o", str(tmp_path / "sw"),
                        "--history", db], capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert s.returncode == 0, s.stderr
    assert f"history: 2 Result(s) added to {db} (6 points)" in s.stderr
    ls = _run("ls", "--db", db, cwd=tmp_path)
    assert ls.stdout.count(".null.bench.") == 3 and ls.stdout.count(".onnxruntime.sweep.") == 6
    ab = subprocess.run([sys.executable, "-m", "inferperf", "bench", "--ab", "a.onnx", "b.onnx", "--history", db],
                        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert ab.returncode == 2 and "--history adds one bench Result: drop --ab" in ab.stderr


def test_the_committed_example_on_a_fresh_database(tmp_path: Path) -> None:
    """docs/history.md's first commands: the example folder adds and passes (a planted speed-up), the slowdown
    Result then fails the gate on p50 (exit 3)."""
    ex = Path(__file__).resolve().parents[2] / "examples" / "history"
    env = {"INFERPERF_HISTORY_DB": str(tmp_path / "h.db")}
    assert "16 Result(s) added (48 points)" in _run("add", str(ex / "results"), "--no-git", cwd=tmp_path, env=env).stdout
    ok = _run("check", cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    doc = json.loads(_run("export", "--json", "--series", "*p50_ms*", cwd=tmp_path, env=env).stdout)
    assert [c["kind"] for c in doc["series"][0]["change_points"]] == ["change"]
    assert doc["series"][0]["change_points"][0]["rel_change"] < -0.10
    _run("add", str(ex / "slowdown"), "--no-git", cwd=tmp_path, env=env)
    bad = _run("check", cwd=tmp_path, env=env)
    assert bad.returncode == 3 and "REGRESSION   resnet50.null.bench.single-stream.c1.b1.p50_ms" in bad.stdout


@pytest.mark.slow
def test_load_and_tune_add_to_the_history_directly(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")

    def cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "inferperf", *args], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, cwd=tmp_path)

    no_out = cli("load", "http://127.0.0.1:9/", "--model", "m", "--history", db)
    assert no_out.returncode == 2 and "--history adds the step Results load writes: pass --output DIR" in no_out.stderr
    earlier = cli("load", "zoo:tiny-cnn", "--concurrency", "1", "--duration-s", "1", "--warmup-s", "0.2",
                  "-o", str(tmp_path / "load"))  # an earlier run in the same folder, never added
    assert earlier.returncode == 0, earlier.stderr
    load = cli("load", "zoo:tiny-cnn", "--concurrency", "1", "--duration-s", "1", "--warmup-s", "0.2",
               "-o", str(tmp_path / "load"), "--history", db)
    assert load.returncode == 0, load.stderr
    # the step and the own server's Result of this run only (issue 37 item 5: the earlier run's 2 came along, under
    # this run's commit)
    assert "history: 2 Result(s) added" in load.stderr
    tune = cli("tune", "zoo:tiny-cnn", "--intra-op-num-threads", "1", "--concurrency", "1", "--n-trials", "3",
               "--no-validate", "--slo-p99-ms", "10000", "--trial-duration-s", "0.3", "--min-samples", "40",
               "--warmup", "3", "-o", str(tmp_path / "t"), "--history", db)
    assert tune.returncode == 0, tune.stderr
    assert "history: 1 Result(s) added" in tune.stderr
    ls = _run("ls", "--db", db, cwd=tmp_path).stdout
    assert ".load." in ls and ".serve." in ls and "tiny-cnn.onnxruntime." in ls


def test_compare_against_the_history_baseline(folder: Path) -> None:
    """compare --baseline history:DB: the points since the last change (the 4 slow runs) are the baseline, so
    a current Result at the slow level is unchanged while one at the old level is an improvement."""
    db = str(folder / "h.db")
    _run("add", "r", "--db", db, "--no-git", cwd=folder)

    def compare(level: float, name: str) -> subprocess.CompletedProcess:
        save(make(level, seed=77, runs=3, created_at="2026-12-02T00:00:00+00:00"), folder / name / "c.json")
        return subprocess.run([sys.executable, "-m", "inferperf", "compare", f"history:{db}", str(folder / name),
                               "--format", "json", "--metrics", "p50"], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, cwd=folder)

    same = compare(2.4, "same")
    assert same.returncode == 0, same.stderr
    assert "baseline: 4 Result(s) from" in same.stderr
    assert {r["verdict"] for r in json.loads(same.stdout)["rows"] if r["metric"] == "p50"} <= {"unchanged", "inconclusive"}
    slow = compare(3.0, "slow")
    assert slow.returncode == 3, slow.stdout + slow.stderr
    none = subprocess.run([sys.executable, "-m", "inferperf", "compare", f"history:{folder / 'empty.db'}",
                           str(folder / "same")], capture_output=True, text=True, timeout=120, cwd=folder)
    assert none.returncode == 2 and "no history in" in none.stderr
