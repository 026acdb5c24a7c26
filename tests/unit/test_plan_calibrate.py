"""The served replica's cost figures (issue 39 item 2): a step's per-request and per-call CPU and waits from two
reads, and the event loop's split into per-request and per-batch parts, on exact synthetic figures."""

from __future__ import annotations

import pytest

from inferperf.measure.threads import ThreadTimes as T
from inferperf.plan.calibrate import split_loop_cost, step_cost


def _stats(requests: int, rows: int, executions: int) -> dict:
    return {"inference_stats": {"success": {"count": requests, "ns": 0}}, "inference_count": rows,
            "execution_count": executions}


def test_a_step_puts_each_threads_time_on_its_role_per_request_and_per_call() -> None:
    before = {1: T(1, "inferperf-loop", 1_000, 0, 1), 2: T(2, "ip-inst-0", 0, 0, 0), 3: T(3, "ip-pool-0", 0, 0, 0),
              4: T(4, "inferperf", 50, 0, 1)}
    after = {1: T(1, "inferperf-loop", 1_000 + 300_000_000, 20_000_000, 9), 2: T(2, "ip-inst-0", 400_000_000, 10_000_000, 5),
             3: T(3, "ip-pool-0", 100_000_000, 0, 5), 4: T(4, "inferperf", 50, 0, 1)}
    s = step_cost(before, after, _stats(10, 10, 4), _stats(1010, 1010, 504), seconds=2.0, cores=2, rate_per_s=500.0)
    assert (s["requests"], s["rows"], s["executions"]) == (1000, 1000, 500)
    assert s["throughput_per_s"] == 500.0 and s["mean_batch_requests"] == 2.0
    assert s["loop_cpu_ms_per_request"] == pytest.approx(0.3) and s["loop_wait_ms_per_request"] == pytest.approx(0.02)
    assert s["call_cpu_ms"] == pytest.approx(1.0) and s["call_wait_ms"] == pytest.approx(0.02)
    # the utilisation law U = X x D, role by role: the loop's 0.15 of a core = 500/s x 0.3 ms
    assert s["utilisation"]["event-loop"] == pytest.approx(s["throughput_per_s"] * s["loop_cpu_ms_per_request"] / 1e3)
    assert s["replica_utilisation"] == pytest.approx(0.8e9 / (2.0 * 1e9 * 2))
    idle = step_cost(before, before, _stats(0, 0, 0), _stats(0, 0, 0), 1.0, 1, 10.0)
    assert idle["loop_cpu_ms_per_request"] is None and idle["call_cpu_ms"] is None
    with pytest.raises(ValueError):
        step_cost(before, after, _stats(0, 0, 0), _stats(1, 1, 1), 0.0, 1, 1.0)


def _step(requests: int, executions: int, loop_ms: float) -> dict:
    return {"requests": requests, "executions": executions,
            "roles": {"event-loop": {"cpu_ns": round(loop_ms * 1e6)}}}


def test_the_loop_cost_splits_per_request_and_per_batch_when_the_batches_differ() -> None:
    """0.2 ms a request + 0.5 ms a batch, at mean batches of 1 and 4 requests: the regression finds both."""
    steps = [_step(1000, 1000, 1000 * 0.2 + 1000 * 0.5), _step(2000, 500, 2000 * 0.2 + 500 * 0.5)]
    got = split_loop_cost(steps)
    assert got["method"] == "regression"
    assert got["per_request_ms"] == pytest.approx(0.2) and got["per_batch_ms"] == pytest.approx(0.5)


def test_the_loop_cost_is_per_request_only_when_the_batches_do_not_differ() -> None:
    """Batching off (one request a call at both loads): the parts cannot be told apart; the total per request."""
    got = split_loop_cost([_step(1000, 1000, 700.0), _step(2000, 2000, 1500.0)])
    assert got == {"per_request_ms": pytest.approx(2200 / 3000), "per_batch_ms": None, "method": "per request",
                   "steps": 2}
    with pytest.raises(ValueError):
        split_loop_cost([_step(0, 0, 0.0)])


