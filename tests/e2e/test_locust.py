"""Locust drives ``inferperf serve`` and its CSVs import as Results (issue 13, item 9).

- ``inferperf load --from-locust-csv PREFIX``: the real fixtures in tests/fixtures/locust/ -> Results that
  ``inferperf report`` reads; missing files / no TARGET rules are one line, exit 2.
- A headless Locust run (``src/inferperf/loadgen/locust.py``) from the venv made by
  ``scripts/install_locust.sh`` (``.ci/run`` calls it) against ``inferperf serve zoo:tiny-cnn`` on a free
  127.0.0.1 port, always stopped in teardown. Locust runs only as a subprocess: gevent's monkey-patching
  never loads into pytest. Without the venv it skips with a reason (a failure under ``CI=true``).
- Locust's master/worker mode (issue 23, item 10): a headless master and two workers on 127.0.0.1 against
  ``inferperf serve zoo:squeezenet`` (JSON payloads: the pool a worker builds is seconds of encoding, which
  once blocked gevent's loop in the first user's ``on_start`` until the master dropped the worker as missing
  and no request was made); the master's CSV imports with ``load --from-locust-csv`` into a Result with
  requests and no failure. Every process is stopped in teardown.

The locustfile is this checkout's ``src/inferperf/loadgen/locust.py`` and ``PYTHONPATH`` is this checkout's
``src`` (the venv's ``.pth`` points at the checkout that made it, which may be another worktree).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "locust"
VENV = Path(os.environ.get("INFERPERF_LOCUST_VENV", ROOT / ".venv-locust"))
LOCUST = VENV / "bin" / "locust"
READY_DEADLINE_S = 120.0


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "inferperf", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=180)  # fmt: skip


def test_from_locust_csv_writes_results_report_reads(tmp_path: Path) -> None:
    out = tmp_path / "res"
    p = _cli("load", "--from-locust-csv", str(FIXTURES / "tiny_binary"), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "/v2/models/tiny/infer" in p.stdout and "729" in p.stdout
    files = sorted(out.glob("*.json"))
    assert len(files) == 1
    doc = json.loads(files[0].read_text())
    assert doc["kind"] == "load" and doc["run"]["imported"] == "locust"
    assert doc["metrics"]["latency_ms"]["count"] == 729
    rep = _cli("report", str(out), "-o", str(tmp_path / "rep.html"))
    assert rep.returncode == 0, rep.stderr
    assert (tmp_path / "rep.html").stat().st_size > 0


@pytest.mark.parametrize("args", [
    ["--from-locust-csv", "tests/fixtures/locust/nope"],
    ["--from-locust-csv", "tests/fixtures/locust/tiny_binary", "http://127.0.0.1:1"],
    [],
])  # fmt: skip
def test_from_locust_csv_usage_errors_exit_2(args: list[str]) -> None:
    p = _cli("load", *args)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _locust_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 20 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _serve(model: str, tmp_path_factory: pytest.TempPathFactory, env: dict[str, str] | None = None) -> Iterator[str]:
    """``inferperf serve MODEL`` on a free 127.0.0.1 port until the generator is closed (then stopped)."""
    if not LOCUST.exists():
        pytest.skip(f"no Locust venv at {VENV}: run `bash scripts/install_locust.sh`")
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "inferperf", "serve", model, "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + READY_DEADLINE_S
        while not _ready(f"http://127.0.0.1:{port}/v2/health/ready"):
            assert proc.poll() is None, f"inferperf serve exited {proc.returncode}: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"not ready in {READY_DEADLINE_S} s: {log.read_text()[-2000:]}"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``inferperf serve zoo:tiny-cnn`` on a free 127.0.0.1 port; SIGTERM then SIGKILL in teardown."""
    yield from _serve("zoo:tiny-cnn", tmp_path_factory, {**os.environ,
                                                         "INFERPERF_CACHE_DIR": str(tmp_path_factory.mktemp("zoo"))})


