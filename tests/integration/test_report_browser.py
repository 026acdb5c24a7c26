"""The HTML report opens in headless Chromium (Debian's ``chromium``, installed by .ci/run) with every chart
drawn and no console error. Never downloads a browser; skipped only where chromium is missing (a failure
under CI=true)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from inferperf.report import build
from inferperf.report.render import write

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "report"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (apt-get install chromium; .ci/run installs it)")
    return exe


def test_report_renders_in_headless_chromium(tmp_path):
    exe = _chromium()
    page = write(build([FIX / "sweep", FIX / "opt", FIX / "rt"]), tmp_path / "report.html")
    with tempfile.TemporaryDirectory(prefix="inferperf-chromium-") as profile:
        proc = subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=20000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=180,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<div id="report-status"[^>]*>', proc.stdout)
    assert m, "no status element in the dumped DOM"
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(0)))
    assert attrs["done"] == "yes"
    assert attrs["errors"] == ""
    assert int(attrs["charts-expected"]) >= 5
    assert attrs["charts-drawn"] == attrs["charts-expected"]
    console_errors = [ln for ln in proc.stderr.splitlines() if "CONSOLE" in ln and ("Error" in ln or "Uncaught" in ln)]
    assert not console_errors, console_errors[:5]
    assert proc.stdout.count('class="main-svg"') >= int(attrs["charts-expected"])
