"""Server metrics on the fake clock (issue 12, item 7)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from inferperf.clock import FakeClock
from inferperf.serve.metrics import ServerMetrics


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


def test_raw_samples_are_capped() -> None:
    m = ServerMetrics(clock=FakeClock(), max_samples=5, process=False)
    for _ in range(8):
        m.decoded("m", 1000)
    assert m.window_summary()["decode_ms"]["count"] == 5 and m.samples_dropped == 3

