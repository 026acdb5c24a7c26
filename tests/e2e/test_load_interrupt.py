"""Nothing lost on interrupt (issue 23 item 7): ``inferperf load`` under SIGINT and SIGTERM, as a subprocess
against a real server on 127.0.0.1.

A soak interrupted after its third interval keeps every finished interval on disk (and the partial one, in a
Result marked interrupted), prints one line per interval and one line saying what was kept, and exits 130
(SIGINT) or 143 (SIGTERM) without asyncio noise; a three-step run interrupted during step 2 keeps step 1 and
step 2 marked interrupted, and says step 3 did not run.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferperf.config import BenchConfig
from inferperf.serve.server import serving
from tests.models import seeded_mlp_onnx

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``inferperf serve`` of the seeded MLP in this process on an ephemeral 127.0.0.1 port; stopped at the end."""
    mlp = seeded_mlp_onnx(tmp_path_factory.mktemp("mlp") / "mlp.onnx")
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    with serving(str(mlp), cfg, name="mlp") as handle:
        yield handle.url


def _start(args: list[str], group: bool = False) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "inferperf", "load", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=group)  # fmt: skip


def _until_line(p: subprocess.Popen, starts: str, deadline_s: float = 60.0) -> list[str]:
    """Read stdout lines (a reader thread: a pipe's buffered lines are never waited on) until one starts with
    ``starts`` after stripping, bounded by ``deadline_s``; the lines read."""
    if not hasattr(p, "lines"):
        p.lines = queue.Queue()  # type: ignore[attr-defined]
        threading.Thread(target=lambda: [p.lines.put(ln) for ln in iter(p.stdout.readline, "")] + [p.lines.put(None)],
                         daemon=True).start()  # fmt: skip
    lines: list[str] = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            line = p.lines.get(timeout=max(0.01, end - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        lines.append(line.rstrip("\n"))
        if line.strip().startswith(starts):
            return lines
    p.kill()
    pytest.fail(f"no line starting {starts!r} within {deadline_s:.0f} s: {lines}")


def _rest(p: subprocess.Popen) -> str:
    """What the reader thread collected after the last :func:`_until_line` (the process has ended)."""
    out = []
    while True:
        line = p.lines.get(timeout=10)
        if line is None:
            return "".join(out)
        out.append(line)


def _finish(p: subprocess.Popen, sig: int, group: bool = False) -> tuple[int, str, str]:
    if group:  # as a terminal's Ctrl-C: the whole process group (the load and its own server)
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    try:
        rc = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("still running 60 s after the signal")
    return rc, _rest(p), p.stderr.read()


def _results(folder: Path) -> list[dict]:
    docs = [json.loads(f.read_text()) for f in sorted(folder.glob("*.json")) if not f.name.endswith(".intervals.json")]
    return sorted(docs, key=lambda d: d["created_at"])


@pytest.mark.parametrize("sig,code,name", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_soak_interrupted_after_third_interval_keeps_them(server: str, tmp_path: Path, sig: int, code: int,
                                                          name: str) -> None:  # fmt: skip
    out = tmp_path / "out"
    p = _start([server, "--model", "mlp", "--concurrency", "1", "--soak-s", "120", "--soak-interval-s", "1",
                "--warmup-s", "0.2", "-o", str(out)])  # fmt: skip
    seen = _until_line(p, "interval 3/120")
    rc, rest, err = _finish(p, sig)
    assert rc == code, err
    lines = [ln for ln in seen + rest.splitlines() if ln.strip().startswith("interval ")]
    assert lines[0].split()[1] == "1/120" and "req/s" in lines[2] and "p99" in lines[2] and "RSS" in lines[2]
    assert "slope so far" in lines[-1]  # from the third RSS read on
    (log,) = out.glob("*.intervals.json")  # written as each interval ended
    assert len(json.loads(log.read_text())["intervals"]) >= 3
    (doc,) = _results(out)
    soak = doc["metrics"]["client"]["soak"]
    whole = [iv for iv in soak["intervals"] if not iv["partial"]]
    assert len(whole) >= 3 and len(whole) >= len(lines) - 1  # every interval printed is on disk
    assert all(iv["requests"] > 0 for iv in whole) and whole[-1]["rss_bytes"]
    assert doc["metrics"]["client"]["interrupted"] is True and doc["validity"]["valid"] is False
    assert any(f"interrupted ({name})" in r for r in doc["validity"]["reasons"])
    kept = [ln for ln in err.splitlines() if ln.startswith("interrupted")]
    assert kept == [kept[0]] and f"interrupted by {name} after {len(whole)} of 120 soak intervals" in kept[0]
    assert str(out) in kept[0]
    assert "Task was destroyed" not in err and "Traceback" not in err and "error:" not in err


def test_three_steps_interrupted_during_step_two(server: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = _start([server, "--model", "mlp", "--concurrency", "1,2,4", "--duration-s", "6", "--warmup-s", "0.2",
                "--measurement-interval-ms", "1000", "-o", str(out)])  # fmt: skip
    _until_line(p, "1 ")  # step 1's row: step 2 starts at once and measures for 6 s
    time.sleep(1.5)  # places the signal inside step 2 (nothing is asserted on time)
    rc, rest, err = _finish(p, signal.SIGTERM)
    assert rc == 143, err
    docs = _results(out)
    assert [d["config"]["concurrency"] for d in docs] == [1, 2]
    assert not docs[0]["metrics"]["client"].get("interrupted")
    assert docs[1]["metrics"]["client"]["interrupted"] is True and docs[1]["validity"]["valid"] is False
    assert docs[1]["metrics"]["latency_ms"]["count"] > 0  # its partial figures
    kept = [ln for ln in err.splitlines() if ln.startswith("interrupted")]
    assert kept == ["interrupted by SIGTERM: kept 1 finished step and the interrupted step 2 (INVALID, partial"
                    f" figures) in {out}; 1 step not run"]  # fmt: skip
    assert "Task was destroyed" not in err and "Traceback" not in err


def test_ctrl_c_to_the_group_keeps_the_own_servers_result(tmp_path: Path) -> None:
    """``load zoo:NAME`` starts its own server: a terminal's Ctrl-C reaches both; the server child ignores it,
    so the generator stops it gracefully and writes its Result (kind serve) beside the kept steps."""
    out = tmp_path / "out"
    p = _start(["zoo:tiny-cnn", "--concurrency", "1,2", "--duration-s", "6", "--warmup-s", "0.2", "-o", str(out)],
               group=True)  # fmt: skip
    _until_line(p, "1 ", deadline_s=120.0)
    time.sleep(1.5)  # places the signal inside step 2 (nothing is asserted on time)
    rc, _, err = _finish(p, signal.SIGINT, group=True)
    assert rc == 130, err
    kinds = sorted(d["kind"] for d in _results(out))
    assert kinds == ["load", "load", "serve"] and "server result written" in err
    assert "interrupted by SIGINT: kept 1 finished step and the interrupted step 2" in err


def test_sigterm_during_find_max_rate_is_quiet_and_keeps_the_steps(server: str, tmp_path: Path) -> None:
    """Issue 23 item 7: SIGTERM during --find-max-rate printed ~30 'Task was destroyed but it is pending!'."""
    out = tmp_path / "out"
    p = _start([server, "--model", "mlp", "--find-max-rate", "--slo-p99-ms", "1000", "--request-rate", "200",
                "--warmup-s", "0.2", "-o", str(out)])  # fmt: skip
    _until_line(p, "200 ")  # the first step's row: the drain, then the second step (400 req/s, 1,000 requests)
    time.sleep(1.0)
    rc, _, err = _finish(p, signal.SIGTERM)
    assert rc == 143, err
    docs = _results(out)  # step 1, and step 2 marked interrupted unless the signal came during the drain
    assert 1 <= len(docs) <= 2 and not docs[0]["metrics"]["client"].get("interrupted")
    assert docs[-1]["metrics"]["client"]["stress"]["stop_reason"] == "interrupted (SIGTERM)"
    assert "Task was destroyed" not in err and "Traceback" not in err and "error:" not in err
    assert [ln for ln in err.splitlines() if ln.startswith("interrupted by SIGTERM: kept")]
