"""One served replica as it runs on its own cores (issue 39 item 3): the event loop is a queue of its own, with
each request's decode (and HTTP read) before the batcher and its encode (and write) after the model call, the
instances are threads beside it in the same process, and the replica's cores are shared among whatever threads
are runnable. Batching off, each request is one model call (the server's batcher with ``dynamic`` off hands
each request to the first free instance, in arrival order); batching on, the server's own
:func:`~inferperf.policy.batching.decide` forms the batches from the requests the loop has handed over, at the
times the server would call it. Pure and seeded; no clock.

Mechanisms:

- **Event loop**: one thread, FIFO over its jobs in the order they became ready (uvicorn's ready queue): a
  request's "in" part (``loop_in``: read, decode, hand to the batcher) on arrival, its "out" part (``loop_out``:
  encode, write) when its model call ends. ``loop_out`` None: no out part (the answer leaves at the call's end).
  ``loop_batch``: the loop's work once per model call (the instance thread's hand-back, ``run_in_executor``'s
  future completed through ``call_soon_threadsafe``, and the batcher's bookkeeping), a job of its own when the call
  ends, before that call's requests' out parts become ready; None: none (every loop cost counted per request).
- **Instances**: ``instances`` threads, each running one call at a time, fed from one FIFO queue (the batcher's).
  A call's work is its time alone on its threads (``service``, drawn per call at the call's rows: the measured
  bench latency at that batch size); an instance of ``threads_per_instance`` intra-op threads is that many runnable threads while it runs.
- **Shared cores** (egalitarian processor sharing among runnable OS threads, as Linux's CFS approximates for
  threads of equal weight over intervals longer than its slice): with ``W`` runnable threads on ``cores`` cores,
  each busy station progresses at ``min(1, cores / W)`` of its own speed. So a 1-core replica's ceiling follows
  from loop time plus call time, not from the call alone.

Left out: Python's GIL (the loop and the instances' Python parts, batch assembly and the runtime call's entry,
take turns on it; on a 1-core replica that is already serialised by the core, so 1-core replicas are modelled
exactly as far as the mechanisms above go, and with more cores the model lets those parts overlap), and CFS's
slice granularity (a thread that wakes may wait up to a slice; the run-queue waits the calibration measures).

Closed forms it is tested against: tandem M/M/1 queues (cores enough for every thread), M/D/1 under processor
sharing (mean sojourn D / (1 - rho), one core shared by as many instances as requests), and the utilisation law
U = X x D (the cores' busy share is the rate times the work per request).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError
from ..policy.batching import decide
from .service_model import Deterministic, ServiceModel, ServiceStream, stream_seed
from .serving_sim import Setup, SimRun

#: a station's remaining work at or under this (ns) counts as done (float rounding of the shared speeds)
_EPS = 1e-6


@dataclass(frozen=True)
class Replica:
    """One replica's threads and cores.

    Attributes:
        cores: CPUs the replica's threads share (>= 1). instances: model instances (threads), >= 1.
        threads_per_instance: runnable threads an instance's call keeps busy (its intra-op threads), >= 1.
        loop_in: event-loop work per request before the batcher (ns). loop_out: after the call (ns), or None.
        loop_batch: event-loop work per model call (ns), after the call and before its requests' out parts, or
            None.
    """

    cores: int
    instances: int
    loop_in: ServiceModel | None
    loop_out: ServiceModel | None = None
    threads_per_instance: int = 1
    loop_batch: ServiceModel | None = None

    def check(self) -> None:
        """Raises UsageError naming the bad field."""
        if self.cores < 1 or self.instances < 1 or self.threads_per_instance < 1:
            raise UsageError(f"replica: cores {self.cores}, instances {self.instances}, threads per instance "
                             f"{self.threads_per_instance}: each must be >= 1")


class _Queued:
    """A request at the batcher, as :func:`~inferperf.policy.batching.decide` reads it (one row each)."""

    __slots__ = ("arrival_ns", "idx")
    rows = 1
    key = None

    def __init__(self, idx: int, arrival_ns: float) -> None:
        self.idx, self.arrival_ns = idx, arrival_ns


def _draws(model: ServiceModel | None, n: int, seed: int, stage: int) -> np.ndarray | None:
    return None if model is None else ServiceStream(model, stream_seed(seed, 0, stage)).take_ns(np.ones(n, np.int64))


def simulate_replica(arrivals_ns: Any, replica: Replica, service: ServiceModel, *, seed: int = 0,
                     policy: Any = None) -> tuple[SimRun, dict[str, float]]:
    """Simulate ``arrivals_ns`` (int ns from 0, sorted) through one replica until every request is answered.

    Args:
        service: model-call time alone (ns) by rows (a batch of ``k`` one-row requests has ``k`` rows). seed:
            seeds the four work streams (calls: stage 0, loop in: 1, loop out: 2, loop per call: 3;
            :func:`~.service_model.stream_seed`). policy: the batcher's
            (:class:`~inferperf.policy.batching.BatchPolicy`); None or ``dynamic`` off: one call per request,
            else the batches the server's own :func:`~inferperf.policy.batching.decide` forms, evaluated
            whenever an instance is free and a request reaches the batcher, and at the oldest request's
            ``max_queue_delay`` deadline. The loop's work is per request (``loop_in``, ``loop_out``) and per
            model call (``loop_batch``: :func:`inferperf.plan.calibrate.split_loop_cost`'s two parts).

    Returns:
        (:class:`~.serving_sim.SimRun`: ``admit_ns`` when the loop handed the request to the batcher,
        ``dispatch_ns`` its call's start, ``done_ns`` when its out part ended, one entry per model call in the
        ``batch_*`` arrays), and busy time in ns: ``{"cores", "loop", "instances", "span"}`` (``cores``: integral
        of the cores in use).

    Raises:
        UsageError: a bad replica, unsorted or negative arrivals.
    """
    replica.check()
    arr = np.asarray(arrivals_ns, dtype=np.int64).ravel()
    if arr.size and (arr[0] < 0 or np.any(np.diff(arr) < 0)):
        raise UsageError("simulated arrivals must be non-negative and sorted ascending")
    n = arr.size
    dynamic = policy is not None and getattr(policy, "dynamic", False)
    calls = ServiceStream(service, stream_seed(seed, 0, 0))
    w_in, w_out = _draws(replica.loop_in, n, seed, 1), _draws(replica.loop_out, n, seed, 2)
    w_batch = None if replica.loop_batch is None else ServiceStream(replica.loop_batch, stream_seed(seed, 0, 3))
    handed: list[tuple[list[int], float]] = []  # per ended call waiting for the loop: (its requests, loop work)
    admit, dispatch, done, batching, brows = (np.zeros(n) for _ in range(5))
    batches: list[tuple[float, float, int, int]] = []  # (start, end, rows, requests) per model call
    loop_q: deque[tuple[int, int]] = deque()  # (request, 0 = in / 1 = out) or (index into handed, 2)
    batch_q: deque[_Queued] = deque()
    loop_job: list[Any] = [None, 0.0]  # (request, phase) and remaining work
    inst: list[list[Any]] = [[None, 0.0, 0.0] for _ in range(replica.instances)]  # (requests, work left, start)
    free: deque[tuple[int, float]] = deque((k, 0.0) for k in range(replica.instances))  # (instance, free since)
    busy = {"cores": 0.0, "loop": 0.0, "instances": 0.0}
    t, i, answered = 0.0, 0, 0
    timer = np.inf  # the oldest waiting request's max_queue_delay deadline (batching on)
    tpi, cores = replica.threads_per_instance, replica.cores

    def finish_in(r: int) -> None:
        admit[r] = t
        batch_q.append(_Queued(r, t))

    def finish_call(reqs: list[int]) -> None:
        if w_batch is not None:
            handed.append((reqs, float(w_batch.next_ns(1))))
            loop_q.append((len(handed) - 1, 2))
        else:
            outs(reqs)

    def outs(reqs: list[int]) -> None:
        for r in reqs:
            if w_out is None:
                answer(r)
            else:
                loop_q.append((r, 1))

    def answer(r: int) -> None:
        nonlocal answered
        done[r] = t
        answered += 1

    def loop_done(r: int, phase: int) -> None:
        if phase == 0:
            finish_in(r)
        elif phase == 1:
            answer(r)
        else:
            outs(handed[r][0])

    def loop_work(r: int, phase: int) -> float:
        return float(handed[r][1] if phase == 2 else (w_in if phase == 0 else w_out)[r])  # type: ignore[index]

    def dispatch_batches() -> bool:
        nonlocal timer
        started = False
        timer = np.inf
        while batch_q and free:
            # a picosecond over t: a deadline reached in float arithmetic counts as reached
            take, until = decide(batch_q, t + 1e-3, policy) if dynamic else (1, None)
            if take == 0:
                timer = float(until)
                break
            reqs = [batch_q.popleft().idx for _ in range(take)]
            k, since = free.popleft()
            for r in reqs:
                dispatch[r] = t
                batching[r] = t - max(admit[r], since)
                brows[r] = take
            inst[k][0], inst[k][1], inst[k][2] = reqs, float(calls.next_ns(take)), t
            started = True
        return started

    while answered < n:
        # start what can start at t: the loop's next job, batches on free instances (zero-work jobs end at once)
        progressed = True
        while progressed:
            progressed = False
            if loop_job[0] is None and loop_q:
                r, phase = loop_q.popleft()
                work = loop_work(r, phase)
                if work <= _EPS:
                    loop_done(r, phase)
                else:
                    loop_job[0], loop_job[1] = (r, phase), float(work)
                progressed = True
            progressed = dispatch_batches() or progressed
        running = [s for s in inst if s[0] is not None]
        width = (1 if loop_job[0] is not None else 0) + tpi * len(running)
        speed = 1.0 if width <= cores else cores / width
        next_done = min([s[1] for s in running] + ([loop_job[1]] if loop_job[0] is not None else []),
                        default=np.inf) / speed
        next_arr = arr[i] - t if i < n else np.inf
        dt = max(0.0, min(next_done, next_arr, timer - t))
        if not np.isfinite(dt):
            raise RuntimeError("replica simulation stalled")  # unreachable: every request has work queued
        busy["cores"] += min(width, cores) * dt
        if loop_job[0] is not None:
            loop_job[1] -= dt * speed
            busy["loop"] += dt * speed
        for s in running:
            s[1] -= dt * speed
            busy["instances"] += dt * speed * tpi
        t = timer if dt == timer - t else t + dt  # land on the deadline exactly (decide compares it)
        while i < n and arr[i] <= t + _EPS:
            if w_in is None:
                admit[i] = arr[i]
                batch_q.append(_Queued(i, float(arr[i])))
            else:
                loop_q.append((i, 0))
            i += 1
        if loop_job[0] is not None and loop_job[1] <= _EPS:
            (r, phase), loop_job[0] = loop_job[0], None
            loop_done(r, phase)
        for k, s in enumerate(inst):
            if s[0] is not None and s[1] <= _EPS:
                reqs, s[0] = s[0], None
                batches.append((s[2], t, len(reqs), len(reqs)))
                free.append((k, t))
                finish_call(reqs)
    busy["span"] = float(done.max() - arr[0]) if n else 0.0
    b = np.array(batches, dtype=float).reshape(-1, 4)
    b = b[np.argsort(b[:, 0], kind="stable")]  # calls in the order they started
    as_int = lambda x: np.round(x).astype(np.int64)  # noqa: E731
    nb = b.shape[0]
    run = SimRun(arrival_ns=arr, replica=np.zeros(n, np.int32), admit_ns=as_int(admit), dispatch_ns=as_int(dispatch),
                 done_ns=as_int(done), batching_ns=as_int(batching), rejected=np.zeros(n, bool),
                 batch_rows=as_int(brows), batch_start_ns=as_int(b[:, 0]), batch_end_ns=as_int(b[:, 1]),
                 batch_size_rows=as_int(b[:, 2]), batch_requests=as_int(b[:, 3]), batch_replica=np.zeros(nb, np.int32),
                 setup=Setup(policy, 1, replica.instances), method="shared cores", seed=seed)
    return run, busy


def replica_capacity_per_s(cores: int, instances: int, threads_per_instance: int, loop_ms: float,
                           call_ms: float, rows: int = 1, loop_batch_ms: float = 0.0) -> float:
    """Requests per s a replica carries at most with calls of ``rows`` one-row requests taking ``call_ms`` each
    (batching off: ``rows`` 1): the least of its instances' (``instances x rows / call``), its event loop's
    (``1 / (loop + loop_batch / rows)``: ``loop_ms`` per request, ``loop_batch_ms`` per model call) and its
    cores' (``cores / (loop + loop_batch / rows + threads x call / rows)``: every request needs that much CPU; the
    utilisation law U = X x D). Times in ms.

    Raises:
        ValueError: a time that is not positive (``loop_batch_ms`` negative), or ``rows`` < 1.
    """
    if not (loop_ms > 0 and call_ms > 0 and rows >= 1 and loop_batch_ms >= 0):
        raise ValueError("replica capacity needs loop and call times > 0 ms, a per-call loop time >= 0 and rows >= 1")
    loop = loop_ms + loop_batch_ms / rows
    return 1e3 * min(instances * rows / call_ms, 1 / loop, cores / (loop + threads_per_instance * call_ms / rows))


def alone_factor(candidate: Any) -> float:
    """How much of a measured call's time is its own work: ``min(1, cores / (instances x threads))``.

    The ladder runs a candidate's instances side by side, each calling in a closed loop on the replica's own
    CPUs (:func:`inferperf.plan.ladder.ladder_configs`), so with more runnable threads than cores each measured
    call already holds its share of the others' (2 instances of 1 thread on 1 core: squeezenet 8.5 ms a call
    against 4.2 ms alone). The simulator shares the cores itself, so it takes the call's work alone: the
    measured time x this factor. Without it the sharing was counted twice (squeezenet 2 instances on 1 core:
    capacity predicted 108/s against about 200 measured)."""
    want = candidate.instances * candidate.threads
    return min(1.0, candidate.cores / want) if want > 0 else 1.0


class Scaled:
    """A :class:`~inferperf.analysis.service_model.ServiceModel` whose times are ``inner``'s x ``factor``."""

    def __init__(self, inner: Any, factor: float) -> None:
        self.inner, self.factor = inner, float(factor)

    def sample_ns(self, rows: int, u: np.ndarray) -> np.ndarray:
        """``inner``'s times for these uniforms, scaled (int64 ns)."""
        return np.round(self.inner.sample_ns(rows, u) * self.factor).astype(np.int64)

    def mean_ns(self, rows: int) -> float:
        """``inner``'s mean at ``rows`` rows, scaled."""
        return float(self.inner.mean_ns(rows)) * self.factor

    def describe(self) -> dict[str, Any]:
        """``inner``'s description with the factor."""
        return {**self.inner.describe(), "scaled_by": self.factor}


