"""The served replica as it runs (issue 39 item 3), each mechanism against its closed form: tandem M/M/1 queues
(the event loop, then the instance), M/D/1 under processor sharing (one core shared by every running call), and
the utilisation law on the cores; and a 1-core replica's ceiling from loop time plus call time."""

from __future__ import annotations

import numpy as np
import pytest

from inferperf.analysis.replica_sim import Replica, simulate_replica
from inferperf.analysis.service_model import Deterministic, Exponential
from inferperf.errors import UsageError


def _poisson(rate_per_s: float, n: int, seed: int) -> np.ndarray:
    gaps = np.random.default_rng(seed).exponential(1e9 / rate_per_s, n)
    return np.round(np.cumsum(gaps)).astype(np.int64)


def _mean_sojourn_ms(run, skip: int = 2000) -> float:  # noqa: ANN001
    return float((run.done_ns[skip:] - run.arrival_ns[skip:]).mean()) / 1e6


def test_tandem_mm1_when_every_thread_has_a_core() -> None:
    """Loop Exp(1 ms) then one instance Exp(2 ms) at 300/s on 2 cores: two M/M/1 queues in tandem (Jackson),
    mean sojourn 1/(1000 - 300) + 1/(500 - 300) s = 6.43 ms."""
    rep = Replica(cores=2, instances=1, loop_in=Exponential(1e6))
    means = [_mean_sojourn_ms(simulate_replica(_poisson(300, 60_000, s), rep, Exponential(2e6), seed=s)[0])
             for s in range(3)]
    assert np.mean(means) == pytest.approx(1e3 / 700 + 1e3 / 200, rel=0.04)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_under_processor_sharing(rho: float) -> None:
    """Calls of D = 1 ms on one core shared by every running call (as many instances as calls in flight, no
    loop): M/D/1-PS, mean sojourn D / (1 - rho), whatever the service distribution (insensitivity)."""
    rep = Replica(cores=1, instances=400, loop_in=None)
    means = [_mean_sojourn_ms(simulate_replica(_poisson(rho * 1000, 40_000, s), rep, Deterministic(1e6), seed=s)[0])
             for s in range(3)]
    assert np.mean(means) == pytest.approx(1.0 / (1 - rho), rel=0.05)
    fifo = Replica(cores=1, instances=1, loop_in=None)  # one thread: FIFO M/D/1, D (1 + rho / (2 (1 - rho)))
    m = _mean_sojourn_ms(simulate_replica(_poisson(rho * 1000, 40_000, 7), fifo, Deterministic(1e6), seed=7)[0])
    assert m == pytest.approx(1.0 * (1 + rho / (2 * (1 - rho))), rel=0.06)


def test_utilisation_law_on_the_cores() -> None:
    """U = X x D: at 1,500/s with 0.3 ms of loop in, 0.1 ms out and 0.2 ms of call, one core is busy 90 % of the
    time, the loop 60 % and the instance 30 %."""
    rep = Replica(cores=1, instances=1, loop_in=Deterministic(0.3e6), loop_out=Deterministic(0.1e6))
    run, busy = simulate_replica(_poisson(1500, 30_000, 3), rep, Deterministic(0.2e6), seed=3)
    x = len(run.arrival_ns) / (busy["span"] / 1e9)
    assert busy["cores"] / busy["span"] == pytest.approx(x * 0.6e-3, rel=0.01)
    assert busy["loop"] / busy["span"] == pytest.approx(x * 0.4e-3, rel=0.01)
    assert busy["instances"] / busy["span"] == pytest.approx(x * 0.2e-3, rel=0.01)
    assert (run.done_ns >= run.batch_end_ns).all() and (run.batch_start_ns >= run.admit_ns).all()


