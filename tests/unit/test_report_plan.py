"""report over a plan Result: the p99-vs-rate chart per option with the SLO line, a summary line, no case row."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferperf.plan import PlanOptions, plan
from inferperf.report.build import ReportOptions, build
from tests.plan_results import base_result, write_ladder


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report-plan")
    measured = write_ladder(base_result(root), root / "measured")
    plan("mlp", PlanOptions(1500.0, 20.0, requests=3000, rounds=2), root / "plan", [str(measured)])
    return root


def test_a_plan_is_drawn_as_predicted_p99_vs_rate_with_the_slo_line(folder: Path) -> None:
    rep = build([folder])
    (chart,) = [c for c in rep.charts if c.group == "plan"]
    fig = chart.figure
    assert fig["layout"]["title"]["text"] == "Plan for mlp: predicted p99 vs offered rate"  # short: never clipped
    assert "not validated" in chart.caption
    x, y = fig["layout"]["xaxis"], fig["layout"]["yaxis"]
    assert x["title"]["text"].startswith("offered rate") and y["title"]["text"].startswith("p99 latency (ms")
    assert y["type"] == "log" and y["ticktext"] and all(float(t.replace(",", "")) == v
                                                        for t, v in zip(y["ticktext"], y["tickvals"]))
    slo = [s for s in fig["layout"]["shapes"] if s.get("xref") == "paper"]
    assert slo and slo[0]["y0"] == 20.0
    planned = [s for s in fig["layout"]["shapes"] if s.get("yref") == "paper"]
    assert planned and planned[0]["x0"] == 1500.0
    assert fig["data"][0]["name"].endswith("(chosen)") and fig["data"][0]["x"]
    past = [d for d in fig["data"] if "past saturation" in d["name"]]
    assert past and max(past[0]["y"]) <= 10 ** fig["layout"]["yaxis"]["range"][1]  # on the roof, not off the chart
    assert any(s["kind"] == "plan" and "replica(s)" in s["text"] and "not validated" in s["text"] for s in rep.summary)
    assert all(r["kind"] != "plan" for r in rep.rows) and len(rep.rows) == 2  # the two measured Results only
    (cap,) = [r for r in rep.recommendations if r["kind"] == "capacity"]  # not "none was asked for"
    assert cap["text"].startswith("Fleet (inferperf plan): plan for mlp")


def test_a_folder_holding_only_a_plan_still_reports(folder: Path) -> None:
    rep = build([folder / "plan" / "plan.json"])
    assert rep.rows == [] and [c.group for c in rep.charts] == ["plan"]


def test_validation_points_are_drawn_on_the_chosen_fleets_axis(folder: Path, tmp_path: Path) -> None:
    from inferperf.results.io import load, save

    r = load(folder / "plan" / "plan.json")
    doc = r.metrics.plan
    reps = doc["options"][0]["replicas"]
    p99 = {"predicted": 5.0, "measured": [4.0, 6.0, 9.0], "interval": [4.0, 9.0], "widened": [3.4, 10.35],
           "tolerance": 0.15, "error": -0.17, "right": True}
    other = {**p99, "predicted": 1.0}
    doc["validation_points"] = {"points": [{"load": 0.5, "rate_per_s": 100.0, "rounds": 3, "right": True,
                                           "metrics": {"p99_ms": p99, "p50_ms": other, "throughput_per_s": other}}]}
    save(r, tmp_path / "plan.json")
    (chart,) = [c for c in build([tmp_path / "plan.json"]).charts if c.group == "plan"]
    (meas,) = [d for d in chart.figure["data"] if d["name"].startswith("measured p99")]
    assert meas["x"] == [100.0 * reps] and meas["y"] == [6.0]
    assert meas["error_y"]["arrayminus"] == [2.0] and meas["error_y"]["array"] == [3.0]
    (pred,) = [d for d in chart.figure["data"] if d["name"].startswith("predicted p99 at the validated")]
    assert pred["y"] == [5.0]
    (plain,) = [c for c in build([folder / "plan" / "plan.json"]).charts if c.group == "plan"]
    assert not [d for d in plain.figure["data"] if d["name"].startswith("measured p99")]


def test_one_capacity_answer_the_plans_and_the_same_model_without_a_plan(folder: Path) -> None:
    """Issue 36 item 8: report --target-qps over a plan folder gave two answers for one rate (the fixed-headroom
    rule's cores beside the plan's fleet). With a plan Result the plan answers alone; without one the report sizes
    the fleet with the plan's own search and gets the plan's answer from the same Results."""
    from inferperf.results.io import load

    doc = load(folder / "plan" / "plan.json").metrics.plan
    chosen = doc["options"][doc["chosen"]]
    rep = build([folder], ReportOptions(target_qps=1500.0, slo_p99_ms=20.0))
    assert rep.capacity == []
    caps = [r["text"] for r in rep.recommendations if r["kind"] == "capacity"]
    assert caps and all(t.startswith("Fleet (inferperf plan): ") for t in caps)
    alone = build([folder / "measured"], ReportOptions(target_qps=1500.0, slo_p99_ms=20.0))
    (table,) = alone.capacity
    first = table["options"][0]
    assert first["chosen"] and (first["label"], first["replicas"], first["cores"]) == (
        chosen["label"], chosen["replicas"], chosen["cores"])
    (rec,) = [r for r in alone.recommendations if r["kind"] == "capacity"]
    assert f"deploy {chosen['replicas']} replica(s) of {chosen['label']}" in rec["text"]
    assert rec["values"]["cores"] == chosen["cores"] and "not validated" in rec["text"]


def test_an_invalid_plan_says_so_first_in_the_report(folder: Path, tmp_path: Path) -> None:
    from inferperf.results.io import load, save

    r = load(folder / "plan" / "plan.json")
    r.metrics.plan["valid"] = False
    r.metrics.plan["invalid_reasons"] = ["the measured runs disagree beyond 10 %: batch 1 p50 1-1.4 ms over 2 runs (40 %)"]
    save(r, tmp_path / "plan.json")
    rep = build([tmp_path / "plan.json"])
    (line,) = [s["text"] for s in rep.summary if s["kind"] == "plan"]
    assert line.startswith("INVALID (the measured runs disagree beyond 10 %: batch 1 p50 1-1.4 ms over 2 runs (40 %)): "
                           "plan for mlp")
