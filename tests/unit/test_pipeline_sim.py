"""Pipeline analysis on the simulated executor (virtual time, fixed service times): exact, no clock read."""

from __future__ import annotations

import pytest

from inferperf.policy import arrivals
from inferperf.pipeline import analysis as an
from inferperf.pipeline.simulate import fixed, replay, simulate

MS = 1_000_000


def figures(tr):
    return {n: an.stage_figures(tr, i) for i, n in enumerate(tr.stages)}


def rate(tr):
    return len(tr.completed()) / (tr.window_ns / 1e9)


def test_bottleneck_is_the_slow_stage_and_throughput_is_its_rate():
    tr = simulate(["pre", "model", "post"], [1, 1, 1], fixed([5 * MS, 20 * MS, 3 * MS]), sizes=[4, 4, 4],
                  items=400, concurrency=8)
    st = figures(tr)
    name, why = an.bottleneck(st)
    assert name == "model" and "busy" in why
    assert rate(tr) == pytest.approx(50.0, rel=0.03)  # 1 / 20 ms
    assert st["model"]["utilisation"] > 0.97
    assert st["pre"]["utilisation"] == pytest.approx(0.25, abs=0.02)


def test_occupancy_grows_before_the_slow_stage_and_stays_near_zero_after_it():
    tr = simulate(["a", "slow", "c"], [1, 1, 1], fixed([2 * MS, 10 * MS, 2 * MS]), sizes=[8, 8, 8], items=300,
                  concurrency=16)
    st = figures(tr)
    assert st["slow"]["queue"]["mean"] > 6  # the queue in front of it fills
    assert st["slow"]["queue"]["share_full"] > 0.8
    assert st["c"]["queue"]["max"] <= 1 and st["c"]["queue"]["mean"] < 0.05
    assert st["c"]["starved_share"] > 0.75  # waits for the slow stage
    assert st["a"]["blocked_share"] > 0.5  # back-pressure: the full queue holds it
    assert st["slow"]["queue"]["t_s"] and max(st["slow"]["queue"]["depth"]) == 8


def test_two_workers_double_the_stage_rate():
    one = simulate(["a", "b", "c"], [1, 1, 1], fixed([4 * MS, 20 * MS, 4 * MS]), sizes=[4] * 3, items=400,
                   concurrency=12)
    two = simulate(["a", "b", "c"], [1, 2, 1], fixed([4 * MS, 20 * MS, 4 * MS]), sizes=[4] * 3, items=400,
                   concurrency=12)
    assert rate(two) / rate(one) == pytest.approx(2.0, rel=0.03)
    assert figures(two)["b"]["capacity_items_per_s"] == pytest.approx(100.0, rel=0.01)


def test_no_stage_is_named_when_none_is_half_busy():
    tr = simulate(["a", "b"], [1, 1], fixed([2 * MS, 8 * MS]), sizes=[4, 4], items=200,
                  schedule=arrivals.constant(40))  # b is 32 % busy
    name, why = an.bottleneck(figures(tr))
    assert name is None and "source limits" in why
    assert rate(tr) == pytest.approx(40.0, rel=0.03)


def test_reject_policy_fails_items_at_once_and_counts_them():
    tr = simulate(["a", "b"], [1, 1], fixed([1 * MS, 20 * MS]), sizes=[4, 2], policies=["block", "reject"],
                  items=200, schedule=arrivals.constant(200))
    st = figures(tr)
    rejected = sum(1 for r in tr.items if r.rejected == "b")
    assert st["b"]["rejected"] == rejected > 100
    assert len(tr.completed()) + rejected == 200
    assert st["b"]["queue"]["max"] <= 2


def test_block_policy_keeps_memory_flat_and_loses_nothing():
    tr = simulate(["a", "b"], [1, 1], fixed([1 * MS, 10 * MS]), sizes=[3, 3], items=200, concurrency=50)
    st = figures(tr)
    assert len(tr.completed()) == 200
    assert st["b"]["queue"]["max"] <= 3 and st["a"]["queue"]["max"] <= 3


