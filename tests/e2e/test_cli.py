"""The CLI as a subprocess: the default run, --json/--output, and every bad-input case with its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import erf_double_model, light_model

FAST = ["--warmup", "2", "--iterations", "5", "--duration-s", "0"]


def cli(*args: str, timeout: float = 180, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inferperf", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def test_default_run_is_resnet50():
    p = cli("bench", "--iterations", "20", "--duration-s", "0.5")
    assert p.returncode == 0, p.stderr
    assert "zoo:resnet50" in p.stdout and "p99" in p.stdout and "queries/s" in p.stdout
    assert "VALID" in p.stdout


def test_json_to_stdout_and_output_file_and_folder(tmp_path):
    out = tmp_path / "r.json"
    p = cli("bench", "zoo:tiny-cnn", *FAST, "--json", "-o", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema_version"] == 1 and doc["metrics"]["latency_ms"]["count"] >= 5
    assert doc["command"][:3] == ["inferperf", "bench", "zoo:tiny-cnn"]
    assert json.loads(out.read_text())["case_key"] == doc["case_key"]
    folder = tmp_path / "results"
    p = cli("bench", "zoo:tiny-cnn", *FAST, "--output", str(folder))
    assert p.returncode == 0, p.stderr
    files = list(folder.glob("tiny-cnn-*.json"))
    assert len(files) == 1 and str(files[0]) in p.stdout.replace("\n", "")


def test_ppocr_det_real_input_size(tmp_path):
    out = tmp_path / "r.json"
    p = cli("bench", "zoo:ppocr-det", "--shape", "x:1x3x640x640", *FAST, "--output", str(out))
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["config"]["workload"]["shapes"] == {"x": [1, 3, 640, 640]}


def test_fail_on_invalid_exits_3():
    # a 1 s cap with 100 queries of 300 ms each cannot be met: INVALID
    p = cli("bench", "zoo:tiny-cnn", "--backend", "null", "--null-latency-ms", "300", "--warmup", "1",
            "--iterations", "100", "--duration-s", "0", "--max-duration-s", "1", "--fail-on-invalid")
    assert p.returncode == 3, p.stderr
    assert p.stderr.strip().startswith("error: result is INVALID")


def test_zoo_lists_models():
    p = cli("zoo")
    assert p.returncode == 0
    for name in ("resnet50", "squeezenet", "ppocr-det", "tiny-bert", "constant weights"):
        assert name in p.stdout


def _bad_models(tmp: Path) -> dict[str, Path]:
    good = light_model("squeezenet").read_bytes()
    trunc = tmp / "truncated.onnx"
    trunc.write_bytes(good[: len(good) // 3])
    text = tmp / "notes.onnx"
    text.write_text("this is not a model\n" * 20)
    erf = erf_double_model(tmp / "erf_double.onnx")
    lst = tmp / "list.json"
    lst.write_text("[1, 2]")
    return {"truncated": trunc, "text": text, "erf": erf, "list_json": lst}


BAD_CASES = [
    ("missing file", ["bench", "{tmp}/nope.onnx"], "not found"),
    ("not onnx", ["bench", "{text}"], "not a readable ONNX model"),
    ("truncated", ["bench", "{truncated}"], "ONNX model"),
    ("op without kernel", ["bench", "{erf}"], "has no kernel"),
    ("malformed shape", ["bench", "zoo:ppocr-det", "--shape", "x:1x3xabc"], "malformed --shape"),
    ("malformed dim", ["bench", "zoo:tiny-bert", "--dim", "seq"], "malformed --dim"),
    ("shape contradicts fixed dim", ["bench", "zoo:squeezenet", "--shape", "data_0:1x3x640x640"], "contradicts fixed dim"),
    ("unresolved dims", ["bench", "zoo:ppocr-det"], "unresolved dims"),
    ("memory guard", ["bench", "zoo:ppocr-det", "--shape", "x:1x3x40000x40000"], "--force"),
    ("unknown zoo name", ["bench", "zoo:nope"], "unknown zoo model"),
    ("malformed session config", ["bench", "zoo:tiny-cnn", "--session-config", "novalue"], "malformed --session-config"),
    ("unknown flag", ["bench", "--no-such-flag"], "No such option"),
    ("bad threads", ["bench", "zoo:tiny-cnn", "--intra-op-num-threads", "-1"], "--intra-op-num-threads"),
    ("bad execution mode", ["bench", "zoo:tiny-cnn", "--execution-mode", "fast"], "--execution-mode"),
    ("bad input data", ["bench", "zoo:tiny-cnn", "--input-data", "{tmp}/none.npz"], "not found"),
    ("unknown provider", ["bench", "zoo:tiny-cnn", "--providers", "CUDAExecutionProvider"], "onnxruntime-gpu"),
    ("unwritable output", ["bench", "zoo:tiny-cnn", "-o", "/proc/nope/r.json"], "cannot write results"),
    ("huge cpu range", ["bench", "zoo:tiny-cnn", "--cpus", "0-1000000000"], "--cpus"),
    ("shared dim conflict", ["bench", "zoo:tiny-bert", "--shape", "input_ids:1x16", "--dim", "seq=32"], "dim 'seq'"),
    ("batch conflict", ["bench", "zoo:tiny-cnn", "--shape", "x:2x3x32x32", "--batch-size", "4"], "contradicts"),
    ("negative seed", ["bench", "zoo:tiny-cnn", "--seed", "-1"], "--seed"),
    ("config not an object", ["bench", "zoo:tiny-cnn", "--config", "{list_json}"], "must hold an object"),
    ("empty model", ["bench", ""], "empty model argument"),
    ("bad session config value", ["bench", "zoo:tiny-cnn", "--session-config", "session.dynamic_block_base=abc"],
     "--session-config"),
]


@pytest.mark.parametrize("label,args,expect", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_input_one_line_exit_2(tmp_path, label, args, expect):
    paths = {k: str(v) for k, v in _bad_models(tmp_path).items()} | {"tmp": str(tmp_path)}
    p = cli(*[a.format(**paths) for a in args], *FAST)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip() and set(line.strip()) != {"*"}]  # ORT's banner
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ") and expect in lines[0], lines[0]
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_debug_shows_traceback():
    p = cli("bench", "zoo:nope", "--debug")
    assert p.returncode == 2 and "Traceback" in p.stderr and "unknown zoo model" in p.stderr


def test_taskset_one_cpu_records_one_effective_cpu(tmp_path):
    import shutil

    cpu = str(sorted(os.sched_getaffinity(0))[-1])
    out = tmp_path / "r.json"
    argv = [sys.executable, "-m", "inferperf", "bench", "zoo:squeezenet", *FAST, "-o", str(out)]
    if shutil.which("taskset"):
        argv = ["taskset", "-c", cpu, *argv]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    else:  # same effect without util-linux: the child inherits the parent's affinity
        p = subprocess.run(argv, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                           preexec_fn=lambda: os.sched_setaffinity(0, {int(cpu)}))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["system"]["effective_cpus"] == 1 and doc["system"]["cpu_affinity"] == [int(cpu)]
    assert doc["config"]["session"]["effective"]["intra_op_num_threads"] == 1


def test_concurrency_repeat_cli_reports_ci_and_inventory(tmp_path):
    p = cli("bench", "zoo:tiny-cnn", "--concurrency", "2", "--intra-op-num-threads", "1", "--repeat", "3",
            "--warmup", "2", "--iterations", "20", "--duration-s", "0.2", "-o", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "95 % CI" in p.stdout and "3 fresh worker processes" in p.stdout and "physical" in p.stdout
    assert len(list((tmp_path / "runs").glob("*.json"))) == 3  # each run kept as it finished
    assert p.stderr.count("run ") >= 3


def test_batch_size_on_resnet50_refused_naming_reshape():
    p = cli("bench", "zoo:resnet50", "--batch-size", "4", *FAST)
    assert p.returncode == 2 and "Reshape node 'n173'" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_sigterm_reaps_workers(tmp_path):
    """SIGTERM to the CLI during --repeat kills and reaps the running worker; no orphan keeps measuring."""
    import signal
    import time

    import psutil

    p = subprocess.Popen([sys.executable, "-m", "inferperf", "bench", "zoo:tiny-cnn", "--repeat", "3",
                          "--duration-s", "20", "--max-duration-s", "30"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    parent = psutil.Process(p.pid)
    deadline = time.monotonic() + 60
    workers = []
    while time.monotonic() < deadline and not workers:
        workers = [c for c in parent.children(recursive=True) if "inferperf.measure.worker" in " ".join(c.cmdline())]
        time.sleep(0.2)
    assert workers, "no worker started"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143 and "interrupted" in err  # 128 + SIGTERM
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive


@pytest.mark.parametrize("extra", [["--concurrency", "2"], ["--scenario", "offline", "--batch-size", "2"], [],
                                   ["--backend", "openvino", "--concurrency", "2"]],
                         ids=["concurrent", "offline", "single-stream", "openvino-async-executor"])
def test_sigterm_during_warmup_ends_promptly(extra):
    """SIGTERM while warming up ends every scenario with exit 143, long before its 120 s warm-up would (issue 10
    item 5: a concurrent run used to hang with its threads parked at the start barrier). The wait is 30 s, a
    quarter of the warm-up, not a few seconds a loaded machine may need just to unwind."""
    import signal
    import time

    import psutil

    runtime = "openvino" if "openvino" in extra else "onnxruntime"
    pytest.importorskip(runtime)
    p = subprocess.Popen([sys.executable, "-m", "inferperf", "bench", "zoo:tiny-cnn", *extra, "--warmup-s", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    proc = psutil.Process(p.pid)
    deadline = time.monotonic() + 60
    # the runtime is loaded (the SIGTERM handler is in place); 2 s later the tiny model is warming up
    while time.monotonic() < deadline:
        try:
            if any(runtime in m.path for m in proc.memory_maps()):
                break
        except psutil.Error:
            pass
        time.sleep(0.2)
    time.sleep(2.0)
    assert p.poll() is None, p.communicate()[1]
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("still running 30 s after SIGTERM (its warm-up lasts 120 s)")
    assert p.returncode == 143 and "interrupted" in err


def test_worker_bug_is_an_internal_error_with_its_traceback_under_debug(tmp_path):
    """A bug inside a worker (planted through sitecustomize) is an internal error, not a runtime failure; --debug
    prints the worker's own traceback (issue 10 item 6)."""
    from tests.integration.test_repeats import planted_bug_env

    env = planted_bug_env(tmp_path / "site")
    p = cli("bench", "zoo:tiny-cnn", *FAST, "--repeat", "2", env=env)
    assert p.returncode == 1
    assert p.stderr.strip() == "error: internal error KeyError: 'planted bug' (rerun with --debug and report it)"
    p = cli("bench", "zoo:tiny-cnn", *FAST, "--repeat", "2", "--debug", env=env)
    assert p.returncode == 1 and "internal error KeyError" in p.stderr
    assert "WorkerTraceback" in p.stderr and "in planted_bug" in p.stderr and "in run_once" in p.stderr


def test_offline_prints_the_batch1_reference(tmp_path):
    """Offline bench runs a batch-1 reference on the same session and prints the per-sample ratio (issue 10
    item 10); the Result records it under metrics.throughput.batch1_reference."""
    out = tmp_path / "r.json"
    p = cli("bench", "zoo:tiny-cnn", "--scenario", "offline", "--batch-size", "4", *FAST, "-o", str(out))
    assert p.returncode == 0, p.stderr
    ref = json.loads(out.read_text())["metrics"]["throughput"]["batch1_reference"]
    assert 1 <= ref["queries"] <= 50 and ref["samples_per_s"] > 0 and ref["per_sample_ratio"] > 0
    assert "batch-1 reference" in p.stdout and "the samples/s of batch 1" in p.stdout
