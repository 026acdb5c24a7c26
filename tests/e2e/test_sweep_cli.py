"""`inferperf sweep` as a subprocess: dry run, a small real sweep, and bad input."""

from __future__ import annotations

import csv

import pytest

from tests.e2e.test_cli import cli


def test_dry_run_lists_cases_and_measures_nothing(tmp_path):
    p = cli("sweep", "zoo:ppocr-det", "--shape", "x:1x3x224x224,1x3x640x640", "--intra-op-num-threads", "1,2,3",
            "--concurrency", "1,2", "--dry-run", "-o", str(tmp_path / "s"))
    assert p.returncode == 0, p.stderr
    assert "12 cases" in p.stdout and "oversubscribed" in p.stdout
    out = " ".join(p.stdout.split())  # rich wraps lines at the terminal width
    assert "BOTH >= 2 s AND >= 100 queries" in out and "estimate: 12 cases x 1 round(s) = 12 runs" in out
    assert not (tmp_path / "s").exists()


def test_small_sweep_end_to_end(tmp_path):
    out = tmp_path / "s"
    p = cli("sweep", "zoo:tiny-cnn", "--intra-op-num-threads", "1,2", "--warmup", "2", "--iterations", "10",
            "--duration-s", "0.1", "-o", str(out))
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(open(out / "sweep.csv")))
    assert len(rows) == 2 and {r["intra_op_num_threads"] for r in rows} == {"1", "2"}
    assert "sweep results" in p.stdout and str(out) in p.stdout
    # stderr is a pipe, not a terminal: no progress bar, so one line per finished run (issue 10 item 8)
    runs = [x for x in p.stderr.splitlines() if x.startswith("run ")]
    assert [x.split(":")[0] for x in runs] == ["run 1/2", "run 2/2"] and all("queries/s" in x for x in runs)
    p = cli("sweep", "zoo:tiny-cnn", "--intra-op-num-threads", "1,2", "--warmup", "2", "--iterations", "10",
            "--duration-s", "0.1", "-o", str(out), "--resume")
    assert p.returncode == 0 and "0 runs measured, 2 reused" in p.stdout


@pytest.mark.parametrize(
    "args,expect",
    [
        (["sweep"], "give a MODEL"),
        (["sweep", "zoo:tiny-cnn", "--intra-op-num-threads", "a,b"], "--intra-op-num-threads"),
        (["sweep", "zoo:tiny-cnn", "--resume"], "--resume needs --output"),
        (["sweep", "zoo:tiny-cnn", "--matrix", "/nope.yaml"], "not found"),
        (["sweep", "zoo:tiny-cnn", "--env", "NOEQUALS"], "--env"),
        (["sweep", "zoo:nosuch", "--intra-op-num-threads", "1"], "unknown zoo model"),
        (["sweep", "zoo:tiny-cnn", "--shape", "y:1x3x32x32", "--intra-op-num-threads", "1"], "unknown input"),
        (["sweep", "zoo:tiny-cnn", "--backend", "nosuch", "--intra-op-num-threads", "1"], "unknown backend"),
        (["sweep", "zoo:tiny-bert", "--dim", "seq=8,16", "--dim", "seq=32"], "given twice"),
        (["optimize", "zoo:tiny-cnn", "--max-accuracy-drop", "foo:0.01", "--no-measure", "-o", "/tmp/inferperf-t-opt"],
         "no check computes"),
    ],
)
def test_sweep_bad_input(args, expect):
    p = cli(*args)
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and expect in lines[0]


@pytest.mark.parametrize("sig,code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_interrupt_keeps_finished_runs_in_one_line(tmp_path, sig, code):
    """Issue 23 item 7: SIGTERM is Ctrl-C: the finished runs stay on disk and one line says so (was two lines
    for Ctrl-C, 'interrupted: ...' then 'error: interrupted')."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "s"
    p = subprocess.Popen([sys.executable, "-m", "inferperf", "sweep", "zoo:tiny-cnn", "--intra-op-num-threads",
                          "1,2,3,4", "--warmup", "2", "--iterations", "10", "--duration-s", "3", "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None and not list(out.glob("runs/*.json")):
        time.sleep(0.1)  # the first run is written: the second is measuring
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    lines = [ln for ln in err.splitlines() if "interrupted" in ln]
    assert lines == [f"interrupted by {sig}: finished runs are kept in {out}; rerun with --resume to continue"]
    assert 1 <= len(list(out.glob("runs/*.json"))) < 4 and "Traceback" not in err