def test_a_calibrated_loop_simulates_options_as_the_replica_runs(tmp_path) -> None:  # noqa: ANN001
    """A 1-core candidate of 1 ms calls with a calibrated loop of 0.3 ms a request (0.1 of it after the call):
    batching off carries 1 / 1.3 ms = 769/s, not the calls' 1,000/s, and is simulated with the loop and the call
    sharing the core; batching on too, at full batches (1 / (0.3 + 1.6 / 4) ms); an uncalibrated server time changes nothing."""
    from pathlib import Path

    from inferperf.analysis.candidates import Overhead, candidates
    from inferperf.analysis.fleet import PlanOptions, Simulator, options_for
    from inferperf.plan.calibrate import calibrated_overhead
    from tests.plan_results import base_result, measured

    base = base_result(tmp_path)
    rs = [(Path("b1.json"), measured(base, 1, 1, 1, 1.0, seed=1)), (Path("b4.json"), measured(base, 4, 1, 1, 1.6, seed=4))]
    opts = options_for(candidates(rs), PlanOptions(100.0, 50.0))
    off, on = opts[0], opts[1]
    cal = calibrated_overhead({"loop": {"per_request_ms": 0.3}, "encode_ms": 0.1}, "cal.json")
    assert cal.calibrated and cal.mean_ms == 0.3 and cal.loop_out_ms == 0.1 and cal.model.base_ns == 200_000
    sim = Simulator(PlanOptions(100.0, 50.0, requests=4000), cal)
    assert sim.as_it_runs(off) and sim.as_it_runs(on)
    mean_call_ms = off.candidate.service.mean_ns(1) / 1e6
    assert sim.replica_capacity_per_s(off) == pytest.approx(1e3 / (0.3 + mean_call_ms))
    p = sim.predict(off, 600.0, 1)
    assert sim.last["engine"] == "shared cores" and p.latency_ms["p50"] > mean_call_ms + 0.3
    # batching on (issue 39): full batches of 4 at the mean 4-row call, the loop's 0.3 ms per request beside them
    mean_4_ms = on.candidate.service.mean_ns(4) / 1e6
    assert on.policy.max_batch_size == 4
    assert sim.replica_capacity_per_s(on) == pytest.approx(1e3 / (0.3 + mean_4_ms / 4))
    sim.predict(on, 600.0, 1)
    assert sim.last["engine"] == "shared cores"
    plain = Simulator(PlanOptions(100.0, 50.0), Overhead(cal.model, 0.3, ["serve.json"]))
    assert not plain.as_it_runs(off)


def test_batching_off_and_on_calibrations_split_the_loop_into_its_per_request_and_per_call_parts() -> None:
    """A batching-off calibration alone charges the loop's per-call part to every request (0.7 ms here); merged
    with a batching-on one (2 and 4 requests a call) the regression finds 0.2 ms a request + 0.5 ms a call, and
    the planner's loop carries both: batching off costs 0.7 ms a request, full batches of 4 0.325 ms (issue 39:
    tiny-cnn's batching-on ceiling came out 32 % low from the batching-off calibration alone)."""
    from inferperf.analysis.replica_options import replica_capacity_per_s
    from inferperf.plan.calibrate import calibrated_overhead, merge_calibrations

    off = {"steps": [_step(1000, 1000, 700.0), _step(2000, 2000, 1400.0)], "encode_ms": 0.05, "client_share_ms": 0.1}
    on = {"steps": [_step(1000, 500, 450.0), _step(2000, 500, 650.0)], "encode_ms": 0.07, "client_share_ms": 0.3}
    alone = calibrated_overhead({**off, "loop": split_loop_cost(off["steps"])}, "off.json")
    assert alone.mean_ms == pytest.approx(0.7) and alone.loop_batch_ms == 0.0
    both = merge_calibrations([off, on], ["1x1 off", "1x1 on"])
    assert [s["label"] for s in both["steps"]] == ["1x1 off"] * 2 + ["1x1 on"] * 2
    assert both["client_share_ms"] == 0.1 and both["replicas"] == ["1x1 off", "1x1 on"]
    cal = calibrated_overhead(both, "cal.json")
    assert cal.mean_ms == pytest.approx(0.2) and cal.loop_batch_ms == pytest.approx(0.5)
    assert cal.loop_out_ms == pytest.approx(0.05)
    # the loop's ceiling: 1 / 0.7 ms batching off, 1 / (0.2 + 0.5 / 4) ms at full batches of 4 (calls of 0.01 ms)
    assert replica_capacity_per_s(4, 1, 1, cal.mean_ms, 0.01, 1, cal.loop_batch_ms) == pytest.approx(1e3 / 0.7)
    assert replica_capacity_per_s(4, 1, 1, cal.mean_ms, 0.01, 4, cal.loop_batch_ms) == pytest.approx(1e3 / 0.325)
    with pytest.raises(ValueError):
        merge_calibrations([off], [])
    with pytest.raises(ValueError):
        replica_capacity_per_s(1, 1, 1, 0.2, 0.01, 1, -0.1)


