"""`inferperf tune` as a subprocess: a short real tune whose best.yaml `bench --config` accepts, exit 3, bad input."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e.test_cli import cli

FAST = ("--trial-duration-s", "0.3", "--min-samples", "40", "--warmup", "3")


@pytest.mark.slow
def test_short_real_tune_on_squeezenet_writes_a_best_yaml_bench_reproduces(tmp_path):
    out = tmp_path / "t"
    p = cli("tune", "zoo:squeezenet", "--intra-op-num-threads", "1,2", "--concurrency", "1", "--n-trials", "6",
            "--validate-top", "1", "--validation-rounds", "2", "--slo-p99-ms", "10000", *FAST, "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "validation (2 interleaved rounds" in p.stdout and "best (validation)" in p.stdout
    summary = json.loads((out / "tune.json").read_text())
    best = summary["best"]
    assert best and best["source"] == "validation" and best["p99_ms"] <= 10000
    assert summary["budget"]["tickets_used"] <= summary["budget"]["search"] + 1
    doc = yaml.safe_load((out / "best.yaml").read_text())
    r = cli("bench", "zoo:squeezenet", "--config", str(out / "best.yaml"), "--duration-s", "0.3", "--iterations", "20",
            "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    threads = best["config"].get("intra_op_num_threads")
    if threads is not None:
        assert doc["session"]["intra_op_num_threads"] == threads
        assert res["config"]["session"]["requested"]["intra_op_num_threads"] == threads
    assert res["config"]["concurrency"] == best["config"].get("concurrency", 1)
    rows = (out / "trials.csv").read_text().splitlines()
    assert rows[0].startswith("number,state") and len(rows) >= 2
    # a rerun continues the same study: nothing is measured again
    again = cli("tune", "zoo:squeezenet", "--intra-op-num-threads", "1,2", "--concurrency", "1", "--n-trials", "6",
                "--validate-top", "1", "--validation-rounds", "2", "--slo-p99-ms", "10000", *FAST, "-o", str(out))
    assert again.returncode == 0, again.stderr
    assert "0 measured" in again.stdout


def test_an_slo_nothing_meets_exits_3_naming_the_closest(tmp_path):
    p = cli("tune", "zoo:tiny-cnn", "--intra-op-num-threads", "1", "--concurrency", "1", "--n-trials", "3",
            "--no-validate", "--slo-p99-ms", "0.00001", *FAST, "-o", str(tmp_path / "t"))
    assert p.returncode == 3, p.stderr
    assert "no configuration met p99 <= 1e-05 ms: closest was trial" in p.stderr
    assert not (tmp_path / "t" / "best.yaml").exists()


@pytest.mark.parametrize("args,expect", [
    (["--execution-mode", "fast"], "--execution-mode 'fast': unknown value: choose from sequential, parallel"),
    (["--sampler", "cmaes"], "--sampler 'cmaes': choose from tpe, gp, random, grid"),
    (["--max-batch-size", "4"], "are serving axes: add --serve"),
    (["--storage", "postgresql+psycopg://u:pw@127.0.0.1:1/none"], "cannot open the database"),
    (["--storage", "redis://x"], "use sqlite:///PATH, journal:PATH or postgresql+psycopg"),
    (["--n-trials", "4"], "leaves no search trial after 9 validation runs"),
    (["--n-trials", "6"], "raise --n-trials to at least 10"),
    (["--intra-op-num-threads", "4", "--concurrency", "4"], "every configuration of the space is pruned"),
    (["--intra-op-num-threads", "1", "--shape", "x:1x2x3"], "--shape x:1x2x3 has rank 3 but input 'x'"),
    # the settings' own checks (issue 25 item 2): the same line a library call gets (tests/unit/test_tune_settings.py)
    (["--objective", "p98"], "--objective 'p98': choose throughput, throughput-per-core or p99"),
    (["--min-throughput", "5"], "--min-throughput is the constraint of --objective p99"),
    (["--validate-top", "0"], "--validate-top must be >= 1 and --validation-rounds >= 2"),
    (["--serve", "--concurrency", "2", "--session-mode", "shared,per-stream"], "--session-mode is an in-process axis"),
    (["--intra-op-num-threads", "1", "--timeout-s", "0"], "--timeout-s 0: give seconds > 0"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, args, expect):
    p = cli("tune", "zoo:tiny-cnn", *args, "-o", str(tmp_path / "t"))
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and expect in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout == "", p.stdout  # no plan first ("budget: 6 measured trials = -3 search + 9 validation")


def test_missing_or_corrupt_model_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "corrupt.onnx"
    bad.write_text("not a model")
    for model, expect in ((str(tmp_path / "nope.onnx"), "not found"), (str(bad), "is not a readable ONNX model")):
        p = cli("tune", model, "--intra-op-num-threads", "1", "-o", str(tmp_path / "t"))
        assert p.returncode == 2 and expect in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_unknown_axis_in_a_space_file(tmp_path):
    f = tmp_path / "space.yaml"
    f.write_text("threads: [1, 2]\n")
    p = cli("tune", "zoo:tiny-cnn", "--space", str(f), "-o", str(tmp_path / "t"))
    assert p.returncode == 2 and "unknown axis 'threads'" in p.stderr


@pytest.mark.slow
def test_served_tune_over_batching_and_instances_runs(tmp_path):
    out = tmp_path / "s"
    p = cli("tune", "zoo:tiny-cnn", "--serve", "--max-batch-size", "0,4", "--instance-count", "1", "--concurrency", "2",
            "--intra-op-num-threads", "1", "--n-trials", "6", "--validate-top", "1", "--validation-rounds", "2",
            "--min-samples", "60", "--trial-duration-s", "0.3", "-o", str(out))
    assert p.returncode == 0, p.stderr
    summary = json.loads((out / "tune.json").read_text())
    assert summary["best"] is not None
    doc = yaml.safe_load((out / "best.yaml").read_text())
    assert "serve" in doc or summary["best"]["label"] == "defaults"
    trials = [json.loads(f.read_text()) for f in sorted((out / "trials").glob("*.json"))]
    assert trials and all(t["kind"] == "tune" and t["run"]["serve_options"] is not None for t in trials)
    assert {t["run"]["tune_params"].get("max_batch_size") for t in trials} <= {0, 4}


@pytest.mark.slow
def test_precision_variants_built_first_are_an_axis(tmp_path):
    out = tmp_path / "v"
    p = cli("tune", "zoo:tiny-cnn", "--build-variants", "fp16", "--intra-op-num-threads", "1", "--concurrency", "1",
            "--n-trials", "6", "--validate-top", "1", "--validation-rounds", "2", *FAST, "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert (out / "variants" / "optimize-summary.json").exists()
    summary = json.loads((out / "tune.json").read_text())
    seen = {json.loads(f.read_text())["run"]["tune_params"].get("precision") for f in (out / "trials").glob("*.json")}
    assert seen == {"fp32", "fp16"}
    best = summary["best"]
    if best["config"].get("precision") == "fp16":
        assert best["model"].endswith(".fp16.onnx") and "the fp16 variant" in (out / "best.yaml").read_text()


def test_precision_without_variants_is_one_line(tmp_path):
    p = cli("tune", "zoo:tiny-cnn", "--precision", "fp16", "-o", str(tmp_path / "t"))
    assert p.returncode == 2 and "--precision needs --variants DIR" in p.stderr


def test_sigterm_keeps_the_finished_trials_in_one_line(tmp_path):
    """Issue 23 item 7: SIGTERM is Ctrl-C for tune: one line says the finished trials are kept, exit 143."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "t"
    p = subprocess.Popen([sys.executable, "-m", "inferperf", "tune", "zoo:tiny-cnn", "--intra-op-num-threads", "1,2,3,4",
                          "--concurrency", "1,2,3,4", "--n-trials", "20", "--no-validate", "--trial-duration-s", "2",
                          "--min-samples", "40", "--warmup", "3", "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None and not list((out / "trials").glob("*")):
        time.sleep(0.1)  # a trial has finished: the next one is measuring
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    lines = [ln for ln in err.splitlines() if "interrupted" in ln]
    assert lines == [f"interrupted by SIGTERM: every finished trial is kept in the study ({out}); rerun the same"
                     " command to continue"]  # fmt: skip
    assert "Traceback" not in err