def _alone(candidate: Any, service: Any) -> Any:
    f = alone_factor(candidate)
    return service if f >= 1.0 else Scaled(service, f)


def _replica_of(candidate: Any, calibrated: Any) -> Replica:
    """The replica a plan candidate runs as, with a calibrated loop (an ``Overhead`` with ``calibrated``)."""
    out_ns = round(calibrated.loop_out_ms * 1e6)
    batch_ns = round(getattr(calibrated, "loop_batch_ms", 0.0) * 1e6)
    return Replica(candidate.cores, candidate.instances, calibrated.model,
                   Deterministic(out_ns) if out_ns > 0 else None, candidate.threads,
                   Deterministic(batch_ns) if batch_ns > 0 else None)


def simulate_option(arrivals_ns: Any, opt: Any, calibrated: Any, service: ServiceModel, seed: int) -> SimRun:
    """A plan option's one replica (``opt.candidate``: cores, instances, threads) as it runs, with the calibrated
    loop, calls drawn from ``service`` as their work alone (:func:`alone_factor`; :func:`simulate_replica`)."""
    return simulate_replica(arrivals_ns, _replica_of(opt.candidate, calibrated), _alone(opt.candidate, service),
                            seed=seed, policy=opt.policy)[0]


def option_capacity_per_s(candidate: Any, calibrated: Any, policy: Any = None) -> float:
    """:func:`replica_capacity_per_s` of a plan candidate with the calibrated loop (per request, and per model call
    where the calibration split it), its calls' mean times taken as their work alone (:func:`alone_factor`): at one row with batching off (``policy`` None or ``dynamic`` off),
    else at the measured batch size up to ``policy.max_batch_size`` that gives the most (a saturated batcher
    sends full batches)."""
    dynamic = policy is not None and getattr(policy, "dynamic", False)
    measured = getattr(candidate.service, "sizes", None) or range(1, policy.max_batch_size + 1) if dynamic else ()
    sizes = [b for b in measured if b <= policy.max_batch_size] if dynamic else [1]
    f = alone_factor(candidate)
    per_call = float(getattr(calibrated, "loop_batch_ms", 0.0) or 0.0)
    return max(replica_capacity_per_s(candidate.cores, candidate.instances, candidate.threads, calibrated.mean_ms,
                                      candidate.service.mean_ns(b) * f / 1e6, rows=b, loop_batch_ms=per_call)
               for b in sizes or [1])


__all__ = ["Replica", "Scaled", "alone_factor", "option_capacity_per_s", "replica_capacity_per_s", "simulate_option", "simulate_replica"]
