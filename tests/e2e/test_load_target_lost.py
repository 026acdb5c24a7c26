"""``inferperf load`` against an ``inferperf serve`` subprocess killed (SIGKILL) during step 2 (issue 23 item 1):
the step ends at once, later steps are skipped, the Results so far are written, exit 1 with one plain line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from inferperf.results.io import load as load_result
from tests.e2e.test_serve_cli import _banner, _start, _url
from tests.models import seeded_mlp_onnx

DURATION_S = 6.0


def _served(url: str) -> int:
    doc = httpx.get(f"{url}/v2/models/mlp/stats", timeout=5.0).json()
    return int(doc["model_stats"][0]["inference_stats"]["success"]["count"])


def _first_row(proc: subprocess.Popen) -> list[str]:
    """stdout lines up to the first step's table row (printed when step 1 ends, so step 2 has begun). Blocking
    reads, bounded: the load process ends (EOF) after its steps even if nothing is killed."""
    assert proc.stdout is not None
    lines: list[str] = []
    for line in iter(proc.stdout.readline, ""):
        lines.append(line)
        if line.split()[:1] in (["1"], ["20"]):
            return lines
    raise AssertionError(f"no first step row; got {lines!r}")


@pytest.mark.parametrize("steps", [["--concurrency", "1,2,4"], ["--request-rate", "20,40,80"]], ids=["closed", "open"])
def test_a_server_killed_during_step_2_ends_the_run_with_exit_1_and_keeps_steps_1_and_2(tmp_path: Path,
                                                                                        steps: list[str]) -> None:
    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    server = _start(str(mlp), "--port", "0", "--intra-op-num-threads", "1")
    out = tmp_path / "out"
    load = None
    try:
        url = _url(_banner(server))
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        load = subprocess.Popen([sys.executable, "-m", "inferperf", "load", url, "--model", "mlp", *steps,
                                 "--warmup-s", "0.3", "--duration-s", str(DURATION_S), "-o", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        _first_row(load)
        before = _served(url)
        end = time.monotonic() + 60.0
        while _served(url) < before + 20 and time.monotonic() < end:  # step 2's requests are being answered
            time.sleep(0.05)
        server.kill()  # SIGKILL: no goodbye, connections reset and then refused
        server.wait(10)
        rest, err = load.communicate(timeout=120)
    finally:
        for p in (server, load):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
    assert load.returncode == 1, err
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert errors[0].startswith("error: the target stopped answering during the step at ")
    assert "{" not in errors[0] and "2 step Result(s) kept, no later step run" in errors[0]
    results = sorted((load_result(p) for p in out.glob("*.json")), key=lambda r: r.created_at)
    assert len(results) == 2  # step 3 never ran
    first, second = sorted(results, key=lambda r: (r.config.concurrency, r.config.request_rate or 0))
    assert not (first.metrics.client or {}).get("target_lost")
    c = second.metrics.client
    assert c["target_lost"] and second.validity.verdict == "INVALID"
    assert second.validity.reasons[0].startswith("target lost: ")
    # the step ended when the target was lost: the reason is the driver's own (it stops the step at once), not
    # the after-the-fact 'last window completed no request' that a step which ran its whole duration gets
    assert c["lost_reason"].startswith(("could not connect for ", "every request failed for ")), c["lost_reason"]
