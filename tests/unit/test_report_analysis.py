"""Spike detection, steady-state detection, memory growth and capacity planning (pure functions); the report's
choices (no winner inside the noise or from too few runs, never across workloads) and its chart specs."""

from __future__ import annotations

import numpy as np
import pytest

from inferperf.analysis.choose import choose
from inferperf.analysis.spikes import find_spikes, spike_threshold_ns
from inferperf.analysis.steady import memory_growth, steady_state
from inferperf.report import charts as ch
from inferperf.report.insights import CaseAnalysis, bottlenecks, recommendations, summary
from tests.unit.test_analysis import synthetic


def _clean(n: int = 2000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (1_000_000 * (1.0 + 0.05 * rng.standard_normal(n))).astype(np.int64)  # 1 ms +- 5 %


def test_planted_every_20th_query_spike_is_found_with_its_period():
    lat = _clean()
    lat[19::20] = 5_000_000
    starts = np.cumsum(lat) - lat
    s = find_spikes(lat, starts)
    assert s.count == len(lat[19::20]) == 100
    assert s.share == pytest.approx(0.05)
    assert s.period_queries == 20
    assert s.period_share == 1.0
    assert s.max_ms == pytest.approx(5.0)
    assert s.indices[:3] == [19, 39, 59]
    assert s.period_s is not None and s.period_s == pytest.approx(20 * 1.2e-3, rel=0.1)


def test_clean_data_has_no_spikes():
    for seed in range(5):
        s = find_spikes(_clean(seed=seed))
        assert s.count == 0 and s.period_queries is None and s.indices == []


def test_random_spikes_have_no_period():
    lat = _clean(seed=1)
    rng = np.random.default_rng(7)
    at = np.sort(rng.choice(len(lat), 40, replace=False))
    lat[at] = 6_000_000
    s = find_spikes(lat)
    assert s.count == 40
    assert s.period_queries is None


def test_period_is_found_per_sequence_not_across_runs():
    one = _clean(500)
    one[9::10] = 4_000_000
    two = _clean(500, seed=3)
    two[4::10] = 4_000_000  # same period, other phase: joined end to end the gaps would break
    lat = np.concatenate([one, two])
    runs = np.repeat([0, 1], 500)
    assert find_spikes(lat, None, runs).period_queries == 10


def test_spike_threshold_is_at_least_twice_the_median():
    assert spike_threshold_ns([100, 100, 100, 100]) == 200.0
    with pytest.raises(ValueError):
        find_spikes([])


def test_steady_state_finds_the_end_of_a_slow_start():
    lat = np.concatenate([np.full(300, 3_000_000), _clean(1700)])
    st = steady_state(lat, warmup_given=100)
    assert st.settled
    assert 300 <= st.end_index <= 300 + st.block
    assert st.measured_unsettled == st.end_index - 100
    assert st.advice_warmup_queries == 500
    assert st.first_median_ms == pytest.approx(3.0)


def test_steady_state_of_a_flat_sequence_starts_at_zero():
    st = steady_state(_clean(), warmup_given=10)
    assert st.settled and st.end_index == 0 and st.measured_unsettled == 0 and st.advice_warmup_queries is None


def test_memory_growth_needs_a_long_enough_run():
    t = np.arange(0, 60, 0.1)
    growing = 100 * 2**20 + t * 4 * 2**20
    m = memory_growth(t, growing)
    assert m is not None and m.growing and m.slope_bytes_per_s == pytest.approx(4 * 2**20)
    assert not memory_growth(t[:20], growing[:20]).growing  # 2 s: arenas filling, not a leak
    assert not memory_growth(t, np.full(t.size, 100 * 2**20)).growing
    assert memory_growth([0.1, 0.2], [1, 2]) is None


def case(threads=1, qps=100.0, ci=(95.0, 105.0), runs=3, side=224, valid=True, marks=(), p99=10.0,
         p99_runs=(9.0, 11.0), cpus=2):
    """A CaseAnalysis over a real Result (null backend, fake clock) with its figures set by hand."""
    r = synthetic(threads=threads, qps=qps, ci=ci, p50=p99 / 2, shape=(1, 3, side, side), key=f"k{side}-{threads}",
                  runs=runs)
    r.kind = "sweep"
    r.system.effective_cpus = cpus
    r.metrics.latency_ms.p99 = p99
    n = 100 * runs  # per-run samples (runs of 100 queries) whose p99s span p99_runs
    lat = []
    lo, hi = p99_runs
    for k in range(runs):
        v = lo + (hi - lo) * k / max(1, runs - 1)
        lat += [int(v / 2 * 1e6)] * 99 + [int(v * 1e6)]
    r.samples.latency_ns = lat
    r.samples.run_ids = [k for k in range(runs) for _ in range(100)]
    r.samples.start_offsets_ns = list(range(n))
    r.samples.stream_ids = [0] * n
    r.validity.valid = valid
    r.validity.reasons = [] if valid else ["window medians vary"]
    r.run = {"marks": list(marks), "pids": list(range(runs))}
    return CaseAnalysis(f"det {side} t{threads}", "sweep", r)


def _kinds(items, kind):
    return [i for i in items if i["kind"] == kind]


def test_choose_names_a_winner_only_on_separate_intervals_from_three_runs():
    f = dict(value=lambda x: x[0], interval=lambda x: x[1], runs=lambda x: x[2], valid=lambda x: x[3])
    a, b = (100.0, [98, 102], 3, True), (90.0, [88, 92], 3, True)
    assert choose([a, b], **f).winner is a
    b2 = (99.0, [97, 101], 3, True)
    ch_ = choose([a, b2], **f)
    assert ch_.status == "within noise" and ch_.winner is None and ch_.tied == [a, b2]
    a2 = (100.0, [98, 102], 2, True)
    ch_ = choose([a2, b], **f)
    assert ch_.status == "too few runs" and ch_.min_runs == 2 and ch_.winner is None
    bad = (500.0, [499, 501], 3, False)
    ch_ = choose([bad, a, b], **f)
    assert ch_.winner is a and ch_.invalid == [bad]
    assert choose([bad], **f).status == "none valid"
    low = choose([a, b], **{**f, "valid": lambda x: True}, higher_is_better=False)
    assert low.winner is b


def test_overlapping_intervals_name_no_best_throughput():
    cs = [case(1, qps=100, ci=(90, 110)), case(2, qps=104, ci=(95, 113))]
    s = _kinds(summary(cs, [], [], [], []), "best-throughput")
    assert len(s) == 1 and s[0]["values"]["status"] == "within noise"
    assert s[0]["values"]["case_key"] is None and "no single winner" in s[0]["text"]
    assert "2 threads" in s[0]["text"] and "1 thread" in s[0]["text"]
    recs = recommendations(cs, [], None, [], [])
    assert not any("ship" in r["text"] for r in recs if r["kind"] == "throughput")


def test_two_runs_are_too_few_to_name_a_best():
    cs = [case(1, qps=100, ci=(99, 101), runs=2), case(2, qps=150, ci=(149, 151), runs=2)]
    s = _kinds(summary(cs, [], [], [], []), "best-throughput")[0]
    assert s["values"]["status"] == "too few runs" and "too few runs (2)" in s["text"]
    assert "--repeat 3" in s["text"] and s["values"]["case_key"] is None
    lat = _kinds(recommendations(cs, [], None, [], []), "latency")[0]
    assert "ship" not in lat["text"] and "too few runs (2)" in lat["text"]


def test_separate_intervals_from_three_runs_name_the_winner_and_skip_invalid():
    cs = [case(1, qps=100, ci=(98, 102), p99=20, p99_runs=(19, 21)),
          case(2, qps=150, ci=(147, 153), p99=12, p99_runs=(11.5, 12.5)),
          case(3, qps=400, ci=(390, 410), valid=False)]
    s = summary(cs, [], [], [], [])
    best = _kinds(s, "best-throughput")[0]
    assert best["values"]["status"] == "winner" and best["values"]["case_key"] == "k224-2"
    assert "INVALID, left out: det 224 t3" in best["text"]
    lat = _kinds(s, "best-latency")[0]
    assert lat["values"]["case_key"] == "k224-2"
    recs = recommendations(cs, [], None, [], [])
    assert "ship" in _kinds(recs, "throughput")[0]["text"] and "det 224 t2" in _kinds(recs, "throughput")[0]["text"]


def test_workloads_are_never_compared():
    small = [case(1, qps=100, ci=(98, 102), side=224), case(2, qps=150, ci=(147, 153), side=224)]
    big = [case(1, qps=12, ci=(11, 13), side=640), case(3, qps=6, ci=(5.5, 6.5), side=640, marks=["oversubscribed"])]
    cs = small + big
    s = summary(cs, [], [], [], [])
    best = _kinds(s, "best-throughput")
    assert [b["values"]["workload"] for b in best] == ["null null 1x3x224x224", "null null 1x3x640x640"]
    assert best[0]["values"]["case_key"] == "k224-2" and best[1]["values"]["case_key"] == "k640-1"
    over = _kinds(bottlenecks(cs, []), "oversubscription")
    assert len(over) == 1 and "null null 1x3x640x640" in over[0]["text"]
    assert "0.50x the best case of this workload that fits (det 640 t1" in over[0]["text"]
    assert "224" not in over[0]["text"].split("fits")[1]


def test_capacity_is_per_workload_and_only_for_a_given_target(tmp_path):
    from inferperf.report.build import ReportOptions, build
    from inferperf.results.io import save

    for k, c in enumerate([case(1, side=224), case(2, qps=150, ci=(147, 153), side=224), case(1, qps=12, ci=(11, 13), side=640)]):
        save(c.result, tmp_path / f"r{k}.json")
    rep = build([tmp_path])
    assert rep.capacity == []
    cap = _kinds(rep.recommendations, "capacity")
    assert len(cap) == 1 and "--target-qps" in cap[0]["text"] and "No capacity plan" in cap[0]["text"]
    rep = build([tmp_path], ReportOptions(target_qps=5000, slo_p99_ms=50))
    assert [c["workload"] for c in rep.capacity] == ["null 1x3x224x224", "null 1x3x640x640"]
    for c in rep.capacity:  # one workload each: every option's sources are that workload's Results
        srcs = {f for o in c["options"] for fs in o["measured_from"].values() for f in fs}
        assert srcs == ({str(tmp_path / "r0.json"), str(tmp_path / "r1.json")} if "224" in c["workload"]
                        else {str(tmp_path / "r2.json")})
    assert "--target-qps 5000 --slo-p99-ms 50" in rep.rebuild


def test_log_axis_labels_every_tick_with_its_full_number():
    ax = ch.log_axis(100, 300, "ms")
    assert ax["ticktext"] == ["100", "150", "200", "300"] and ax["tickvals"] == [100, 150, 200, 300]
    ax = ch.log_axis(0.04, 270, "ms")
    assert ax["ticktext"][:3] == ["0.02", "0.05", "0.1"] and "200" in ax["ticktext"] and "500" in ax["ticktext"]
    vals = [float(t.replace(",", "")) for t in ax["ticktext"]]
    assert vals == sorted(vals) and vals == ax["tickvals"]


def test_rss_chart_keeps_a_minimum_span_and_states_the_change_in_bytes():
    c = case(1)
    base = 150 * 2**20
    c.result.samples.timeline = {"t_s": [0.1 * i for i in range(20)], "rss_bytes": [base + 512 * i for i in range(20)]}
    chart = ch.rss_lines(["det"], [c.result])
    lo, hi = chart.figure["layout"]["yaxis"]["range"]
    assert (hi - lo) * 2**20 >= 0.10 * base  # 10 KiB of change is not stretched over the axis
    assert "det +9.5 KiB over 1.9 s" in chart.caption


def test_thread_chart_draws_only_fits_that_hold_and_one_panel_per_workload():
    from inferperf.analysis.points import group_by_axis, point

    falls = [case(t, qps=q, ci=(q - 1, q + 1), side=224) for t, q in ((1, 100), (2, 150), (3, 60), (4, 40))]
    rises = [case(t, qps=q, ci=(q - 1, q + 1), side=640) for t, q in ((1, 10), (2, 19), (3, 27), (4, 34))]
    pts = [point(c.result) for c in falls + rises]
    charts = ch.thread_scaling(group_by_axis(pts, "threads"), "0")
    thr = [c for c in charts if c.id.startswith("chart-threads")]
    assert len(thr) == 2 and [c.extra["workload"] for c in thr] == ["null null 1x3x224x224", "null null 1x3x640x640"]
    names = [[t["name"] for t in c.figure["data"]] for c in thr]
    assert not any(n.startswith("Amdahl") for n in names[0])  # throughput falls: Amdahl does not hold
    assert any(n.startswith("Amdahl") for n in names[1])


def test_method_table_reads_the_recorded_accuracy_inputs():
    from inferperf.report.sections import inputs_text

    r = case(1).result
    r.metrics.accuracy = {"reference": True, "n_inputs": 16, "data_source": "images:/data/receipts"}
    text = inputs_text(r)
    assert "images:/data/receipts (16 input(s))" in text and text.startswith("timed: synthetic")


def _runtime_entries(ort, ov, runs=3, valid=True):
    from pathlib import Path

    from inferperf.report.collect import Entry
    from inferperf.results.io import load

    rt = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "rt"
    out = []
    for f, (q, ci) in ((next(rt.glob("onnxruntime-*.json")), ort), (next(rt.glob("openvino-*.json")), ov)):
        r = load(f)
        tp = r.metrics.throughput
        tp.queries_per_s, tp.queries_per_s_ci95, tp.per_run = q, list(ci), [q] * runs
        r.validity.valid = valid
        out.append(Entry(r, f, "runtimes", "inferperf bench --backend onnxruntime,openvino"))
    return out


def test_runtime_choice_needs_separate_intervals_from_three_runs():
    from inferperf.report.comparisons import runtimes

    rec = runtimes(_runtime_entries((100, (98, 102)), (160, (155, 165))))[0][0]["recommendation"]
    assert "use openvino: 1.60x" in rec
    rec = runtimes(_runtime_entries((100, (90, 110)), (105, (95, 115))))[0][0]["recommendation"]
    assert "within noise" in rec and "intervals overlap" in rec
    rec = runtimes(_runtime_entries((100, (98, 102)), (160, (155, 165)), runs=2))[0][0]["recommendation"]
    assert "too few runs (2)" in rec and "use openvino" not in rec
    rec = runtimes(_runtime_entries((160, (155, 165)), (100, (98, 102))))[0][0]["recommendation"]
    assert "keep onnxruntime: it is the fastest, intervals separate" in rec
    rec = runtimes(_runtime_entries((160, (155, 165)), (100, (98, 102)), valid=False))[0][0]["recommendation"]
    assert "every Result is INVALID" in rec and "keep" not in rec


def test_oversubscription_is_measured_against_a_valid_case_of_its_workload():
    cs = [case(1, qps=300, ci=(290, 310), valid=False), case(2, qps=100, ci=(98, 102)),
          case(4, qps=50, ci=(48, 52), marks=["oversubscribed"])]
    over = _kinds(bottlenecks(cs, []), "oversubscription")[0]
    assert "0.50x the best case of this workload that fits (det 224 t2" in over["text"] and "CIs separate" in over["text"]
