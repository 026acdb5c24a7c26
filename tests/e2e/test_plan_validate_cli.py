"""``inferperf plan --validate`` for real, as a subprocess: a tiny generated model measured, planned, served and
loaded at 50/70/85 % of one replica's predicted capacity in very short runs. Asserts the structure (table,
points, stored validation a later plan shows), never speeds: this machine's figures are whatever they are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferperf.results.io import load
from tests.models import seeded_mlp_onnx


def _plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferperf", "plan", *args], capture_output=True, text=True,
                          timeout=400, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip


@pytest.mark.slow
def test_validate_prints_predicted_vs_measured_at_three_loads_and_a_later_plan_shows_the_error(tmp_path: Path) -> None:
    model = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    out = tmp_path / "plan"
    p = _plan(str(model), "--target-rate", "20", "--slo-p99-ms", "500", "--batch-sizes", "1,2", "--instances", "1",
              "--measure-duration-s", "0.3", "--validate", "--validate-rounds", "3", "--validate-step-s", "0.3",
              "--sim-requests", "1000", "--rounds", "2", "-o", str(out))
    doc = load(out / "plan.json").metrics.plan
    s = doc["validation_points"]["summary"]
    wrong = s["right"] < s["points"]  # this machine's figures are whatever they are; the verdict must follow them
    assert p.returncode == (3 if wrong else 0), p.stderr
    if wrong:
        assert p.stderr.strip().splitlines()[-1].startswith("error: validation found the prediction wrong: ")
        assert p.stdout.startswith("INVALID: the prediction was found wrong by validation")
        assert doc["validation"].startswith("PREDICTION WRONG on this machine")
    else:
        assert doc["validation"].startswith("validation error last measured")
    lines = [ln for ln in p.stdout.splitlines() if not ln.startswith("INVALID: ")]
    head = next(i for i, ln in enumerate(lines) if ln.startswith("validation: one replica served for real"))
    assert "3 round(s) of 0.3 s per load" in lines[head]
    rows = lines[head + 2:head + 5]
    assert [r.split(" (")[0].strip() for r in rows] == ["50 %", "70 %", "85 %"]
    assert all("throughput " in r and "p50 " in r and "p99 " in r for r in rows)
    assert lines[head + 5].strip().split(" loads right")[0].endswith("of 3")
    assert f"[predicted, {doc['validation']}]" in lines[0]
    v = doc["validation_points"]
    assert [pt["load"] for pt in v["points"]] == [0.5, 0.7, 0.85]
    assert all(pt["rounds"] == 3 and set(pt["metrics"]) == {"throughput_per_s", "p50_ms", "p99_ms"}
               for pt in v["points"])
    assert v["placement"]["disjoint"] == (len(os.sched_getaffinity(0)) > 1)
    # issue 39 item 4: the client's share measured before the rounds; latencies judged as the client sees them
    share = v["client_share_ms"]
    assert share is not None and 0 < share < 5, share
    assert f"the server's predicted + {share:.3g} ms client's share" in lines[head + 1]
    for pt in v["points"]:
        assert pt["metrics"]["p50_ms"]["predicted"] == pytest.approx(pt["predicted_server"]["p50_ms"] + share)
    chosen = doc["options"][0]["at_planned_rate"]
    assert chosen["latency_ms_client"]["p99"] == pytest.approx(chosen["latency_ms"]["p99"] + share)
    assert doc["client_share"] == {"ms": share, "source": "validation, one closed-loop stream"}
    assert "as a client on the replica's machine sees it: p50 " in p.stdout
    assert Path(v["store"]).is_file()
    again = _plan(str(model), "--target-rate", "20", "--slo-p99-ms", "500", "--from", str(out / "measured"),
                  "--sim-requests", "1000", "--rounds", "2", "-o", str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr  # nothing judged in this run: INVALID alone exits 0
    assert "validation: one replica" not in again.stdout
    shown = again.stdout.splitlines()
    assert shown[0].startswith("INVALID: the prediction was found wrong") == wrong  # the stored error comes first
    assert shown[1 if wrong else 0].endswith(f"[predicted, {doc['validation']}]")
