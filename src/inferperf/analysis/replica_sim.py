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

- **The GIL** (``gil``): the loop's jobs and each call's Python parts (``call_in``: batch assembly and the runtime
  call's entry; ``call_out``: the return and the split per request) hold Python's GIL, one holder at a time; the
  runtime call releases it. A thread waiting for it sleeps (it takes no core). It is handed over at the holder's
  release points (a loop job's end, a Python part's end) to the first waiter, never by a forced switch
  (:class:`_Gil`; benchmarks/gil_switch.py). On one core this only orders the work (the core is busy whenever
  anyone holds the GIL); with more cores it bounds the replica at ``1 / (loop + Python per request)`` and makes a
  lone instance wait for the loop at each Python part.

Left out: CFS's slice granularity (a thread that wakes may wait up to a slice; the run-queue waits the calibration
measures), the GIL released inside a loop job (a loop job is one callback chain: it reaches a syscall at its end),
and the asyncio iteration (the batcher runs after the ready callbacks of one ``epoll_wait``; here it sees each
request as the loop hands it over).

Closed forms it is tested against: tandem M/M/1 queues (cores enough for every thread), M/D/1 under processor
sharing (mean sojourn D / (1 - rho), one core shared by as many instances as requests), M/D/1 FIFO through the GIL
(calls all Python on as many cores as instances), and the utilisation law U = X x D (the cores' and the GIL's
busy share is the rate times the work per request).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError
from ..policy.batching import decide
from .service_model import ServiceModel, ServiceStream, stream_seed
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
        call_in, call_out: an instance's Python work per call (ns, by rows) before the runtime call (batch
            assembly, the call's entry) and after it (the return, the split per request), or None.
        gil: the loop's work and the instances' Python parts hold Python's GIL (one holder at a time); the
            runtime call itself releases it.
    """

    cores: int
    instances: int
    loop_in: ServiceModel | None
    loop_out: ServiceModel | None = None
    threads_per_instance: int = 1
    loop_batch: ServiceModel | None = None
    call_in: ServiceModel | None = None
    call_out: ServiceModel | None = None
    gil: bool = False

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


#: the event loop's id for :class:`_Gil` (instances are 0, 1, ...)
LOOP = -1


class _Gil:
    """Python's GIL as the simulator holds it: one holder, waiters served in the order they asked, the GIL handed
    to the first waiter when the holder releases it (the end of a loop job, the end of an instance's Python
    part: the points where CPython's holder drops it and a waiter takes it), never by a forced switch
    (benchmarks/gil_switch.py: a 20 ms switch interval served tiny-cnn no worse than the default 5 ms). ``on``
    False: every thread holds it whenever it wants (no GIL)."""

    __slots__ = ("holder", "on", "waiting")

    def __init__(self, on: bool) -> None:
        self.on, self.holder, self.waiting = on, None, deque()

    def want(self, who: int) -> None:
        """``who`` asks for the GIL: it holds it at once if free, else waits its turn."""
        if not self.on or self.holder == who or who in self.waiting:
            return
        if self.holder is None:
            self.holder = who
        else:
            self.waiting.append(who)

    def holds(self, who: int) -> bool:
        """Whether ``who`` may run Python now."""
        return not self.on or self.holder == who

    def release(self, who: int) -> None:
        """``who`` is done with its Python part: the first waiter holds the GIL next."""
        if self.on and self.holder == who:
            self.holder = self.waiting.popleft() if self.waiting else None


def _draws(model: ServiceModel | None, n: int, seed: int, stage: int) -> np.ndarray | None:
    return None if model is None else ServiceStream(model, stream_seed(seed, 0, stage)).take_ns(np.ones(n, np.int64))


def simulate_replica(arrivals_ns: Any, replica: Replica, service: ServiceModel, *, seed: int = 0,
                     policy: Any = None) -> tuple[SimRun, dict[str, float]]:
    """Simulate ``arrivals_ns`` (int ns from 0, sorted) through one replica until every request is answered.

    Args:
        service: model-call time alone (ns) by rows (a batch of ``k`` one-row requests has ``k`` rows). seed:
            seeds the six work streams (calls: stage 0, loop in: 1, loop out: 2, loop per call: 3, a call's
            Python in: 4, out: 5;
            :func:`~.service_model.stream_seed`). policy: the batcher's
            (:class:`~inferperf.policy.batching.BatchPolicy`); None or ``dynamic`` off: one call per request,
            else the batches the server's own :func:`~inferperf.policy.batching.decide` forms, evaluated
            whenever an instance is free and a request reaches the batcher, and at the oldest request's
            ``max_queue_delay`` deadline. The loop's work is per request (``loop_in``, ``loop_out``) and per
            model call (``loop_batch``: :func:`inferperf.plan.calibrate.split_loop_cost`'s two parts).

    Returns:
        (:class:`~.serving_sim.SimRun`: ``admit_ns`` when the loop handed the request to the batcher,
        ``dispatch_ns`` its call's start, ``done_ns`` when its out part ended, one entry per model call in the
        ``batch_*`` arrays), and busy time in ns: ``{"cores", "loop", "instances", "gil", "span"}`` (``cores``:
        integral of the cores in use; ``gil``: time the GIL was held).

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
    # (requests, work left, start, phase 0 = Python in / 1 = runtime / 2 = Python out, runtime work, out work)
    inst: list[list[Any]] = [[None, 0.0, 0.0, 0, 0.0, 0.0] for _ in range(replica.instances)]
    py_in = None if replica.call_in is None else ServiceStream(replica.call_in, stream_seed(seed, 0, 4))
    py_out = None if replica.call_out is None else ServiceStream(replica.call_out, stream_seed(seed, 0, 5))
    gil = _Gil(replica.gil)
    free: deque[tuple[int, float]] = deque((k, 0.0) for k in range(replica.instances))  # (instance, free since)
    busy = {"cores": 0.0, "loop": 0.0, "instances": 0.0, "gil": 0.0}
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
            s = inst[k]
            s[0], s[2], s[3] = reqs, t, 0
            s[1] = float(py_in.next_ns(take)) if py_in is not None else 0.0
            s[4] = float(calls.next_ns(take))
            s[5] = float(py_out.next_ns(take)) if py_out is not None else 0.0
            if s[1] > _EPS:
                gil.want(k)
            else:
                next_phase(k)
            started = True
        return started

    def next_phase(k: int) -> None:
        # instance k's current phase has ended: release the GIL after a Python part, go on (zero-work parts skip)
        s = inst[k]
        while True:
            if s[3] != 1:
                gil.release(k)
            if s[3] == 2:
                reqs, s[0] = s[0], None
                batches.append((s[2], t, len(reqs), len(reqs)))
                free.append((k, t))
                finish_call(reqs)
                return
            s[3] += 1
            s[1] = s[4] if s[3] == 1 else s[5]
            if s[1] > _EPS:
                if s[3] == 2:
                    gil.want(k)
                return

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
                    gil.want(LOOP)
                progressed = True
            progressed = dispatch_batches() or progressed
        # runnable: the loop with its job (and the GIL), each instance in its runtime call (its intra-op threads)
        # or in a Python part with the GIL; a thread waiting for the GIL sleeps
        loop_on = loop_job[0] is not None and gil.holds(LOOP)
        running = [s for k, s in enumerate(inst) if s[0] is not None and (s[3] == 1 or gil.holds(k))]
        width = (1 if loop_on else 0) + sum(tpi if s[3] == 1 else 1 for s in running)
        speed = 1.0 if width <= cores else cores / width
        next_done = min([s[1] for s in running] + ([loop_job[1]] if loop_on else []), default=np.inf) / speed
        next_arr = arr[i] - t if i < n else np.inf
        dt = max(0.0, min(next_done, next_arr, timer - t))
        if not np.isfinite(dt):
            raise RuntimeError("replica simulation stalled")  # unreachable: every request has work queued
        busy["cores"] += min(width, cores) * dt
        busy["gil"] += dt if gil.holder is not None else 0.0
        if loop_on:
            loop_job[1] -= dt * speed
            busy["loop"] += dt * speed
        for s in running:
            s[1] -= dt * speed
            busy["instances"] += dt * speed * (tpi if s[3] == 1 else 1)
        t = timer if dt == timer - t else t + dt  # land on the deadline exactly (decide compares it)
        while i < n and arr[i] <= t + _EPS:
            if w_in is None:
                admit[i] = arr[i]
                batch_q.append(_Queued(i, float(arr[i])))
            else:
                loop_q.append((i, 0))
            i += 1
        if loop_on and loop_job[1] <= _EPS:
            (r, phase), loop_job[0] = loop_job[0], None
            gil.release(LOOP)
            loop_done(r, phase)
        for k, s in enumerate(inst):
            if s[0] is not None and s[1] <= _EPS and (s[3] == 1 or gil.holds(k)):
                next_phase(k)
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


__all__ = ["LOOP", "Replica", "simulate_replica"]
