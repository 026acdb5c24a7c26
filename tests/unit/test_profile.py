"""Issue 16 (profile): trace parsing, warm-up split, event cap, Amdahl, roofline, diff — on hand-made traces."""

from __future__ import annotations

import pytest

from inferperf.analysis.profile import diff_profiles, op_profile, overhead_flag, split_runs
from inferperf.measure.profile import ORT_MAX_EVENTS, cap_runs
from inferperf.analysis.roofline import classify, node_cost


def _run(ts: float, kernels: list[tuple[str, str, float]], gap: float = 10.0) -> list[dict]:
    """One model_run at ``ts`` us holding ``kernels`` (name, op, dur_us) back to back after ``gap``."""
    ev, t = [], ts + gap
    for name, op, dur in kernels:
        ev.append({"cat": "Node", "name": f"{name}_fence_before", "ts": t, "dur": 0, "ph": "X", "args": {}})
        ev.append({"cat": "Node", "name": f"{name}_kernel_time", "ts": t, "dur": dur, "ph": "X",
                   "args": {"op_name": op, "provider": "CPUExecutionProvider",
                            "input_type_shape": [{"float": [1, 3, 8, 8]}, {"float": [4, 3, 3, 3]}],
                            "output_type_shape": [{"float": [1, 4, 8, 8]}]}})
        t += dur
    ev.append({"cat": "Session", "name": "model_run", "ts": ts, "dur": t - ts + gap, "ph": "X", "args": {}})
    return ev


KS = [("conv1", "Conv", 60.0), ("relu1", "Relu", 10.0), ("conv2", "Conv", 20.0)]


def _trace(n_warm: int = 1, n: int = 3) -> list[dict]:
    ev = [{"cat": "Session", "name": "session_initialization", "ts": 0, "dur": 50, "ph": "X"}]
    for i in range(n_warm):  # the warm-up run: slower kernels (kernel search)
        ev += _run(1000 + 1000 * i, [(a, b, d * 5) for a, b, d in KS])
    for i in range(n):
        ev += _run(10_000 + 1000 * i, KS)
    return ev


def test_totals_add_up_and_warmup_set_apart():
    p = op_profile(_trace(), skip_runs=1)
    assert p["runs"] == 3
    assert p["profiled_run_ms_mean"] == pytest.approx(0.110)  # 90 us kernels + 2 x 10 us gaps
    assert p["kernel_ms_mean"] == pytest.approx(0.090)
    assert p["outside_kernels_ms"] == pytest.approx(0.020)
    conv = p["ops"][0]
    assert conv["op"] == "Conv" and conv["count"] == 2 and conv["mean_ms"] == pytest.approx(0.080)
    assert sum(o["mean_ms"] for o in p["ops"]) + p["outside_kernels_ms"] == pytest.approx(p["profiled_run_ms_mean"])
    assert conv["amdahl_speedup"] == pytest.approx(110 / 30)
    assert p["first_run_kernel_ms"] == pytest.approx(0.450)  # warm-up run's kernels, shown apart
    assert p["nodes"][0]["name"] == "conv1" and p["nodes"][0]["input_shapes"][1] == [4, 3, 3, 3]


def test_partial_run_at_event_cap_dropped():
    ev = _trace(n=3)
    ev += _run(50_000, KS[:1])  # trace cut mid-run
    parts = split_runs(ev, skip_runs=1)
    assert len(parts["runs"]) == 3 and parts["dropped_partial"] == 1
    assert op_profile(ev, skip_runs=1)["dropped_partial_runs"] == 1


def test_a_short_run_is_dropped_only_at_the_end_of_an_ort_trace():
    """CI failure of 2026-12-05: OpenVINO's EXECUTED layer count varies between runs (100-104), and a short run in
    the middle was dropped as if ORT's event cap had cut it (runs 2 of 3)."""
    ev = _trace(n=0) + _run(10_000, KS) + _run(11_000, KS[:2]) + _run(12_000, KS)
    assert len(split_runs(ev, skip_runs=1)["runs"]) == 3  # followed by a full run: not cut
    short_last = _trace(n=2) + _run(50_000, KS[:2])
    assert split_runs(short_last, skip_runs=1)["dropped_partial"] == 1
    assert split_runs(short_last, skip_runs=1, event_cap=False)["dropped_partial"] == 0
    p = op_profile(short_last, skip_runs=1, event_cap=False)
    assert p["runs"] == 3 and next(o for o in p["ops"] if o["op"] == "Conv")["count"] == 2  # 5 calls in 3 runs


def test_no_runs_after_warmup_raises():
    with pytest.raises(ValueError, match="profile more runs"):
        op_profile(_trace(n=0), skip_runs=1)


def test_cap_runs_fits_event_limit():
    assert cap_runs(100, 3, 10) == 100
    n = cap_runs(10**9, 3, 1000)
    assert (n + 3) * (3 * 1000 + 4) <= ORT_MAX_EVENTS
    assert cap_runs(5, 3, 10**7) == 1


def test_overhead_flag():
    assert overhead_flag(12.5, 10.0)[1] is not None
    assert overhead_flag(11.0, 10.0)[1] is None


def test_roofline_costs_and_classes():
    c = node_cost("Conv", [[1, 3, 8, 8], [4, 3, 3, 3]], [[1, 4, 8, 8]])
    assert c["flops"] == 2 * 4 * 8 * 8 * 27
    m = node_cost("MatMul", [[64, 128], [128, 32]], [[64, 32]])
    assert m["flops"] == 2 * 64 * 32 * 128
    assert node_cost("Shape", [[1]], [[1]]) is None
    nodes = [{"op": "MatMul", "input_shapes": [[512, 512], [512, 512]], "output_shapes": [[512, 512]], "mean_ms": 1},
             {"op": "Relu", "input_shapes": [[1, 1000]], "output_shapes": [[1, 1000]], "mean_ms": 0.01}]
    got = {n["op"]: n["bound"] for n in classify(nodes, peak_flops_per_s=1e11, peak_bytes_per_s=1e10)}
    assert got == {"MatMul": "compute", "Relu": "memory"}


