"""Soak (issue 13 item 6) on the fake clock: a server whose RSS grows per request is flagged, a flat one not."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

from inferperf.cli import main
from inferperf.clock import FakeClock
from inferperf.errors import UsageError
from inferperf.loadgen.driver import Closed
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.soak import parse_rss, soak, soak_block, soak_samples
from inferperf.loadgen.transport import SimulatedServer
from tests.fake_loop import run_fake
from tests.memory_growth import growing_memory


def _run(per_request_bytes: float, sawtooth: bool = False):
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.020, slots=2)

    def rss() -> float:
        base = 100e6 + per_request_bytes * server.served
        return base + ((server.served // 500) % 4) * 3e6 if sawtooth else base

    s, taken = run_fake(clock, lambda: soak_samples(server, Closed(2), soak_s=300.0, interval_s=10.0,
                                                    warmup_s=1.0, rss=rss, clock=clock),
                        timeout_s=3600.0, inline_threads=True)  # the RSS read at a fake time that is the same every run
    return soak_block(s, taken, 10.0, rss_source="given", bytes_per_hour=1024 * 1024, bytes_per_1000_requests=1024)


def test_growth_per_request_flagged() -> None:
    b = _run(per_request_bytes=16.0)  # 16 B/request at ~100 req/s = ~5.8 MB/h
    assert len(b["intervals"]) == 30
    assert b["verdict"] == "leak" and b["rss"]["leak"]
    assert b["rss"]["slope_bytes_per_request"] == pytest.approx(16.0, rel=0.05)
    assert b["intervals"][-1]["requests"] > b["intervals"][0]["requests"] > 0
    assert b["latency_drift"] is not None and not b["latency_drift"]["drift"]


def test_flat_and_sawtooth_not_flagged() -> None:
    assert _run(0.0)["verdict"] == "no leak"
    assert _run(0.0, sawtooth=True)["verdict"] == "no leak"


def test_soak_on_the_fake_clock_is_the_same_every_run() -> None:
    """The RSS source runs in a worker thread (issue 23 item 8); on the fake loop that thread's read landed
    at a fake time set by real thread scheduling, so the sawtooth was sampled at other phases on each run and
    test_flat_and_sawtooth_not_flagged failed about 1 run in 4. Two runs now give the same intervals."""
    a, b = _run(0.0, sawtooth=True), _run(0.0, sawtooth=True)
    assert [iv["rss_bytes"] for iv in a["intervals"]] == [iv["rss_bytes"] for iv in b["intervals"]]
    assert a["intervals"] == b["intervals"] and a["rss"] == b["rss"]


def _slow_source(clock: FakeClock, loop_thread: int, scrape_s: float = 0.150):
    """An RSS source that takes ``scrape_s`` of (fake) wall time, as a blocking urlopen of /metrics does.

    Called on the event loop's thread it blocks the loop: time passes and nothing else runs (the clock
    jumps). Called from another thread it waits until the loop's clock has passed ``scrape_s`` (the loop keeps
    running meanwhile); bounded by 2 s of real time so a finished loop cannot hang it.
    """

    def read() -> float:
        if threading.get_ident() == loop_thread:
            clock.advance_ns(round(scrape_s * 1e9))
        else:
            until, deadline = clock.now_ns() + round(scrape_s * 1e9), time.monotonic() + 2.0
            while clock.now_ns() < until and time.monotonic() < deadline:
                time.sleep(0.0005)
        return 100e6

    return read


def test_slow_rss_source_does_not_move_latency() -> None:
    """Issue 23 item 8: a 150 ms scrape ran on the generator's loop and was charged to the server (the
    requests in flight then took 170 ms); off the loop every request takes exactly the service time."""
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.020, slots=4)
    rss = _slow_source(clock, threading.get_ident())
    s, _ = run_fake(clock, lambda: soak_samples(server, Closed(4), soak_s=30.0, interval_s=1.0, warmup_s=0.5,
                                                rss=rss, clock=clock), timeout_s=600.0)  # fmt: skip
    m = s.measured() & (s.error == 0)
    lat_ms = (s.done_ns[m] - s.scheduled_ns[m]) / 1e6
    assert m.sum() > 1000
    assert np.max(lat_ms) == pytest.approx(20.0, abs=1e-6)


def test_parse_rss() -> None:
    text = "# HELP x\nprocess_resident_memory_bytes 1.5e+08\nother 1\n"
    assert parse_rss(text) == 1.5e8
    assert parse_rss("nothing here") is None


def test_soak_bad_interval_is_usage_error() -> None:
    cfg = LoadConfig(url="http://127.0.0.1:9", model="m", concurrency=[1], soak_s=10, soak_interval_s=5)
    with pytest.raises(UsageError, match="soak-interval-s"):
        soak(cfg)


def test_cli_fail_on_leak_without_soak_exit_2(capsys) -> None:
    assert main(["load", "http://127.0.0.1:9", "--model", "m", "--fail-on-leak"]) == 2
    assert main(["load", "http://127.0.0.1:9", "--model", "m", "--soak-s", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "soak" in err[0]


def test_bench_soak_small_run(tmp_path) -> None:
    """bench measures in this process: a thread holding 1 MiB more every 50 ms (400 MiB at most: it grows to the
    end of the soak however long the start takes, so the last third still grows) while it soaks 6 s is a leak on the
    psutil RSS (enough samples after the settle period to be judged even where a loaded machine samples at 4 Hz, not
    10; the flat and growing verdicts themselves: the synthetic tests)."""
    from inferperf.results.io import load as load_result

    out = tmp_path / "b.json"
    with growing_memory(every_s=0.05, most_mib=400):
        assert main(["bench", "--backend", "null", "--null-latency-ms", "1", "--soak-s", "6", "-o", str(out)]) == 0
    s = load_result(out).metrics.resources.soak
    assert s["rss_source"] == "psutil" and len(s["intervals"]) >= 3 and s["verdict"] == "leak", s["rss"]


def test_bench_soak_bad_flags_exit_2(capsys) -> None:
    assert main(["bench", "--backend", "null", "--null-latency-ms", "1", "--soak-s", "0"]) == 2
    assert main(["bench", "--backend", "null", "--null-latency-ms", "1", "--fail-on-leak"]) == 2
    assert "--soak-s" in capsys.readouterr().err


def test_bench_soak_block_flat_and_growing() -> None:
    from types import SimpleNamespace

    from inferperf.measure.soak import bench_soak_block

    t = [i * 0.1 for i in range(600)]

    def res(rss):
        return SimpleNamespace(samples=SimpleNamespace(timeline={"t_s": t, "rss_bytes": rss}),
                               metrics=SimpleNamespace(latency_ms=SimpleNamespace(count=60000)))

    assert bench_soak_block(res([1e8] * 600))["verdict"] == "no leak"
    assert bench_soak_block(res([1e8 + 1e4 * x for x in t]))["verdict"] == "leak"


def test_bench_soak_reads_troughs_not_bin_means() -> None:
    """Issue 23 item 9: bench --soak-s uses load's verdict on the raw samples. A 4 MiB/h leak under a 40 MiB,
    3-minute sawtooth over an hour at 1 Hz is a leak; the sawtooth alone is not, nor growth that levels off
    after 20 minutes (the line through 30 bin means called it a leak: 93 MiB/h, significant)."""
    from types import SimpleNamespace

    from inferperf.measure.soak import bench_soak_block

    t = np.arange(3600.0)
    rng = np.random.default_rng(0)
    saw = 200 * 2**20 + 40 * 2**20 * ((t % 180) / 180) + rng.normal(0, 100e3, t.size)

    def res(rss):
        return SimpleNamespace(samples=SimpleNamespace(timeline={"t_s": list(t), "rss_bytes": list(rss)}),
                               metrics=SimpleNamespace(latency_ms=SimpleNamespace(count=360000)))

    alone = bench_soak_block(res(saw))
    assert alone["verdict"] == "no leak" and alone["rss"]["envelope"] and len(alone["intervals"]) == 30
    leaking = bench_soak_block(res(saw + 4 * 2**20 * t / 3600))
    assert leaking["verdict"] == "leak", leaking["rss"]["reason"]
    plateau = 200 * 2**20 + 120 * 2**20 * np.minimum(t, 1200) / 1200 + rng.normal(0, 100e3, t.size)
    assert bench_soak_block(res(plateau))["verdict"] == "no leak"


@pytest.mark.parametrize("rate", [True, False])
def test_a_soak_runs_on_the_loop_a_step_of_its_mode_gets(monkeypatch: pytest.MonkeyPatch, rate: bool) -> None:
    """Open loop: asyncio's loop on PreciseEpollSelector (microsecond waits, as every other open-loop step);
    closed loop: the loop ``event_loop.loop_factory(closed=True)`` picks (uvloop when installed)."""
    import asyncio

    from inferperf.loadgen import event_loop
    from inferperf.loadgen import soak as soak_mod
    from inferperf.loadgen.target import TargetInfo

    seen: list[str] = []

    class Spy(SimulatedServer):
        async def connect(self):  # noqa: ANN202
            loop = asyncio.get_running_loop()
            seen.append(type(getattr(loop, "_selector", loop)).__name__ if event_loop.loop_name(loop) == "asyncio"
                        else "uvloop")  # fmt: skip
            return await super().connect()

    monkeypatch.setattr(soak_mod, "transport_for", lambda cfg: Spy(service_s=0.001, slots=2))
    target = TargetInfo(kind="kserve", url="http://127.0.0.1:1", model="m", metadata={"name": "m", "inputs": []},
                        shapes=[{}], dtypes={}, payloads=[b""])  # fmt: skip
    step = {"request_rate": [50]} if rate else {"concurrency": [1]}
    cfg = LoadConfig(url="http://127.0.0.1:1", soak_s=0.4, soak_interval_s=0.1, warmup_s=0.0, **step)
    soak(cfg, target=target, rss=lambda: 1e8)
    loop = event_loop.loop_factory(closed=not rate)()
    try:
        want = type(loop._selector).__name__ if event_loop.loop_name(loop) == "asyncio" else "uvloop"  # type: ignore[attr-defined]
    finally:
        loop.close()
    assert seen and set(seen) == {want}
    if rate and sys.platform.startswith("linux"):
        assert want == "PreciseEpollSelector"
