"""Stop rules, warm-up exclusion and windows on the fake clock: exact values, no sleeps."""

import numpy as np
import pytest

from inferperf.clock import FakeClock
from inferperf.config import BenchConfig, StopOptions, WarmupOptions
from inferperf.measure.bench import bench
from inferperf.measure.loop import StopRule, measure_stream, warm_up


def script_runner(clock, latencies_s):
    it = iter(latencies_s)

    def run(feed):
        clock.advance_ns(round(next(it) * 1e9))

    return run


def test_issue_example_warmup_excluded_cold_start_reported():
    # 3.538 s (cold), 0.111 s, then four steady calls; 2 warm-up runs
    clock = FakeClock()
    cfg = BenchConfig(
        backend="null",
        null_latency_ms=[3538, 111, 83.1, 83.6, 82.9, 82.7],
        warmup=WarmupOptions(iterations=2),
        stop=StopOptions(min_iterations=4, min_duration_s=0, max_duration_s=100),
    )
    r = bench("null", cfg, clock=clock)
    lat = r.metrics.latency_ms
    assert lat.count == 4
    assert lat.mean == pytest.approx(83.075)
    assert lat.p50 == pytest.approx(83.0)
    assert r.metrics.cold_start.first_inference_ms == pytest.approx(3538.0)
    assert r.samples.warmup_latency_ns == [3_538_000_000, 111_000_000]
    assert r.metrics.throughput.duration_s == pytest.approx(0.3323)
    assert r.metrics.throughput.queries_per_s == pytest.approx(4 / 0.3323)


def test_stop_needs_both_minimums():
    clock = FakeClock()
    # 10 ms per call; 5 iterations would take 50 ms but 1 s is required -> 100 calls
    s = measure_stream(lambda f: clock.advance_ns(10_000_000), [None], clock, StopRule(1, 0.0, 5, 1.0, 10.0))
    assert len(s.latency_ns) == 100 and s.stopped_by == "rule"
    clock = FakeClock()
    # 1 ms per call; 1 s reached after 1000 calls but 2000 are required
    s = measure_stream(lambda f: clock.advance_ns(1_000_000), [None], clock, StopRule(1, 0.0, 2000, 1.0, 10.0))
    assert len(s.latency_ns) == 2000 and s.duration_ns == 2_000_000_000


def test_cap_stops_and_is_reported():
    clock = FakeClock()
    s = measure_stream(lambda f: clock.advance_ns(300_000_000), [None], clock, StopRule(1, 0.0, 100, 0.0, 1.0))
    assert len(s.latency_ns) == 4 and s.stopped_by == "cap"  # 0.3, 0.6, 0.9, 1.2 s


def test_cap_makes_result_invalid_with_reason():
    cfg = BenchConfig(
        backend="null",
        null_latency_ms=[300],
        warmup=WarmupOptions(iterations=1),
        stop=StopOptions(min_iterations=100, min_duration_s=0, max_duration_s=1.0),
    )
    r = bench("null", cfg, clock=FakeClock())
    assert not r.validity.valid
    assert any("cap" in reason and "4 of 100" in reason for reason in r.validity.reasons)


def test_warmup_count_and_duration_both_needed():
    clock = FakeClock()
    out = warm_up(lambda f: clock.advance_ns(100_000_000), [None], clock, iterations=2, duration_s=0.5)
    assert len(out) == 5
    clock = FakeClock()
    out = warm_up(lambda f: clock.advance_ns(100_000_000), [None], clock, iterations=7, duration_s=0.1)
    assert len(out) == 7


def test_errors_counted_not_timed():
    clock = FakeClock()
    calls = {"n": 0}

    def run(feed):
        calls["n"] += 1
        clock.advance_ns(1_000_000)
        if calls["n"] % 4 == 0:
            raise RuntimeError("boom")

    s = measure_stream(run, [None], clock, StopRule(1, 0.0, 30, 0.0, 10.0))
    # calls 1..39: every 4th of them (9) fails, 30 succeed; failures take time but leave no sample
    assert len(s.latency_ns) == 30 and s.errors == {"RuntimeError": 9} and s.duration_ns == 39_000_000


def test_feeds_cycled_in_order_after_warmup():
    seen = []
    clock = FakeClock()

    def run(feed):
        seen.append(feed)
        clock.advance_ns(1)

    warm = warm_up(run, [0, 1, 2], clock, 2, 0.0)
    measure_stream(run, [0, 1, 2], clock, StopRule(2, 0.0, 4, 0.0, 1.0), first_feed=len(warm))
    assert seen == [0, 1, 2, 0, 1, 2]