def test_diff_self_shows_no_change():
    a = op_profile(_trace(n=5), skip_runs=1)
    rows = diff_profiles(a, a)
    assert rows and all(r["verdict"] == "unchanged" for r in rows)


def test_diff_planted_slowdown():
    a = op_profile(_trace(n=5), skip_runs=1)
    slow = [("conv1", "Conv", 120.0), ("relu1", "Relu", 10.0), ("conv2", "Conv", 40.0)]
    ev = _trace(n=0) + [e for i in range(5) for e in _run(10_000 + 1000 * i, [(x, y, d + i) for x, y, d in slow])]
    a2 = op_profile(_trace(n=0) + [e for i in range(5) for e in _run(10_000 + 1000 * i, [(x, y, d + i) for x, y, d in KS])],
                    skip_runs=1)
    b = op_profile(ev, skip_runs=1)
    rows = {r["op"]: r for r in diff_profiles(a2, b, basis="ms")}
    assert rows["Conv"]["verdict"] == "slower" and rows["Relu"]["verdict"] == "unchanged"
    assert a["runs"] == 5


def test_diff_share_basis_ignores_uniform_drift():
    base = _trace(n=0) + [e for i in range(5) for e in _run(10_000 + 1000 * i, [(x, y, d + i) for x, y, d in KS])]
    drift = _trace(n=0) + [e for i in range(5) for e in _run(10_000 + 1000 * i, [(x, y, 1.3 * (d + i)) for x, y, d in KS])]
    a, b = op_profile(base, skip_runs=1), op_profile(drift, skip_runs=1)
    assert {r["verdict"] for r in diff_profiles(a, b)} == {"unchanged"}
    assert "slower" in {r["verdict"] for r in diff_profiles(a, b, basis="ms")}


def test_trace_prefix_unique_per_call(tmp_path):
    from inferperf.measure.profile import trace_prefix

    a, b = trace_prefix(tmp_path), trace_prefix(tmp_path)
    assert a != b and str(__import__("os").getpid()) in a.name


def test_diff_by_family_pairs_runtimes_op_names():
    """ORT's Conv + FusedConv and OpenVINO's Convolution are one family: --by family pairs them (by op they
    are 'only in A' / 'only in B'); per-run times add up within the family."""
    def op(name, runs, share):
        return {"op": name, "mean_ms": sum(runs) / len(runs), "percent_of_kernels": share, "count": 1,
                "per_run_ms": runs}

    ort = {"ops": [op("FusedConv", [6.0, 6.1, 5.9, 6.0], 60.0), op("Conv", [2.0, 2.1, 1.9, 2.0], 20.0),
                   op("Add", [2.0, 2.0, 2.1, 1.9], 20.0)], "kernel_ms_per_run": [10.0, 10.2, 9.9, 9.9]}
    ov = {"ops": [op("Convolution", [4.0, 4.1, 3.9, 4.0], 66.7), op("Add", [2.0, 2.0, 2.1, 1.9], 33.3)],
          "kernel_ms_per_run": [6.0, 6.1, 6.0, 5.9]}
    by_op = {r["op"]: r["verdict"] for r in diff_profiles(ort, ov, basis="ms")}
    assert by_op["FusedConv"] == "only in A" and by_op["Convolution"] == "only in B"
    rows = {r["op"]: r for r in diff_profiles(ort, ov, basis="ms", by="family")}
    assert set(rows) == {"Conv", "Add"}
    assert rows["Conv"]["a_ms"] == pytest.approx(8.0, rel=0.02) and rows["Conv"]["b_ms"] == pytest.approx(4.0, rel=0.02)
    assert rows["Conv"]["verdict"] == "faster" and rows["Add"]["verdict"] == "unchanged"


def test_diff_with_too_few_runs_is_inconclusive_not_unchanged():
    """Issue 24 item 12: two runs a side give no interval, so even +200 % read 'unchanged'."""
    def prof(runs):
        return {"ops": [{"op": "Conv", "mean_ms": sum(runs) / len(runs), "percent_of_kernels": 100.0, "count": 1,
                         "per_run_ms": runs}], "kernel_ms_per_run": runs}

    row = diff_profiles(prof([1.0, 1.1]), prof([3.0, 3.3]), basis="ms")[0]
    assert row["change_percent"] == pytest.approx(200.0) and row["verdict"] == "inconclusive"
    assert "too few profiled runs" in row["why"]
    # must-say-yes: with 5 runs a side the same change is called; a small change with intervals is unchanged
    assert diff_profiles(prof([1.0, 1.1, 0.9, 1.0, 1.05]), prof([3.0, 3.3, 2.9, 3.1, 3.0]), basis="ms")[0][
        "verdict"] == "slower"
    assert diff_profiles(prof([1.0, 1.1, 0.9, 1.0, 1.05]), prof([1.0, 1.1, 0.9, 1.0, 1.06]), basis="ms")[0][
        "verdict"] == "unchanged"
    # a large change whose intervals overlap is not a call either way
    assert diff_profiles(prof([1.0, 3.0, 1.0, 3.0, 1.0]), prof([3.0, 1.0, 3.0, 3.0, 1.0]), basis="ms",
                         min_change_percent=5)[0]["verdict"] == "inconclusive"
