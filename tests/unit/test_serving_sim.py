"""The serving simulator (analysis/serving_sim.py) against queueing theory's closed forms, its two engines
against each other, and its batching against the real DynamicBatcher on the fake clock.

Closed forms (Kleinrock, Queueing Systems vol. 1, 1975; Gross and Harris, Fundamentals of Queueing Theory):
M/M/1 sojourn is exponential with rate mu - lambda (p99 = ln 100 / (mu - lambda)); M/D/1 mean wait by
Pollaczek-Khinchine, W = rho / (2 mu (1 - rho)); M/M/c waiting time P(W > t) = C(c, a) e^{-(c mu - lambda) t}
(Erlang C), the sojourn adds an independent Exp(mu); M/M/1/K blocking (1 - rho) rho^K / (1 - rho^{K+1}).
Sample sizes are chosen so the seeded estimates sit several standard errors inside the tolerances
(checked over seeds when written: p99 at rho 0.7 from 2M arrivals has a 0.6 % spread).
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from inferperf.analysis.service_model import Deterministic, Empirical, Exponential, ServiceStream, stream_seed
from inferperf.analysis.serving_sim import Setup, simulate
from inferperf.analysis.serving_stats import intervals, summarize
from inferperf.clock import FakeClock
from inferperf.errors import UsageError
from inferperf.policy.batching import BatchPolicy, decide
from inferperf.serve.batcher import DynamicBatcher, Request
from inferperf.serve.errors import QueueFull
from tests.fake_loop import run_fake

MU = 1000.0  # service rate per s (mean 1 ms)


def poisson_ns(rate_per_s: float, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(np.cumsum(rng.exponential(1e9 / rate_per_s, n))).astype(np.int64)


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in M/M/c with offered load a = lambda / mu (Erlang C)."""
    head = sum(a**k / math.factorial(k) for k in range(c))
    last = a**c / math.factorial(c) * c / (c - a)
    return last / (head + last)


def mmc_sojourn_quantile(c: int, lam: float, mu: float, q: float) -> float:
    """The q-quantile (s) of M/M/c sojourn: P(T > t) = e^{-mu t} + C mu / (theta - mu) (e^{-mu t} - e^{-theta t})."""
    from scipy.optimize import brentq

    C, theta = erlang_c(c, lam / mu), c * mu - lam

    def tail(t: float) -> float:
        return math.exp(-mu * t) + C * mu / (theta - mu) * (math.exp(-mu * t) - math.exp(-theta * t)) - (1 - q)

    return brentq(tail, 0.0, 100 / mu)


def run(rho: float, n: int, seed: int, instances: int = 1, service=None, **setup):  # noqa: ANN001, ANN201
    lam = rho * instances * MU
    return simulate(poisson_ns(lam, n, seed), Setup(BatchPolicy(), instances=instances, **setup),
                    service or Exponential(1e9 / MU), decide=decide, seed=seed)


# ---------------------------------------------------------------- closed forms


@pytest.mark.parametrize("rho", [0.5, 0.7])
def test_mm1_p99_is_ln100_over_mu_minus_lambda(rho: float) -> None:
    p = summarize(run(rho, 2_000_000, seed=1), 0.05)
    expected_ms = math.log(100) / (MU - rho * MU) * 1e3
    assert p.latency_ms["p99"] == pytest.approx(expected_ms, rel=0.02)
    assert p.utilisation == pytest.approx(rho, rel=0.02)


def test_mm1_mean_at_0_9() -> None:
    p = summarize(run(0.9, 2_000_000, seed=2), 0.05)
    assert p.latency_ms["mean"] == pytest.approx(1e3 / (MU - 0.9 * MU), rel=0.05)


def test_md1_mean_wait_is_pollaczek_khinchine() -> None:
    rho = 0.9
    r = run(rho, 2_000_000, seed=3, service=Deterministic(1_000_000))
    p = summarize(r, 0.05)
    wait_ms = rho / (2 * MU * (1 - rho)) * 1e3
    assert p.latency_ms["mean"] - 1.0 == pytest.approx(wait_ms, rel=0.05)
    assert p.dominant == "queueing"


