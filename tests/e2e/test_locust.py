"""Locust drives ``inferperf serve`` and its CSVs import as Results (issue 13, item 9).

- ``inferperf load --from-locust-csv PREFIX``: the real fixtures in tests/fixtures/locust/ -> Results that
  ``inferperf report`` reads; missing files / no TARGET rules are one line, exit 2.
- A headless Locust run (``src/inferperf/loadgen/locust.py``) from the venv made by
  ``scripts/install_locust.sh`` (``.ci/run`` calls it) against ``inferperf serve zoo:tiny-cnn`` on a free
  127.0.0.1 port, always stopped in teardown. Locust runs only as a subprocess: gevent's monkey-patching
  never loads into pytest. Without the venv it skips with a reason (a failure under ``CI=true``).
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


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``inferperf serve zoo:tiny-cnn`` on a free 127.0.0.1 port; SIGTERM then SIGKILL in teardown."""
    if not LOCUST.exists():
        pytest.skip(f"no Locust venv at {VENV}: run `bash scripts/install_locust.sh`")
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "INFERPERF_CACHE_DIR": str(tmp_path_factory.mktemp("zoo"))}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "inferperf", "serve", "zoo:tiny-cnn", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + READY_DEADLINE_S
        while not _ready(f"http://127.0.0.1:{port}/v2/health/ready"):
            assert proc.poll() is None, f"inferperf serve exited {proc.returncode}: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"not ready in {READY_DEADLINE_S} s: {log.read_text()[-2000:]}"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def test_headless_locust_run_imports_with_its_request_count(server: str, tmp_path: Path) -> None:
    prefix = tmp_path / "run"
    p = subprocess.run([str(LOCUST), "-f", "src/inferperf/loadgen/locust.py", "--headless", "-u", "2", "-r", "2",
                        "-t", "4s", "--host", server, "--csv", str(prefix), "--only-summary"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
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