@pytest.fixture(scope="module")
def squeezenet_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``inferperf serve zoo:squeezenet`` on a free 127.0.0.1 port; SIGTERM then SIGKILL in teardown."""
    yield from _serve("zoo:squeezenet", tmp_path_factory)


def test_headless_locust_run_imports_with_its_request_count(server: str, tmp_path: Path) -> None:
    prefix = tmp_path / "run"
    p = subprocess.run([str(LOCUST), "-f", "src/inferperf/loadgen/locust.py", "--headless", "-u", "2", "-r", "2",
                        "-t", "4s", "--host", server, "--csv", str(prefix), "--only-summary"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120, env=_locust_env())  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    from inferperf.loadgen.locust_import import locust_results, read_locust_csv

    data = read_locust_csv(prefix)
    agg = data.rows
    assert len(agg) == 1 and agg[0].failures == 0 and agg[0].count > 0
    (result,) = locust_results(prefix, command=["test"])
    assert result.kind == "load" and result.run["imported"] == "locust"
    assert result.metrics.latency_ms.count == agg[0].count
    assert result.metrics.errors.count == 0 and result.validity.valid
    assert "locust" not in sys.modules


def test_master_with_two_workers_makes_requests_that_import_as_a_result(squeezenet_server: str,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    """The master's CSV counts requests from both workers; ``load --from-locust-csv`` makes a Result of them."""
    port, prefix = _free_port(), tmp_path / "run"
    base = [str(LOCUST), "-f", "src/inferperf/loadgen/locust.py"]
    # 32 JSON bodies of 1x3x224x224: seconds of encoding per worker, well past the master's 3 missed heartbeats
    # when built in one go on gevent's loop; the run is long enough for the yielding build to finish first.
    settings = ["--host", squeezenet_server, "--model-name", "squeezenet", "--pool-size", "32"]
    logs = [tmp_path / f"{n}.log" for n in ("master", "worker1", "worker2")]
    procs: list[subprocess.Popen[str]] = []
    try:
        with logs[0].open("w") as out:
            procs.append(subprocess.Popen([*base, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                                           str(port), "--expect-workers", "2", "--headless", "-u", "4", "-r", "4",
                                           "-t", "30s", *settings, "--csv", str(prefix), "--only-summary"],
                                          stdout=out, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                          env=_locust_env()))  # fmt: skip
        for log in logs[1:]:
            with log.open("w") as out:
                procs.append(subprocess.Popen([*base, "--worker", "--master-host", "127.0.0.1", "--master-port",
                                               str(port), *settings], stdout=out, stderr=subprocess.STDOUT,
                                              text=True, cwd=ROOT, env=_locust_env()))  # fmt: skip
        rc = procs[0].wait(timeout=240)
        text = "\n".join(f"--- {log.name}\n{log.read_text()[-2500:]}" for log in logs)
        assert rc == 0, text
        assert "failed to send heartbeat" not in text and "missing" not in logs[0].read_text(), text
    finally:
        for proc in procs:
            _stop(proc)
    out = tmp_path / "res"
    p = _cli("load", "--from-locust-csv", str(prefix), "-o", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    (file,) = out.glob("*.json")
    doc = json.loads(file.read_text())
    assert doc["kind"] == "load" and doc["run"]["imported"] == "locust"
    assert doc["metrics"]["latency_ms"]["count"] > 0 and doc["metrics"]["errors"]["count"] == 0
    workers = [log.read_text() for log in logs[1:]]
    assert all("payload pool" in w for w in workers), workers  # each worker built its own pool
    # issue 41 item 7: the master's totals step at the workers' reports; no window is a report gap read as zero
    wins = doc["metrics"]["windows"]
    assert wins and all(w["count"] > 0 for w in wins), wins
    assert any("windows span report to report" in n for n in doc["notes"]), doc["notes"]