def test_stable_windows_valid_and_unstable_invalid():
    steady = BenchConfig(
        backend="null",
        null_latency_ms=[10.0],
        warmup=WarmupOptions(iterations=1),
        stop=StopOptions(min_iterations=100, min_duration_s=0, max_duration_s=100),
    )
    r = bench("null", steady, clock=FakeClock())
    assert r.validity.valid and len(r.metrics.windows) == 10
    assert all(w.count == 10 and w.queries_per_s == pytest.approx(100.0) for w in r.metrics.windows)
    # latency doubles halfway through: window medians vary far beyond 10 %
    drift = steady.model_copy(update={"null_latency_ms": [10.0] * 51 + [20.0] * 50})
    r = bench("null", drift, clock=FakeClock())
    assert not r.validity.valid and any("unstable" in x for x in r.validity.reasons)


def _fast_null() -> BenchConfig:
    return BenchConfig(backend="null", null_latency_ms=[1.0], warmup=WarmupOptions(iterations=1),
                       stop=StopOptions(min_iterations=5, min_duration_s=0, max_duration_s=10))


def test_runtime_call_failure_is_reported_as_the_runtime_s(monkeypatch):
    """An exception from inside the backend's run call is the runtime's failure: one line, exit 1."""
    from inferperf.backends.null import NullBackend
    from inferperf.errors import MeasurementError

    def failing_runner(self):
        def run(feed):
            raise RuntimeError("kernel exploded")

        return run

    monkeypatch.setattr(NullBackend, "runner", failing_runner)
    with pytest.raises(MeasurementError, match="null failed while running: RuntimeError: kernel exploded"):
        bench("null", _fast_null(), clock=FakeClock())


def test_inferperf_bug_outside_the_run_call_is_not_blamed_on_the_runtime(monkeypatch):
    """A bug in inferperf's own code during warm-up or measurement propagates as itself (the CLI calls it an
    internal error), not as 'the runtime failed while running ... check --shape' (issue 10 item 6)."""
    import inferperf.measure.scenario as scenario_mod

    def broken(*args, **kwargs):
        raise KeyError("a bug in the loop")

    monkeypatch.setattr(scenario_mod, "measure_stream", broken)
    with pytest.raises(KeyError, match="a bug in the loop"):
        bench("null", _fast_null(), clock=FakeClock())


def _offline_null(batch: int) -> BenchConfig:
    from inferperf.config import WorkloadOptions

    return BenchConfig(backend="null", scenario="offline", null_latency_ms=[8.0], workload=WorkloadOptions(
        batch_size=batch), warmup=WarmupOptions(iterations=1), stop=StopOptions(min_iterations=5, min_duration_s=0,
                                                                               max_duration_s=10))


def test_offline_runs_a_bounded_batch1_reference_and_reports_the_ratio():
    """Offline at batch 8 runs a batch-1 reference after measuring (issue 10 item 10): 8 ms per query either way,
    so batch 8 gives exactly 8x the samples/s of batch 1; the reference stops at 50 queries."""
    from inferperf.results.model import TensorInfo

    inputs = [TensorInfo(name="x", dtype="float32", shape=["n", 4])]
    r = bench("null", _offline_null(8), clock=FakeClock(), backend_kwargs={"inputs": inputs})
    ref = r.metrics.throughput.batch1_reference
    assert ref["queries"] == 50 and ref["duration_s"] == pytest.approx(0.4)
    assert ref["samples_per_s"] == pytest.approx(125.0) and r.metrics.throughput.samples_per_s == pytest.approx(1000.0)
    assert ref["per_sample_ratio"] == pytest.approx(8.0)
    assert not any("slower per sample" in n for n in r.notes)
    doc = r.model_dump(mode="json")
    assert doc["metrics"]["throughput"]["batch1_reference"]["per_sample_ratio"] == pytest.approx(8.0)


def test_batch1_reference_is_capped_at_2_s_and_notes_a_batch_slower_per_sample():
    from inferperf.measure.scenario import batch1_reference

    clock = FakeClock()
    feeds = [{"x": np.zeros((4, 3), np.float32)} for _ in range(2)]
    # a batch-1 query takes 0.5 s: the 2 s cap ends the reference after 4 queries (not 50)
    ref, note = batch1_reference(lambda f: clock.advance_ns(500_000_000), feeds, 4, 1.0, clock)
    assert ref["queries"] == 4 and ref["samples_per_s"] == pytest.approx(2.0)
    assert ref["per_sample_ratio"] == pytest.approx(0.5)
    assert note.startswith("batch 4 is slower per sample than batch 1: 1.0 vs 2.0 samples/s (0.50x")
    # a session that refuses batch 1 (static shapes): no reference, a note saying why
    def refuse(feed):
        raise RuntimeError("expected shape [4,3]")

    ref, note = batch1_reference(refuse, feeds, 4, 1.0, clock)
    assert ref is None and "refuses batch 1" in note


