"""Server metrics on the fake clock (issue 12, item 7)."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from inferperf.clock import FakeClock
from inferperf.errors import UsageError
from inferperf.serve.metrics import DURATION_BUCKETS_S, ServerMetrics, duration_buckets


def _samples(m: ServerMetrics) -> dict[tuple[str, tuple], float]:
    out = {}
    for fam in text_string_to_metric_families(m.exposition().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_thousand_requests_of_2ms_give_exact_histogram() -> None:
    clock = FakeClock(start_ns=10**9)
    m = ServerMetrics(clock=clock, process=False)
    clock.advance_ns(5 * 10**9)  # loading and warm-up: not part of the serving window
    m.start_window()
    for _ in range(1000):
        t0 = m.request_started("m")
        clock.advance_ns(2_000_000)
        m.request_finished("m", 200, t0)
    s = _samples(m)
    lab = (("model", "m"),)
    assert s[("inferperf_request_duration_seconds_count", lab)] == 1000
    assert s[("inferperf_request_duration_seconds_sum", lab)] == 2.0  # integer ns sums: exact
    inf = s[("inferperf_request_duration_seconds_bucket", (("le", "+Inf"), ("model", "m")))]
    assert inf == 1000
    assert s[("inferperf_request_duration_seconds_bucket", (("le", "0.001"), ("model", "m")))] == 0
    assert s[("inferperf_request_duration_seconds_bucket", (("le", "0.0025"), ("model", "m")))] == 1000
    assert s[("inferperf_request_duration_seconds_bucket", (("le", "5e-05"), ("model", "m")))] == 0  # 50 us bucket exists
    assert s[("inferperf_requests_total", (("model", "m"), ("status", "200")))] == 1000
    assert s[("inferperf_inflight_requests", lab)] == 0
    summary = m.window_summary()
    assert summary["request_ms"]["count"] == 1000 and summary["request_ms"]["p50"] == 2.0
    assert summary["window_s"] == pytest.approx(2.0)


def test_observer_counts_queue_batches_rejections_cancellations() -> None:
    m = ServerMetrics(clock=FakeClock(), process=False)
    for _ in range(3):
        m.request_queued("m")
    for _ in range(3):
        m.request_dequeued("m")
    m.batch_executed("m", batch_rows=4, n_requests=2, queue_ns=[1_000_000, 3_000_000], compute_ns=5_000_000, failed=False)
    m.batch_executed("m", batch_rows=1, n_requests=1, queue_ns=[0], compute_ns=1_000_000, failed=True)
    m.rejected("m", "queue_full")
    m.cancelled("m")
    s = _samples(m)
    lab = (("model", "m"),)
    assert s[("inferperf_queue_depth", lab)] == 0
    assert s[("inferperf_batch_size_count", lab)] == 2 and s[("inferperf_batch_size_sum", lab)] == 5
    assert s[("inferperf_queue_duration_seconds_count", lab)] == 3
    assert s[("inferperf_compute_duration_seconds_sum", lab)] == pytest.approx(0.006)
    assert s[("inferperf_rejected_total", (("model", "m"), ("reason", "queue_full")))] == 1
    assert s[("inferperf_cancelled_total", lab)] == 1
    assert s[("inferperf_execution_count_total", lab)] == 1 and s[("inferperf_inference_count_total", lab)] == 4
    summary = m.window_summary()
    assert summary["batch_sizes"] == {"1": 1, "4": 1}
    assert summary["queue_ms"]["max"] == 3.0 and summary["decode_ms"] is None


def test_registry_is_per_server_and_has_process_metrics() -> None:
    a, b = ServerMetrics(), ServerMetrics()
    t = a.request_started("m")
    a.request_finished("m", 200, t)
    assert ("inferperf_requests_total", (("model", "m"), ("status", "200"))) not in _samples(b)
    names = {k[0] for k in _samples(a)}
    assert "process_cpu_seconds_total" in names and "process_resident_memory_bytes" in names


def test_server_percentiles_describe_the_whole_window_not_its_first_samples() -> None:
    """A reservoir of 1000 over 3000 decode times: the first 1000 are 1 us, the last 2000 are 5 us. The p50
    must be 5 us (two thirds of the window), with count, mean, min and max exact; the first-N cap gave 1 us."""
    m = ServerMetrics(clock=FakeClock(), max_samples=1000, process=False, sample_seed=7)
    for i in range(3000):
        m.decoded("m", 1000 if i < 1000 else 5000)
    s = m.window_summary()
    d = s["decode_ms"]
    assert d["p50"] == 0.005 and d["p99"] == 0.005
    assert d["count"] == 3000 and d["min"] == 0.001 and d["max"] == 0.005
    assert d["mean"] == (1000 * 1000 + 2000 * 5000) / 3000 / 1e6
    assert s["sampling"] == {"method": "reservoir (Vitter's algorithm R)", "capacity": 1000, "seed": 7,
                             "kept": {"request": 0, "queue": 0, "compute": 0, "decode": 1000, "encode": 0,
                                      "exchange": 0}}


def test_the_reservoir_is_a_uniform_seeded_sample() -> None:
    """Values 0..9999 into a 1000-slot reservoir: the sample's quartiles sit near the window's (2500, 5000,
    7500) within 4 binomial standard errors (sqrt(1000 * 0.25 * 0.75) = 14 of 1000 ranks = 1.4 % of the
    range); the same seed gives the same sample, another seed another one."""
    def sample(seed: int) -> np.ndarray:
        m = ServerMetrics(clock=FakeClock(), max_samples=1000, process=False, sample_seed=seed)
        for v in range(10_000):
            m.encoded("m", v)
        return np.sort(np.frombuffer(m._samples["encode"].data, dtype=np.int64))

    a = sample(0)
    assert a.size == 1000 and len(set(a.tolist())) == 1000
    for q, want in ((0.25, 2500), (0.5, 5000), (0.75, 7500)):
        assert abs(np.quantile(a, q) - want) < 4 * 0.0137 * 10_000, (q, np.quantile(a, q))
    assert a[-1] > 9000  # late values get in
    assert np.array_equal(a, sample(0)) and not np.array_equal(a, sample(1))



def test_each_model_instance_has_a_busy_seconds_counter() -> None:
    """Issue 31 item 1: the busy share per instance is rate(inferperf_instance_busy_seconds_total); the label is
    model_instance (Prometheus gives every target an ``instance`` label)."""
    m = ServerMetrics(clock=FakeClock(), process=False)
    m.batch_executed("m", 4, 2, [0, 0], 3_000_000, False, 0)
    m.batch_executed("m", 1, 1, [0], 1_500_000, False, 1)
    m.batch_executed("m", 1, 1, [0], 2_000_000, False, 0)
    m.batch_executed("m", 1, 1, [0], 0, True)  # the call raised: which instance is not known, nothing added
    s = _samples(m)
    assert s[("inferperf_instance_busy_seconds_total", (("model", "m"), ("model_instance", "0")))] == 0.005
    assert s[("inferperf_instance_busy_seconds_total", (("model", "m"), ("model_instance", "1")))] == 0.0015
    assert len([k for k in s if k[0] == "inferperf_instance_busy_seconds_total"]) == 2
    m.reset()
    assert not [k for k in _samples(m) if k[0] == "inferperf_instance_busy_seconds_total"]


def test_a_loaded_models_series_exist_at_zero_and_again_after_a_reset() -> None:
    """Issue 41 item 6: every status, shedding reason, histogram, gauge and instance counter of a model exists at
    0 from its load (rate() and increase() need a sample before the first event), and after reset()."""
    m = ServerMetrics(clock=FakeClock(), process=False)
    m.model_loaded("m", instances=2)
    for round_ in range(2):
        s = _samples(m)
        for status in ("200", "400", "413", "415", "499", "500", "503", "504"):
            assert s[("inferperf_requests_total", (("model", "m"), ("status", status)))] == 0
        for reason in ("queue_full", "not_ready", "shutting_down", "timeout"):
            assert s[("inferperf_rejected_total", (("model", "m"), ("reason", reason)))] == 0
        assert s[("inferperf_cancelled_total", (("model", "m"),))] == 0
        assert s[("inferperf_request_duration_seconds_count", (("model", "m"),))] == 0
        assert s[("inferperf_queue_depth", (("model", "m"),))] == 0
        assert s[("inferperf_instance_busy_seconds_total", (("model", "m"), ("model_instance", "1")))] == 0
        assert ("inferperf_http_exchange_duration_seconds_count", (("model", "m"),)) not in s  # httptools only
        t0 = m.request_started("m")
        m.request_finished("m", 400, t0)
        assert _samples(m)[("inferperf_requests_total", (("model", "m"), ("status", "400")))] == 1
        m.reset()  # (round 2: the same after the warm-up's reset)


def test_latency_buckets_are_settable_and_an_slo_becomes_an_edge() -> None:
    """--latency-buckets / --slo-ms: a 129 ms SLO between the default edges 100 and 250 ms becomes an edge, so the
    share of requests within it is exact; bad edges are refused naming the flag."""
    edges = duration_buckets(None, 129)
    assert 0.129 in edges and edges == tuple(sorted(edges)) and len(edges) == len(DURATION_BUCKETS_S) + 1
    assert duration_buckets([0.01, 0.1], 100) == (0.01, 0.1)  # already an edge
    assert duration_buckets([0.01, 0.2], 50) == (0.01, 0.05, 0.2)
    for bad in ([], [0.1, 0.05], [0.0, 1.0], [0.1, float("inf")], [i / 1000 for i in range(1, 62)]):
        with pytest.raises(UsageError, match="--latency-buckets"):
            duration_buckets(bad)
    with pytest.raises(UsageError, match="--slo-ms"):
        duration_buckets(None, -1)
    clock = FakeClock()
    m = ServerMetrics(clock=clock, process=False)
    m.set_duration_buckets(duration_buckets(None, 129))
    for ms in (120, 128, 130, 140):
        t0 = m.request_started("m")
        clock.advance_ns(ms * 1_000_000)
        m.request_finished("m", 200, t0)
    s = _samples(m)
    assert s[("inferperf_request_duration_seconds_bucket", (("le", "0.129"), ("model", "m")))] == 2
    assert s[("inferperf_request_duration_seconds_bucket", (("le", "0.1"), ("model", "m")))] == 0
    assert s[("inferperf_request_duration_seconds_bucket", (("le", "0.25"), ("model", "m")))] == 4