def test_a_one_core_replicas_ceiling_is_loop_plus_call() -> None:
    """0.3 ms loop + 0.06 ms call on one core: the ceiling is 1 / 0.36 ms = 2,778/s, not the call's 16,667/s.
    At 90 % of it the replica keeps up; at 110 % its backlog grows to the end."""
    rep = Replica(cores=1, instances=1, loop_in=Deterministic(0.3e6))
    ok, _ = simulate_replica(_poisson(2500, 20_000, 1), rep, Deterministic(0.06e6), seed=1)
    over, _ = simulate_replica(_poisson(3055, 20_000, 1), rep, Deterministic(0.06e6), seed=1)
    lat_ok = (ok.done_ns - ok.arrival_ns) / 1e6
    lat_over = (over.done_ns - over.arrival_ns) / 1e6
    assert lat_ok[-2000:].mean() < 5 and lat_over[-2000:].mean() > max(100.0, 3 * lat_over[1000:3000].mean())
    with pytest.raises(UsageError):
        simulate_replica([0, 1], Replica(cores=0, instances=1, loop_in=None), Deterministic(1e6))
    with pytest.raises(UsageError):
        simulate_replica([5, 1], Replica(cores=1, instances=1, loop_in=None), Deterministic(1e6))


def test_same_seed_same_run() -> None:
    rep = Replica(cores=1, instances=2, loop_in=Exponential(0.2e6), loop_out=Exponential(0.1e6))
    a, _ = simulate_replica(_poisson(1000, 5000, 2), rep, Exponential(0.5e6), seed=4)
    b, _ = simulate_replica(_poisson(1000, 5000, 2), rep, Exponential(0.5e6), seed=4)
    assert (a.done_ns == b.done_ns).all()


def test_a_call_measured_beside_other_instances_on_fewer_cores_is_simulated_as_its_work_alone() -> None:
    """The ladder ran 2 instances of 1 thread side by side on 1 core, so a measured call (8 ms) holds the other's
    share; the simulator shares the core itself, so it takes 4 ms of work a call (squeezenet: predicted capacity
    108/s against about 200 measured before this). The ceiling is then 1 / (loop + 4 ms), and a lone request
    at low load takes loop + 4 ms, not loop + 8."""
    from types import SimpleNamespace

    from inferperf.analysis.replica_options import alone_factor, option_capacity_per_s, simulate_option
    from inferperf.policy.batching import BatchPolicy

    cand = SimpleNamespace(cores=1, instances=2, threads=1, service=Deterministic(8e6))
    loop = SimpleNamespace(mean_ms=1.0, model=Deterministic(1e6), loop_out_ms=0.0)
    assert alone_factor(cand) == 0.5
    assert option_capacity_per_s(cand, loop) == pytest.approx(1e3 / (1.0 + 4.0))
    opt = SimpleNamespace(candidate=cand, policy=BatchPolicy(max_batch_size=1, dynamic=False))
    sparse = np.arange(200, dtype=np.int64) * 100_000_000  # one request every 100 ms: never two at once
    run = simulate_option(sparse, opt, loop, cand.service, seed=0)
    assert (run.done_ns - run.arrival_ns) / 1e6 == pytest.approx(np.full(200, 5.0), abs=1e-6)
    # enough cores for every thread: the measured call is its work alone
    wide = SimpleNamespace(cores=2, instances=2, threads=1, service=Deterministic(8e6))
    assert alone_factor(wide) == 1.0 and option_capacity_per_s(wide, loop) == pytest.approx(1e3 / 9.0 * 2)


@pytest.mark.parametrize(("instances", "delay_us", "preferred"), [(1, 0, ()), (1, 500, ()), (2, 1000, (2, 4)),
                                                                   (3, 200, ())])
def test_batching_on_forms_the_batches_the_server_forms(instances: int, delay_us: int, preferred: tuple) -> None:
    """Batching on (issue 39: it had kept the old structure). With no loop and a core for every thread the replica
    is the events engine's queue exactly: the same batches (the server's own decide, delay deadlines included),
    the same calls (the same service stream), request for request."""
    from inferperf.analysis.serving_sim import Setup, simulate
    from inferperf.policy.batching import BatchPolicy

    policy = BatchPolicy(max_batch_size=4, dynamic=True, max_queue_delay_ns=delay_us * 1000,
                         preferred_batch_sizes=preferred)
    service = Exponential(1.5e6)
    arr = _poisson(900 * instances, 6000, 11)
    run, _ = simulate_replica(arr, Replica(cores=8, instances=instances, loop_in=None), service, seed=5, policy=policy)
    ref = simulate(arr, Setup(policy, replicas=1, instances=instances), service, seed=5, method="events")
    assert run.batch_requests.max() > 1  # batches did form
    np.testing.assert_array_equal(run.dispatch_ns, ref.dispatch_ns)
    np.testing.assert_array_equal(run.done_ns, ref.done_ns)
    np.testing.assert_array_equal(run.batch_rows, ref.batch_rows)
    np.testing.assert_array_equal(run.batching_ns, ref.batching_ns)
    np.testing.assert_array_equal(np.sort(run.batch_size_rows), np.sort(ref.batch_size_rows))