def test_a_steps_python_parts_are_per_call_and_the_planner_runs_them_under_the_gil() -> None:
    """``batch_stats`` count once per call (the top-level compute figures once per request): 3 calls of 1 row and
    1 of 4 rows with 40 us and 160 us of assembly are 70 us a call. The planner takes each part per call and per
    row (a fit over the steps' rows per call: batching off is 1 row a call, batching on several) and simulates
    them under the GIL."""
    from types import SimpleNamespace

    from inferperf.analysis.replica_options import replica_of
    from inferperf.plan.calibrate import calibrated_overhead, python_part

    def stats(calls: list[tuple[int, int, int, int]]) -> dict:  # (batch size, calls, input ns, output ns)
        doc = _stats(sum(b * k for b, k, _, _ in calls), sum(b * k for b, k, _, _ in calls), sum(k for _, k, _, _ in calls))
        doc["batch_stats"] = [{"batch_size": b, "compute_input": {"count": k, "ns": i}, "compute_output": {"count": k, "ns": o}}
                              for b, k, i, o in calls]
        return doc

    t = {1: T(1, "inferperf-loop", 0, 0, 0)}
    s = step_cost(t, t, stats([(1, 1, 10_000, 5_000)]), stats([(1, 4, 130_000, 35_000), (4, 1, 160_000, 40_000)]),
                  seconds=1.0, cores=1, rate_per_s=7.0)
    assert s["call_in_ms"] == pytest.approx(0.280 / 4) and s["call_out_ms"] == pytest.approx(0.070 / 4)
    idle = step_cost(t, t, stats([(1, 1, 10_000, 5_000)]), stats([(1, 1, 10_000, 5_000)]), 1.0, 1, 1.0)
    assert idle["call_in_ms"] is None
    # batch assembly 0.01 ms a call + 0.02 a row, the split 0.03 a row (batching off at 1 row, on at 2 and 4)
    steps = [{"mean_batch_requests": r, "call_in_ms": 0.01 + 0.02 * r, "call_out_ms": 0.03 * r} for r in (1.0, 2.0, 4.0)]
    over = calibrated_overhead({"loop": {"per_request_ms": 0.3}, "encode_ms": 0.1, "steps": steps}, "cal.json")
    assert (over.call_in_ms, over.call_in_per_row_ms) == (pytest.approx(0.01), pytest.approx(0.02))
    assert (over.call_out_ms, over.call_out_per_row_ms) == (pytest.approx(0.0, abs=1e-9), pytest.approx(0.03))
    rep = replica_of(SimpleNamespace(cores=1, instances=2, threads=1), over)
    assert rep.gil and rep.call_in.mean_ns(1) == 30_000 and rep.call_in.mean_ns(4) == 90_000
    assert rep.call_out.mean_ns(4) == 120_000
    # one batch size: its mean per call; nothing measured: none
    assert python_part(steps[:1], "call_in_ms") == (pytest.approx(0.03), 0.0)
    assert python_part([{"mean_batch_requests": 1.0, "call_in_ms": None}], "call_in_ms") == (0.0, 0.0)


def test_the_pilot_runs_only_when_the_first_step_would_be_faster_than_it() -> None:
    from inferperf.plan.calibrate import PILOT_RATE_PER_S, pilot_rate

    assert pilot_rate(31_240.0) == PILOT_RATE_PER_S  # tiny-cnn's calls alone: a first step at 9,372 req/s
    assert pilot_rate(500.0) is None  # 30 % is 150 req/s: slower than the pilot, nothing to bound
    assert pilot_rate(600.0) is None and pilot_rate(700.0) == PILOT_RATE_PER_S  # first steps at 180 and 210 req/s
    assert pilot_rate(1_000.0, loads=(0.1, 0.5)) is None and pilot_rate(1_000.0, loads=(0.5, 0.7)) == PILOT_RATE_PER_S


def test_the_calibration_print_shows_the_pilot_and_each_steps_wake_ups(capsys) -> None:  # noqa: ANN001
    from inferperf.cli.plan import print_calibration

    step = {"rate_per_s": 428.0, "throughput_per_s": 394.5, "loop_cpu_ms_per_request": 0.58,
            "loop_wait_ms_per_request": 0.1, "loop_wakeups_per_request": 1.52, "call_cpu_ms": 0.15,
            "call_wait_ms": 0.08, "replica_utilisation": 0.29, "client_share_ms": 0.38}
    cal = {"label": "1 x 1", "server_cpus": 1, "loop": {"per_request_ms": 0.48, "method": "per request"},
           "decode_ms": 0.05, "encode_ms": 0.02, "steps": [step],
           "pilot": {**step, "rate_per_s": 200.0, "loop_cpu_ms_per_request": 0.673}}
    print_calibration(cal)
    out = capsys.readouterr().out
    assert "pilot 200 req/s (no serve overhead known): loop 0.673 ms CPU per request" in out
    assert "428 req/s offered, 394.5 served" in out and "+ 1.5 wake-ups per request" in out
    print_calibration({**cal, "pilot": None})
    assert "pilot" not in capsys.readouterr().out
