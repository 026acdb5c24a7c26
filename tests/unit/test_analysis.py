"""Fits recover known parameters from synthetic Results; findings only where the data support them."""

import pytest

from inferperf.analysis import degradation_point, findings, fit_amdahl, fit_usl, knee, size_fit, speedups, sweet_spot
from inferperf.clock import FakeClock
from inferperf.config import BenchConfig, StopOptions, WarmupOptions
from inferperf.measure.bench import bench

_BASE = None


def synthetic(threads=1, qps=100.0, ci=None, concurrency=1, batch=1, p50=10.0, shape=(1, 3, 8, 8), key=None, runs=3):
    """A real Result (null backend, fake clock) with the figures an axis point needs set by hand."""
    global _BASE
    if _BASE is None:
        cfg = BenchConfig(backend="null", null_latency_ms=[1.0], warmup=WarmupOptions(iterations=1),
                          stop=StopOptions(min_iterations=10, min_duration_s=0, max_duration_s=100))
        _BASE = bench("null", cfg, clock=FakeClock())
    r = _BASE.model_copy(deep=True)
    r.config.session.effective["intra_op_num_threads"] = threads
    r.config.concurrency = concurrency
    r.config.workload.batch_size = batch
    r.config.workload.shapes = {"x": [batch, *shape[1:]]}
    r.metrics.throughput.queries_per_s = qps
    r.metrics.throughput.samples_per_s = qps * batch
    r.metrics.throughput.queries_per_s_ci95 = list(ci) if ci else []
    r.metrics.throughput.samples_per_s_ci95 = [c * batch for c in ci] if ci else []
    r.metrics.latency_ms.p50 = p50
    r.metrics.throughput.per_run = [qps] * runs
    r.config.repeat = runs
    r.case_key = key or f"k{threads}-{concurrency}-{batch}-{shape}"
    return r


def amdahl_x(n, s=0.2, x1=100.0):
    return x1 / (s + (1 - s) / n)


def usl_x(n, lam=100.0, sigma=0.1, kappa=0.02):
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def test_amdahl_recovers_serial_fraction():
    n = [1, 2, 4, 8]
    f = fit_amdahl(n, [amdahl_x(k) for k in n])
    assert f.status == "ok" and f.params["serial_fraction"] == pytest.approx(0.2, abs=1e-6)
    assert f.params["ceiling"] == pytest.approx(5.0, rel=1e-5) and f.r2 == pytest.approx(1.0)


def test_usl_recovers_parameters_and_peak():
    n = [1, 2, 3, 4, 6, 8]
    f = fit_usl(n, [usl_x(k) for k in n])
    assert f.status == "ok"
    assert f.params["sigma"] == pytest.approx(0.1, abs=1e-4) and f.params["kappa"] == pytest.approx(0.02, abs=1e-5)
    assert f.params["peak_threads"] == pytest.approx((0.9 / 0.02) ** 0.5, rel=1e-3)


def test_fits_refuse_two_points():
    assert fit_amdahl([1, 2], [1.0, 1.8]).status.startswith("insufficient points")
    assert fit_usl([1, 2], [1.0, 1.8]).status.startswith("insufficient points")
    assert size_fit([1, 2], [1.0, 2.0]).status.startswith("insufficient points")
    assert knee([1, 2], [1.0, 2.0]) is None


def test_speedup_sweet_spot_degradation_knee():
    s, eff = speedups([1, 2, 4], [100, 180, 200])
    assert s == pytest.approx([1.0, 1.8, 2.0]) and eff == pytest.approx([1.0, 0.9, 0.5])
    ss = sweet_spot([1, 2, 4, 8], [100, 180, 200, 196])
    assert ss["best"] == 4 and ss["fewest_near_best"] == 4
    ss = sweet_spot([1, 2, 4, 8], [100, 192, 200, 150])
    assert ss["best"] == 4 and ss["fewest_near_best"] == 2
    assert degradation_point([1, 2, 4, 8], [100, 180, 200, 150]) == 8
    assert degradation_point([1, 2, 4], [100, 180, 200]) is None
    # with CIs, overlapping intervals are not a fall
    cis = [[90, 110], [170, 190], [185, 215], [180, 200]]
    assert degradation_point([1, 2, 4, 8], [100, 180, 200, 190], cis) is None
    assert knee([1, 2, 4, 8, 16], [100, 190, 290, 300, 305]) == 4


def test_size_fit_linear():
    sizes = [50_000, 150_000, 1_200_000]
    f = size_fit(sizes, [1 + 2e-6 * s for s in sizes])
    assert f.params["ms_per_million_elements"] == pytest.approx(2.0) and f.r2 == pytest.approx(1.0)


def test_thread_finding_from_synthetic_results():
    rs = [synthetic(threads=n, qps=usl_x(n), ci=[usl_x(n) * 0.99, usl_x(n) * 1.01]) for n in (1, 2, 4, 8, 16)]
    fs = [f for f in findings(rs) if f.kind == "thread-scaling"]
    assert len(fs) == 1
    f = fs[0]
    assert f.values["best"] == 8 and f.values["degradation_threads"] == 16
    assert f.values["usl"]["sigma"] == pytest.approx(0.1, abs=1e-3)
    assert "peaks at 8 intra-op threads" in f.text and "16 threads lowers it" in f.text
    assert sorted(f.case_keys) == sorted(r.case_key for r in rs)