def test_batching_on_shares_the_core_with_the_loop() -> None:
    """One core, loop 0.2 ms in + 0.1 ms out a request, batches of up to 4 at 0.4 ms + 0.3 ms a row: the work is
    conserved (the cores' busy time is the loop's work plus every call's, U = X x D per call), and the ceiling
    follows from the loop plus the call's share per request, 1 / (0.3 + 1.6 / 4) ms = 1,429/s at full batches, not
    the calls' 2,500/s: at 1,300/s the replica keeps up, at 1,700/s it answers at the ceiling."""
    from inferperf.policy.batching import BatchPolicy

    policy = BatchPolicy(max_batch_size=4, dynamic=True, max_queue_delay_ns=0)
    rep = Replica(cores=1, instances=1, loop_in=Deterministic(0.2e6), loop_out=Deterministic(0.1e6))
    service = Deterministic(400_000, 300_000)
    run, busy = simulate_replica(_poisson(1300, 20_000, 2), rep, service, seed=2, policy=policy)
    calls = sum(0.4e6 + 0.3e6 * k for k in run.batch_size_rows)
    assert busy["loop"] == pytest.approx(0.3e6 * len(run.arrival_ns), rel=1e-6)
    assert busy["instances"] == pytest.approx(calls, rel=1e-6)
    assert busy["cores"] == pytest.approx(busy["loop"] + busy["instances"], rel=1e-6)  # one core: never idle-shared
    lag = run.done_ns - run.arrival_ns
    assert lag[-2000:].mean() < 3 * lag[2000:4000].mean() and run.batch_requests.mean() > 1.5
    over, _ = simulate_replica(_poisson(1700, 20_000, 2), rep, service, seed=2, policy=policy)
    assert len(over.arrival_ns) / (over.done_ns.max() / 1e9) == pytest.approx(1e3 / 0.7, rel=0.01)  # the ceiling
    assert over.batch_requests.mean() > 3.99  # overloaded, every batch is full


def test_the_loops_per_call_part_is_paid_once_per_call_before_the_answers() -> None:
    """The loop's per-call work (the instance's hand-back) is a loop job of its own when a call ends, before its
    requests' out parts: the loop's busy time is per request x requests + per call x calls exactly (the
    utilisation law), a lone request takes in + call + per call + out, and with full batches of 4 on one core the
    ceiling is 1 / (0.1 + 0.4 / 4 + 0.2 / 4) ms = 4,000/s (the per-call part shared by the batch's requests).
    With no queue delay the batches stay small (1.3 requests: the loop hands requests over one at a time and the
    free instance takes each at once), so the loop pays its per-call part more often and the replica carries
    1,800/s: the batcher's delay is what lets a loop-bound replica reach its full-batch ceiling."""
    from inferperf.policy.batching import BatchPolicy

    rep = Replica(cores=1, instances=1, loop_in=Deterministic(0.1e6), loop_batch=Deterministic(0.4e6))
    sparse = np.arange(100, dtype=np.int64) * 10_000_000
    run, busy = simulate_replica(sparse, rep, Deterministic(0.2e6), seed=0)
    assert (run.done_ns - run.arrival_ns) == pytest.approx(np.full(100, 0.7e6), abs=1)
    assert (run.done_ns >= run.batch_end_ns + 0.4e6 - 1).all()
    policy = BatchPolicy(max_batch_size=4, dynamic=True, max_queue_delay_ns=2_000_000)
    run, busy = simulate_replica(_poisson(3000, 20_000, 4), rep, Deterministic(0.2e6), seed=4, policy=policy)
    calls = len(run.batch_start_ns)
    assert busy["loop"] == pytest.approx(0.1e6 * 20_000 + 0.4e6 * calls, rel=1e-6)
    assert busy["cores"] == pytest.approx(busy["loop"] + 0.2e6 * calls, rel=1e-6)
    over, _ = simulate_replica(_poisson(4600, 20_000, 4), rep, Deterministic(0.2e6), seed=4, policy=policy)
    assert over.batch_requests.mean() > 3.99
    assert len(over.arrival_ns) / (over.done_ns.max() / 1e9) == pytest.approx(4000, rel=0.01)
    eager = BatchPolicy(max_batch_size=4, dynamic=True, max_queue_delay_ns=0)
    small, _ = simulate_replica(_poisson(4600, 20_000, 4), rep, Deterministic(0.2e6), seed=4, policy=eager)
    assert small.batch_requests.mean() < 1.5
    b = small.batch_requests.mean()  # U = X x D on the one core at saturation: X = 1 / (0.1 + (0.4 + 0.2) / b) ms
    assert len(small.arrival_ns) / (small.done_ns.max() / 1e9) == pytest.approx(1e3 / (0.1 + 0.6 / b), rel=0.01)


