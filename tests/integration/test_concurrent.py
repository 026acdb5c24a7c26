"""Concurrent streams compute the same outputs as one thread, on a real-weight model with distinct inputs."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import pytest

from inferperf import BenchConfig, SessionOptions, StopOptions, WarmupOptions, WorkloadOptions, bench
from inferperf.clock import SYSTEM_CLOCK
from inferperf.measure.concurrent import measure_concurrent
from inferperf.measure.loop import StopRule
from inferperf.results.model import TensorInfo
from inferperf.workload.data import build_workload
from inferperf.zoo import resolve


def _session(threads: int = 1) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(str(resolve("zoo:ppocr-cls")), so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("mode", ["shared", "per-stream"])
def test_concurrent_outputs_equal_single_thread_outputs(mode):
    streams = 3
    spec = [TensorInfo(name="x", dtype="float32", shape=[None, 3, 48, 192])]
    feeds = build_workload(spec, pool_size=4 * streams, seed=11).feeds
    pools = [feeds[k::streams] for k in range(streams)]
    reference = _session()
    expected = {id(f): reference.run(None, f)[0] for f in feeds}
    sessions = [_session()] * streams if mode == "shared" else [_session() for _ in range(streams)]
    got: list[tuple[int, np.ndarray]] = []
    lock = threading.Lock()

    def recorder(sess):
        def run(feed):
            out = sess.run(None, feed)[0]
            with lock:
                got.append((id(feed), out))
            return out

        return run

    s = measure_concurrent([recorder(x) for x in sessions], pools, SYSTEM_CLOCK, StopRule(1, 0.0, 30, 0.3, 20.0))  # 0.3 s: every stream gets turns
    assert sum(s.per_stream_counts) >= 30 and all(c > 0 for c in s.per_stream_counts)
    assert set(s.stream_ids) == set(range(streams))
    assert len(got) >= 30
    for key, out in got:
        np.testing.assert_allclose(out, expected[key], rtol=1e-5, atol=1e-6)
    # the inputs really differ, so equal outputs are a real check
    outs = [expected[id(f)] for f in feeds[:2]]
    assert not np.allclose(outs[0], outs[1])


def test_concurrent_bench_records_streams_and_oversubscription():
    cfg = BenchConfig(
        concurrency=2,
        session=SessionOptions(intra_op_num_threads=2),
        session_mode="per-stream",
        warmup=WarmupOptions(iterations=2),
        stop=StopOptions(min_iterations=20, min_duration_s=0.2),
    )
    r = bench("zoo:tiny-cnn", cfg)
    assert r.config.scenario == "concurrent" and r.config.concurrency == 2 and r.config.session_mode == "per-stream"
    assert len(r.metrics.throughput.per_stream) == 2
    assert sum(r.metrics.throughput.per_stream) == pytest.approx(r.metrics.throughput.queries_per_s)
    assert set(r.samples.stream_ids) == {0, 1}
    if r.system.effective_cpus < 4:
        assert any(n.startswith("oversubscribed") for n in r.notes)
    assert r.samples.timeline and len(r.samples.timeline["t_s"]) >= 1


def test_concurrent_default_threads_split_the_cpus():
    cfg = BenchConfig(concurrency=2, warmup=WarmupOptions(iterations=1), stop=StopOptions(min_iterations=10, min_duration_s=0))
    r = bench("zoo:tiny-cnn", cfg)
    eff = r.config.session.effective
    assert eff["intra_op_num_threads"] == max(1, r.system.effective_cpus // 2)
    assert "concurrency" in eff["intra_op_num_threads_source"]
    assert not any(n.startswith("oversubscribed") for n in r.notes)


def test_offline_reports_samples_per_s():
    cfg = BenchConfig(
        scenario="offline",
        workload=WorkloadOptions(batch_size=4),
        warmup=WarmupOptions(iterations=1),
        stop=StopOptions(min_iterations=5, min_duration_s=0),
    )
    r = bench("zoo:tiny-cnn", cfg)
    assert r.config.scenario == "offline" and r.config.workload.batch_size == 4
    assert r.metrics.throughput.samples_per_s == pytest.approx(4 * r.metrics.throughput.queries_per_s)


def test_offline_needs_batch_and_no_concurrency():
    from inferperf.cli.options import build_config
    from inferperf.errors import UsageError

    with pytest.raises(UsageError, match="--batch-size"):
        build_config({"scenario": "offline"})
    with pytest.raises(UsageError, match="offline"):
        build_config({"scenario": "offline", "workload.batch_size": 2, "concurrency": 2})


@pytest.mark.timeout(60)
def test_interrupt_during_warmup_ends_every_stream():
    """Ctrl-C (or the CLI's SIGTERM, raised as KeyboardInterrupt) while the streams warm up: measure_concurrent
    raises at once and no stream thread is left warming up or parked at the start barrier (issue 10 item 5)."""
    import signal
    import time

    def run(feed):
        time.sleep(0.001)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    before = set(threading.enumerate())
    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            # a one-hour warm-up: only the interrupt can end it
            measure_concurrent([run, run], [[0], [1]], SYSTEM_CLOCK, StopRule(1, 3600.0, 10, 0.0, 10.0))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    left = [t for t in threading.enumerate() if t not in before and t.name.startswith("inferperf-stream")]
    assert left == []