def test_mmc_p99_at_0_7_and_mean_at_0_9_are_erlang_c() -> None:
    c = 4
    p = summarize(run(0.7, 1_000_000, seed=4, instances=c), 0.05)
    assert p.latency_ms["p99"] == pytest.approx(mmc_sojourn_quantile(c, 0.7 * c * MU, MU, 0.99) * 1e3, rel=0.02)
    p = summarize(run(0.9, 1_000_000, seed=5, instances=c), 0.05)
    lam = 0.9 * c * MU
    expected_ms = (erlang_c(c, lam / MU) / (c * MU - lam) + 1 / MU) * 1e3
    assert p.latency_ms["mean"] == pytest.approx(expected_ms, rel=0.05)


def test_mm1k_rejections_match_the_blocking_probability() -> None:
    rho, waiting = 0.9, 4  # K = 4 waiting + 1 in service
    k = waiting + 1
    r = run(rho, 200_000, seed=6, max_queue_size=waiting)
    assert r.method == "events"
    p = summarize(r, 0.05)
    blocking = (1 - rho) * rho**k / (1 - rho ** (k + 1))
    assert p.rejected_share == pytest.approx(blocking, rel=0.05)
    assert p.throughput_per_s == pytest.approx(rho * MU * (1 - blocking), rel=0.02)


# ---------------------------------------------------------------- engines agree


@pytest.mark.parametrize("balancer", ["round-robin", "random", "least-outstanding", "power-of-two"])
@pytest.mark.parametrize("instances", [1, 3])
def test_event_engine_and_recursion_give_the_same_run(balancer: str, instances: int) -> None:
    arr = poisson_ns(2500.0, 20_000, seed=7)
    kw = {"decide": decide, "overhead": Exponential(50_000), "seed": 8,
          "rows": np.random.default_rng(9).integers(1, 4, arr.size)}
    setup = Setup(BatchPolicy(max_batch_size=4), replicas=3, instances=instances, balancer=balancer)
    service = Empirical({1: [0.5e6, 0.9e6, 1.4e6], 4: [1.5e6, 2.0e6, 3.1e6]})
    ev = simulate(arr, setup, service, method="events", **kw)
    rec = simulate(arr, setup, service, method="recursion", **kw)
    assert (ev.method, rec.method) == ("events", "recursion")
    for f in ("replica", "admit_ns", "dispatch_ns", "done_ns", "batching_ns", "batch_rows"):
        assert np.array_equal(getattr(ev, f), getattr(rec, f)), f
    assert sorted(zip(ev.batch_start_ns.tolist(), ev.batch_end_ns.tolist())) == sorted(
        zip(rec.batch_start_ns.tolist(), rec.batch_end_ns.tolist()))
    assert summarize(ev) == summarize(rec)


def test_recursion_refused_where_it_does_not_apply() -> None:
    arr = poisson_ns(100.0, 10, 0)
    with pytest.raises(UsageError, match="recursion needs"):
        simulate(arr, Setup(BatchPolicy(8, True, 1000)), Exponential(1e6), decide=decide, method="recursion")
    with pytest.raises(UsageError, match="recursion needs"):
        simulate(arr, Setup(BatchPolicy(), max_queue_size=4, balancer="least-outstanding"), Exponential(1e6),
                 decide=decide, method="recursion")
    with pytest.raises(UsageError, match="balancer"):
        simulate(arr, Setup(BatchPolicy(), balancer="fastest"), Exponential(1e6), decide=decide)
    with pytest.raises(UsageError, match="sorted"):
        simulate(arr[::-1], Setup(BatchPolicy()), Exponential(1e6), decide=decide)


# ---------------------------------------------------------------- balancers


def test_state_aware_balancers_beat_random_at_high_load() -> None:
    """At 90 % load over 4 single-instance replicas, join-the-shortest-queue and two choices cut the p99 of random
    routing (which is four independent M/M/1 queues) by a wide margin (Mitzenmacher 2001)."""
    arr = poisson_ns(0.9 * 4 * MU, 150_000, seed=10)
    p99 = {}
    for bal in ("random", "round-robin", "least-outstanding", "power-of-two"):
        r = simulate(arr, Setup(BatchPolicy(), replicas=4, balancer=bal), Exponential(1e6), decide=decide, seed=11)
        p99[bal] = summarize(r).latency_ms["p99"]
        assert np.bincount(r.replica, minlength=4).min() > 0.2 * arr.size
    assert p99["least-outstanding"] < p99["power-of-two"] < p99["random"] * 0.6
    assert p99["round-robin"] < p99["random"]


