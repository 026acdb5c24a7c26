"""Issue 24 item 11: the report's text and charts over wave-2 Results (load warm-up advice in seconds, the
roofline under its roof and bounded by the ridge point, bench and HTTP latencies told apart, pipeline spans
without drawn labels). Synthetic inputs; the all-kinds fixture is read in tests/integration/test_report_all_kinds.py."""

from __future__ import annotations

import re
from pathlib import Path

from inferperf.analysis.steady import SteadyState
from inferperf.report.build import build
from inferperf.report.charts import IN_PROCESS, TIMED_BY, latency_boxes
from inferperf.report.insights import CaseAnalysis, bottlenecks, recommendations
from inferperf.report.profile import profile_charts
from inferperf.results.io import load
from tests.unit.test_report_load import closed

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "report"


def _late(r, kind: str) -> CaseAnalysis:
    c = CaseAnalysis("case", kind, r)
    c.steady = SteadyState(settled=True, end_index=300, warmup_given=0, steady_median_ms=20.0, first_median_ms=40.0,
                           block=50, advice_warmup_queries=500, measured_unsettled=300)
    if kind == "load":
        c.extra["settle_s"] = 1.44
    return c


def test_load_warm_up_advice_is_in_seconds_never_warmup_queries() -> None:
    step = closed(4)
    step.config.warmup.duration_s = 0.5
    cases = [_late(step, "load")]
    recs = [r["text"] for r in recommendations(cases, [], None, [], []) if r["kind"] == "warm-up"]
    assert recs == ["Warm load steps up for at least 2 s (--warmup-s 2; load warms up by seconds, not by a query"
                    " count): shorter warm-ups let slow first requests into the measurement."], recs
    issue = next(i["text"] for i in bottlenecks(cases, []) if i["kind"] == "warm-up")
    assert "--warmup-s" in issue and not re.search(r"--warmup \d", issue) and "queries given" not in issue, issue
    bench = load(next((FIX / "sweep" / "cases").glob("*.json")))
    recs = [r["text"] for r in recommendations([_late(bench, "sweep")], [], None, [], []) if r["kind"] == "warm-up"]
    assert recs and "--warmup 500" in recs[0]  # in-process cases keep their query count


def _profile(attained: float, intensity: float, bound: str):
    r = load(next((FIX / "sweep" / "cases").glob("*.json")))
    r.kind = "profile"
    r.metrics.profile = {
        "ops": [{"op": "Conv", "mean_ms": 1.0, "amdahl_speedup": 2.0}], "outside_kernels_ms": 0.1, "runs": 5,
        "peaks": {"peak_flops_per_s": 100e9, "peak_bytes_per_s": 2e9},  # ridge 50 FLOP/B
        "roofline": [{"name": "n", "op": "Conv", "intensity": intensity, "attained_gflops_per_s": attained,
                      "bound": bound}, {"name": "m", "op": "Add", "intensity": 0.5, "attained_gflops_per_s": 0.5,
                                        "bound": "memory"}]}  # fmt: skip
    return r


class _E:
    def __init__(self, r):
        self.result = r


def test_roofline_points_stay_under_the_roof_bounds_by_the_ridge_and_ticks_read_in_order() -> None:
    # a node at 6.4 FLOP/B attaining 30 GFLOP/s: above the probed memory roof (6.4 x 2 = 12.8), and stored as
    # "compute-bound" although the ridge (50 FLOP/B) is far higher
    (chart,) = [c for c in profile_charts([_E(_profile(30.0, 6.4, "compute"))]) if "roofline" in c.id]
    roof, nodes = chart.figure["data"]
    for x, y in zip(nodes["x"], nodes["y"]):
        bw = roof["y"][0] / roof["x"][0]
        assert y <= min(roof["y"][1], x * bw) * (1 + 1e-9), (x, y, roof)
    assert "raised" in chart.caption
    assert chart.extra["bound"][0] == "memory" and "memory-bound" in nodes["text"][0]
    for axis in ("xaxis", "yaxis"):
        vals = chart.figure["layout"][axis]["tickvals"]
        labels = [float(t.replace(",", "")) for t in chart.figure["layout"][axis]["ticktext"]]
        assert labels == sorted(labels) and labels == vals  # never "100, 9, 8"


def test_bench_and_http_latencies_on_one_axis_say_which_is_which() -> None:
    bench = load(next((FIX / "sweep" / "cases").glob("*.json")))
    chart = latency_boxes(["bench case", "http step"], [bench, closed(2)])
    names = [t["name"] for t in chart.figure["data"]]
    assert names == [IN_PROCESS, TIMED_BY["load"]] and chart.figure["layout"]["showlegend"]
    assert "not the same quantity" in chart.caption


def test_pipeline_span_bars_carry_no_drawn_labels() -> None:
    rep = build([FIX / "all" / "pipeline"])
    (tl,) = [c for c in rep.charts if c.id.endswith("-timeline")]
    assert all(t.get("textposition") == "none" for t in tl.figure["data"])


def test_warm_up_text_counts_warm_up_that_ran_but_was_not_recorded() -> None:
    """A pipeline runs its --warmup items without keeping their latencies: the text must not say none were given."""
    r = load(next((FIX / "sweep" / "cases").glob("*.json")))
    r.config.warmup.iterations = 4
    c = _late(r, "pipeline")
    issue = next(i["text"] for i in bottlenecks([c], []) if i["kind"] == "warm-up")
    assert "4 warm-up items ran before them" in issue and "0 warm-up" not in issue, issue