def test_the_gil_serialises_python_parts_as_one_fifo_server() -> None:
    """Calls that are all Python (1 ms of batch assembly, a 1 ns runtime call) on 8 instances with 8 cores: without
    the GIL each request takes its 1 ms alone (M/D/infinity); with it the instances take the GIL in turn, one FIFO
    server: M/D/1, mean sojourn D (1 + rho / (2 (1 - rho))) (Pollaczek-Khinchine)."""
    for rho in (0.5, 0.8):
        arr = _poisson(rho * 1000, 40_000, 9)
        free = Replica(cores=8, instances=8, loop_in=None, call_in=Deterministic(1_000_000))
        held = Replica(cores=8, instances=8, loop_in=None, call_in=Deterministic(1_000_000), gil=True)
        assert _mean_sojourn_ms(simulate_replica(arr, free, Deterministic(1), seed=1)[0]) == pytest.approx(1.0, abs=1e-5)
        m = _mean_sojourn_ms(simulate_replica(arr, held, Deterministic(1), seed=1)[0])
        assert m == pytest.approx(1.0 * (1 + rho / (2 * (1 - rho))), rel=0.06)


def test_the_gil_bounds_a_many_core_replica_by_its_python_work() -> None:
    """8 cores, loop 0.3 ms a request, calls of 0.1 ms Python in + 0.2 ms runtime + 0.1 ms Python out, 2 instances.
    Without the GIL the loop bounds it (1 / 0.3 ms = 3,333/s); with it the loop and the calls' Python parts take
    turns: 1 / (0.3 + 0.2) ms = 2,000/s with the GIL always held (its utilisation law, X x 0.5 ms, also below
    saturation), and a lone request still takes 0.3 + 0.4 ms (nobody to wait for). With 1 instance the instance
    waits for the GIL at each Python part while the loop holds it, so the replica carries less than the GIL's
    bound."""
    kw = dict(cores=8, instances=2, loop_in=Deterministic(300_000), call_in=Deterministic(100_000),
              call_out=Deterministic(100_000))
    held, free = Replica(**kw, gil=True), Replica(**kw)
    run_f = Deterministic(200_000)
    sparse = np.arange(50, dtype=np.int64) * 10_000_000
    lone, _ = simulate_replica(sparse, held, run_f, seed=0)
    assert (lone.done_ns - lone.arrival_ns) == pytest.approx(np.full(50, 700_000), abs=1)
    run, busy = simulate_replica(_poisson(1500, 30_000, 5), held, run_f, seed=5)
    x = len(run.arrival_ns) / (busy["span"] / 1e9)
    assert busy["gil"] / busy["span"] == pytest.approx(x * 0.5e-3, rel=0.01)
    over = _poisson(2300, 30_000, 5)
    rate = {}
    for name, rep in (("gil", held), ("free", free), ("one", Replica(**{**kw, "instances": 1}, gil=True))):
        r, b = simulate_replica(over, rep, run_f, seed=5)
        rate[name] = len(r.arrival_ns) / (r.done_ns.max() / 1e9)
        if name == "gil":
            assert b["gil"] / b["span"] == pytest.approx(1.0, abs=1e-3)
    assert rate["gil"] == pytest.approx(2000, rel=0.01)
    assert rate["free"] == pytest.approx(len(over) / (over[-1] / 1e9), rel=0.01)  # keeps up with 2,300/s
    assert rate["one"] < 0.9 * rate["gil"]