# ---------------------------------------------------------------- the real batcher


def _real_batches(arrivals_ns: np.ndarray, policy: BatchPolicy, slots: int, service: Exponential,
                  seed: int, max_queue_size: int = 0) -> tuple[list[list[int]], list[int], list[int], list[int]]:
    """Run the server's DynamicBatcher on fake time with these arrivals; each model call sleeps the next time of
    the replica-0 service stream (the simulator's draw order). Returns batches (request ids), dispatch ns,
    arrival ns as the batcher saw them, and the ids it refused (QueueFull)."""
    clock = FakeClock()
    stream = ServiceStream(service, stream_seed(seed, 0, 0))

    async def execute(batch: list[Request]) -> None:
        await asyncio.sleep(stream.next_ns(sum(r.rows for r in batch)) / 1e9)
        for r in batch:
            r.future.set_result(r.inputs["id"])

    async def main() -> DynamicBatcher:
        b = DynamicBatcher("m", policy, execute, slots=slots, clock=clock, max_queue_size=max_queue_size)
        b.record = True
        pending = []
        for i, a in enumerate(arrivals_ns.tolist()):
            delay = (a - clock.now_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            req = Request(inputs={"id": i}, rows=1, key="k", arrival_ns=clock.now_ns())
            pending.append((req, asyncio.ensure_future(b.submit(req))))
            await asyncio.sleep(0)
        outcomes = await asyncio.gather(*(f for _, f in pending), return_exceptions=True)
        await b.close()
        b.arrivals = [r.arrival_ns for r, _ in pending]  # type: ignore[attr-defined]
        b.refused = [i for i, o in enumerate(outcomes) if isinstance(o, QueueFull)]  # type: ignore[attr-defined]
        assert all(isinstance(o, (int, QueueFull)) for o in outcomes)
        return b

    b = run_fake(clock, main, timeout_s=3600)
    batches = [[r.inputs["id"] for r in batch] for _, batch in b.dispatched]
    return batches, [t for t, _ in b.dispatched], b.arrivals, b.refused  # type: ignore[attr-defined]


@pytest.mark.parametrize(("policy", "slots", "max_queue"), [
    (BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=2_000_000), 1, 0),
    (BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=1_500_000, preferred_batch_sizes=(2, 4)), 2, 0),
    (BatchPolicy(max_batch_size=4, dynamic=True), 2, 0),
    (BatchPolicy(max_batch_size=2, dynamic=True, max_queue_delay_ns=500_000), 1, 3),  # near saturation: refusals
])
def test_simulator_forms_the_same_batches_as_the_server(policy: BatchPolicy, slots: int, max_queue: int) -> None:
    """The simulator's default decision function is the server's, and its batches are the server's."""
    from inferperf.serve import batcher

    assert batcher.decide is decide and batcher.BatchPolicy is BatchPolicy
    arrivals = poisson_ns(1500.0, 1500, seed=12)  # ns apart: no arrival ties a deadline (ties have no order)
    service = Exponential(1.2e6)
    real, real_t, seen, refused = _real_batches(arrivals, policy, slots, service, seed=13, max_queue_size=max_queue)
    sim = simulate(np.asarray(seen), Setup(policy, instances=slots, max_queue_size=max_queue), service, seed=13)
    assert np.flatnonzero(sim.rejected).tolist() == refused
    assert bool(refused) == bool(max_queue)
    order = [i for i in np.argsort(sim.dispatch_ns, kind="stable").tolist() if not sim.rejected[i]]
    sim_batches: list[list[int]] = []
    last = None
    for i in order:
        key = (int(sim.dispatch_ns[i]), int(sim.done_ns[i]))
        if key != last:
            sim_batches.append([])
            last = key
        sim_batches[-1].append(i)
    assert len(real) > 300 and max(map(len, real)) > 1  # batches formed, not one request each
    assert sim_batches == real
    assert np.abs(np.asarray(sorted(set(sim.dispatch_ns[~sim.rejected].tolist()))) - np.asarray(real_t)).max() <= 2_000