def test_no_findings_without_support():
    # one thread count only: no thread finding; two cases whose CIs overlap: no trade-off claim
    rs = [synthetic(threads=1, concurrency=1, qps=100, ci=[90, 110], p50=5.0),
          synthetic(threads=1, concurrency=2, qps=105, ci=[95, 115], p50=9.0)]
    kinds = [f.kind for f in findings(rs)]
    assert "thread-scaling" not in kinds and "tradeoff" not in kinds


def test_tradeoff_finding_when_cis_separate():
    rs = [synthetic(threads=2, concurrency=1, qps=100, ci=[98, 102], p50=10.0),
          synthetic(threads=1, concurrency=2, qps=130, ci=[127, 133], p50=19.0)]
    f = next(f for f in findings(rs) if f.kind == "tradeoff")
    assert f.values["throughput_ratio"] == pytest.approx(1.3) and f.values["p50_ratio"] == pytest.approx(1.9)
    assert "2 streams (shared) x 1 thread reach 1.30x the throughput of 1 stream x 2 threads" in f.text
    assert "p50 is 1.90x worse" in f.text
    rs = [synthetic(threads=2, concurrency=1, qps=100, ci=[98, 102], p50=10.0, runs=2),
          synthetic(threads=1, concurrency=2, qps=130, ci=[127, 133], p50=19.0, runs=2)]
    assert not [f for f in findings(rs) if f.kind == "tradeoff"]  # 2 runs: too few to call a trade-off


def test_batch_finding_knee():
    sps = {1: 100, 2: 190, 4: 290, 8: 300, 16: 280}
    rs = [synthetic(batch=b, qps=v / b, p50=b * 2.0) for b, v in sps.items()]
    f = next(f for f in findings(rs) if f.kind == "batch-scaling")
    assert f.values["knee"] == 4 and f.values["falls_at"] == 16


def test_batch_slower_per_sample_than_batch_one_is_said_when_intervals_separate():
    # issue 10 item 10: 586 samples/s at batch 8 against 955 at batch 1
    rs = [synthetic(batch=1, qps=955, ci=[930, 980]), synthetic(batch=8, qps=586 / 8, ci=[570 / 8, 600 / 8])]
    f = next(f for f in findings(rs) if f.kind == "batch-per-sample")
    assert "batch 8 is slower per sample than batch 1 (586.0 vs 955.0 samples/s, 0.61x, CIs separate)" in f.text
    assert f.values["slower"] is True
    overlap = [synthetic(batch=1, qps=955, ci=[600, 1300]), synthetic(batch=8, qps=586 / 8, ci=[400 / 8, 800 / 8])]
    fs = findings(overlap)
    assert not [f for f in fs if f.kind == "batch-per-sample"]
    assert "within noise" in next(f for f in fs if f.kind == "batch-scaling").text
    few = [synthetic(batch=1, qps=955, ci=[930, 980], runs=2), synthetic(batch=8, qps=586 / 8, ci=[570 / 8, 600 / 8], runs=2)]
    fs = findings(few)
    assert not [f for f in fs if f.kind == "batch-per-sample"]
    assert "too few runs (2)" in next(f for f in fs if f.kind == "batch-scaling").text
    faster = [synthetic(batch=1, qps=500, ci=[490, 510]), synthetic(batch=8, qps=900 / 8, ci=[880 / 8, 920 / 8])]
    assert not [f for f in findings(faster) if f.kind == "batch-per-sample"]


def test_report_says_batch_is_slower_across_two_bench_runs(tmp_path):
    from inferperf.report import build
    from inferperf.results.io import save

    one, eight = synthetic(batch=1, qps=955, ci=[930, 980]), synthetic(batch=8, qps=586 / 8, ci=[570 / 8, 600 / 8])
    one.command, eight.command = ["inferperf", "bench", "b1"], ["inferperf", "bench", "--batch-size", "8"]
    save(one, tmp_path / "one.json")
    save(eight, tmp_path / "eight.json")
    rep = build([tmp_path])
    assert any(b["kind"] == "batch-per-sample" and "batch 8 is slower per sample" in b["text"] for b in rep.bottlenecks)


def test_thread_peak_from_two_runs_is_not_called():
    rs = [synthetic(threads=n, qps=q, ci=[q - 1, q + 1], runs=2) for n, q in ((1, 100), (2, 180), (3, 150))]
    f = next(f for f in findings(rs) if f.kind == "thread-scaling")
    assert "from 2 runs: too few to call the peak" in f.text
    rs = [synthetic(threads=n, qps=q, ci=[q - 1, q + 1], runs=3) for n, q in ((1, 100), (2, 180), (3, 150))]
    assert "too few" not in next(f for f in findings(rs) if f.kind == "thread-scaling").text