def test_twice_as_fast_estimate_names_the_next_limit():
    tr = simulate(["a", "b", "c"], [1, 1, 1], fixed([8 * MS, 20 * MS, 4 * MS]), sizes=[4] * 3, items=300,
                  concurrency=12)
    st = figures(tr)
    est = an.what_if_faster(st, "b", cpus=64, cpu_s_per_item=None, concurrency=12, rate=None)
    assert est["items_per_s"] == pytest.approx(100.0, rel=0.02) and est["limited_by"] == "stage 'b'"
    est3 = an.what_if_faster(st, "b", cpus=64, cpu_s_per_item=None, concurrency=12, rate=None, factor=4)
    assert est3["items_per_s"] == pytest.approx(125.0, rel=0.02) and est3["limited_by"] == "stage 'a'"
    # the estimate checked by simulating it
    faster = simulate(["a", "b", "c"], [1, 1, 1], fixed([8 * MS, 5 * MS, 4 * MS]), sizes=[4] * 3, items=300,
                      concurrency=12)
    assert rate(faster) == pytest.approx(est3["items_per_s"], rel=0.03)
    cpu = an.what_if_faster(st, "b", cpus=1, cpu_s_per_item=0.032, concurrency=None, rate=None)
    assert cpu["limited_by"] == "the CPUs" and cpu["items_per_s"] == pytest.approx(1 / 0.022, rel=0.01)


def test_buffer_rule_and_advice():
    tr = simulate(["a", "b", "c"], [1, 1, 1], fixed([2 * MS, 10 * MS, 9 * MS]), sizes=[4, 6, 6], items=200,
                  concurrency=10)
    adv = an.buffer_advice(figures(tr))
    assert adv["b"]["rule_size"] == 3  # ceil(8 / 10) + 2
    assert adv["c"]["rule_size"] == 3  # ceil(1 / 10) + 2
    assert adv["b"]["latency_gap_ms"] == pytest.approx(8.0)
    assert "full" in adv["b"]["advice"]
    assert adv["c"]["needed_max"] <= 1 and "holds the same" in adv["c"]["advice"]


def test_worker_advice_balances_on_the_cpus_and_the_simulation_confirms_it():
    service = {"a": 0.005, "b": 0.020, "c": 0.010}
    adv = an.worker_advice(service, {"a": 1.0, "b": 1.0, "c": 1.0}, cpus=7)  # 35 ms of CPU per item / 7 = 5 ms
    assert adv["workers"] == {"a": 1, "b": 4, "c": 2}
    assert adv["cycle_ms"] == pytest.approx(5.0)
    tr = simulate(["a", "b", "c"], [1, 4, 2], fixed([5 * MS, 20 * MS, 10 * MS]), sizes=[4] * 3, items=400,
                  concurrency=16)
    assert rate(tr) == pytest.approx(adv["items_per_s"], rel=0.03)
    tight = an.worker_advice(service, {"a": 1.0, "b": 1.0, "c": 1.0}, cpus=2)
    assert tight["limited_by"] == "the CPUs" and tight["cycle_ms"] == pytest.approx(17.5)
    io_bound = an.worker_advice({"a": 0.001, "io": 0.050}, {"a": 1.0, "io": 0.05}, cpus=2)
    assert io_bound["workers"]["io"] > 2  # waiting stages may have more workers than CPUs


def test_replay_reuses_measured_service_times():
    tr = simulate(["a", "b"], [1, 1], fixed([3 * MS, 7 * MS]), sizes=[4, 4], items=50, concurrency=4)
    again = simulate(["a", "b"], [1, 1], replay(tr), sizes=[4, 4], items=50, concurrency=4)
    assert rate(again) == pytest.approx(rate(tr), rel=1e-6)


def test_stage_times_and_waits_add_up_to_end_to_end():
    tr = simulate(["a", "b", "c"], [1, 1, 1], fixed([3 * MS, 9 * MS, 2 * MS]), sizes=[2, 2, 2], items=100,
                  concurrency=6)
    for r in tr.completed():
        parts = sum(r.out[s] - r.enq[s] for s in range(3)) + (r.enq[0] - r.intended_ns)
        assert parts == r.done_ns - r.intended_ns


def test_occupancy_is_time_weighted():
    occ = an.occupancy([(0, 1), (10, 1), (20, -1), (30, -1)], 0, 40)
    assert occ["mean"] == pytest.approx((1 * 10 + 2 * 10 + 1 * 10) / 40)
    assert occ["max"] == 2 and occ["share_empty"] == pytest.approx(0.25)


def test_closed_loop_source_waits_at_a_full_reject_queue_instead_of_spinning():
    tr = simulate(["a"], [1], fixed([5 * MS]), sizes=[1], policies=["reject"], items=50, concurrency=8)
    assert not any(r.rejected for r in tr.items) and len(tr.completed()) == 50