# ---------------------------------------------------------------- measured service times, outputs


def test_empirical_model_resamples_the_measured_tail_and_flags_unmeasured_sizes() -> None:
    m = Empirical({1: [1e6] * 99 + [9e6], 8: [4e6] * 100})
    u = np.random.default_rng(0).random(100_000)
    t1 = m.sample_ns(1, u)
    assert set(np.unique(t1).tolist()) == {1_000_000, 9_000_000}
    assert (t1 == 9_000_000).mean() == pytest.approx(0.01, abs=0.002)
    assert m.sample_ns(4, np.array([0.5]))[0] == round(1e6 + 3e6 * 3 / 7)  # same quantile of 1 and 8, by rows
    assert not m.outside
    assert m.sample_ns(16, np.array([0.5]))[0] == 8_000_000
    assert m.outside == {16}
    with pytest.raises(UsageError, match="batch size 2"):
        Empirical({2: []})


def test_summary_parts_and_intervals() -> None:
    policy = BatchPolicy(max_batch_size=8, dynamic=True, max_queue_delay_ns=3_000_000)
    arr = poisson_ns(300.0, 6000, seed=14)
    service = Empirical({1: np.random.default_rng(1).uniform(0.8e6, 1.2e6, 50),
                         8: np.random.default_rng(2).uniform(2e6, 3e6, 50)})
    p = summarize(simulate(arr, Setup(policy), service, decide=decide, seed=1))
    assert p.dominant == "batching_delay"  # a light load waits for the delay, not for an instance
    assert 2.0 < p.tail_ms["batching_delay"] <= 3.0
    assert p.mean_batch_rows > 1 and p.rejected_share == 0 and not p.backlog_growing
    rng = np.random.default_rng(3)

    def one(k: int):  # noqa: ANN202
        return simulate(poisson_ns(300.0, 6000, 100 + k), Setup(policy), service.resampled(rng), decide=decide, seed=k)

    iv = intervals(one, rounds=5)
    assert iv["p99_ms"][0] <= iv["p99_ms"][1] and iv["p50_ms"][0] > 0
    assert iv["throughput_per_s"][0] == pytest.approx(300, rel=0.1)


def test_overload_is_flagged() -> None:
    p = summarize(run(1.3, 20_000, seed=15))
    assert p.backlog_growing and p.throughput_per_s == pytest.approx(MU, rel=0.05)
    p = summarize(run(0.6, 20_000, seed=15))
    assert not p.backlog_growing


def test_mmpp_arrivals_have_the_spell_weighted_rate_and_are_bursty() -> None:
    from inferperf.policy.arrivals import mmpp

    s = mmpp(200.0, 2000.0, 0.5, 0.1, seed=3)
    arr = np.asarray([s.next_offset_ns() for _ in range(60_000)])
    assert np.all(np.diff(arr) >= 0)
    assert s.describe()["rate_per_s"] == pytest.approx((200 * 0.5 + 2000 * 0.1) / 0.6)
    assert arr.size / (arr[-1] / 1e9) == pytest.approx(500.0, rel=0.05)
    counts = np.bincount((arr // 100_000_000).astype(np.int64))[:-1]  # per 100 ms
    assert counts.var() / counts.mean() > 5  # Poisson would be 1
    with pytest.raises(UsageError, match="mmpp"):
        mmpp(10.0, 0.0, 1.0, 1.0)


def test_mmpp_schedules_of_one_seed_share_their_spells_at_any_rate() -> None:
    """Common random numbers (issue 36): the planner compares fleet sizes, i.e. one replica at rate / R for each R;
    the spells come from their own stream of the seed, so every R sees the same bursts (they had been drawn
    interleaved with the arrivals: other spells at every rate, and a p99 that jumped between neighbouring R)."""
    from inferperf.policy.arrivals import mmpp

    def per_100ms(rate: float) -> np.ndarray:
        s = mmpp(0.0, rate, 1.0, 1.0, seed=5)
        arr = np.asarray([s.next_offset_ns() for _ in range(int(rate * 30))])
        return np.bincount((arr // 100_000_000).astype(np.int64), minlength=300)[:300]

    a, b = per_100ms(300.0), per_100ms(3000.0)
    assert np.corrcoef(a, b)[0, 1] > 0.9