def test_batch1_feeds_cut_rows_and_refuse_a_non_batch_leading_dim():
    from inferperf.measure.scenario import batch1_feeds

    feeds = [{"x": np.arange(12, dtype=np.float32).reshape(4, 3), "m": np.ones((4, 2), np.int64)}]
    ones = batch1_feeds(feeds, 4)
    assert len(ones) == 4 and ones[2]["x"].tolist() == [[6.0, 7.0, 8.0]] and ones[2]["m"].shape == (1, 2)
    assert batch1_feeds([{"x": np.zeros((3, 4))}], 4) is None


def test_rss_peak_source_is_recorded():
    """Issue 11: the peak RSS says where it came from; without the sampler it is the process lifetime's ru_maxrss,
    which includes model load."""
    r = bench("null", _fast_null(), clock=FakeClock())  # the fake clock turns the sampler off
    res = r.metrics.resources
    assert res.rss_peak_source == "ru_maxrss" and res.rss_peak_bytes > 0
    assert r.model_dump(mode="json")["metrics"]["resources"]["rss_peak_source"] == "ru_maxrss"


def test_bench_restores_the_caller_s_cpu_affinity():
    """Issue 11: bench(cpus=...) pins the process while it measures and gives the caller its CPUs back."""
    import os

    from inferperf.config import Placement

    before = os.sched_getaffinity(0)
    cfg = _fast_null().model_copy(update={"placement": Placement(cpus=[min(before)])})
    r = bench("null", cfg, clock=FakeClock())
    assert r.config.placement.cpus == [min(before)]
    assert os.sched_getaffinity(0) == before


def test_pooled_runs_keep_the_batch1_reference_and_the_rss_source():
    from inferperf.measure.runner import aggregate
    from inferperf.results.model import TensorInfo

    inputs = [TensorInfo(name="x", dtype="float32", shape=["n", 4])]
    cfg = _offline_null(8)
    runs = [bench("null", cfg, clock=FakeClock(), backend_kwargs={"inputs": inputs}) for _ in range(2)]
    pooled = aggregate(runs, cfg)
    ref = pooled.metrics.throughput.batch1_reference
    assert ref["queries"] == 100 and ref["samples_per_s"] == pytest.approx(125.0)
    assert ref["per_sample_ratio"] == pytest.approx(8.0) and ref["per_run_ratio"] == pytest.approx([8.0, 8.0])
    assert pooled.metrics.resources.rss_peak_source == "ru_maxrss"
    # each run's own p50/p99 listed beside it (what compare reads instead of the samples)
    assert [(x["p50_ms"], x["p99_ms"]) for x in pooled.run["pooled_runs"]] == [
        (r.metrics.latency_ms.p50, r.metrics.latency_ms.p99) for r in runs]


def test_shuffled_rounds_is_the_one_schedule():
    """measure/rounds.py: every round runs each case once, in a seeded shuffled order; the same seed gives the same
    schedule (what resume relies on); the schedule is the one runner.run_rounds and sweep both follow."""
    from inferperf.measure.rounds import shuffled_rounds

    slots = list(shuffled_rounds(3, 2, seed=2))
    assert [(s.round, s.case) for s in slots] == [(0, 1), (0, 2), (0, 0), (1, 2), (1, 1), (1, 0)]
    assert slots[0].marks() == {"round": 0, "round_order": [1, 2, 0], "shuffle_seed": 2}
    assert [(s.round, s.case) for s in shuffled_rounds(3, 2, seed=2)] == [(s.round, s.case) for s in slots]
    for r in range(2):
        assert sorted(s.case for s in slots if s.round == r) == [0, 1, 2]
    assert list(shuffled_rounds(0, 3)) == [] and list(shuffled_rounds(4, 0)) == []


def test_every_measured_query_failing_names_the_runtime_error(monkeypatch):
    """Warm-up passes, then every measured query raises: the one line names the runtime's first error (it used to
    say 'rerun with --debug to see the runtime error', which --debug could not show), chained for --debug."""
    from inferperf.backends.null import NullBackend
    from inferperf.errors import MeasurementError

    def late_failing_runner(self):
        calls = {"n": 0}

        def run(feed):
            calls["n"] += 1
            if calls["n"] > 1:  # the one warm-up call succeeds
                raise RuntimeError("kernel exploded late")

        return run

    monkeypatch.setattr(NullBackend, "runner", late_failing_runner)
    with pytest.raises(MeasurementError) as info:
        bench("null", _fast_null(), clock=FakeClock())
    assert str(info.value) == ("every measured query failed (RuntimeError x100); the first: null failed while running:"
                               " RuntimeError: kernel exploded late")
    assert isinstance(info.value.__cause__, RuntimeError)
