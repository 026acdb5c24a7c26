"""A serving fleet in virtual time: open-loop arrivals -> load balancer -> R replicas, each the server's own
dynamic batcher in front of I model instances (a discrete-event simulation; pure, seeded, no clock).

Per replica, in order: the server's own work per request (HTTP, decode, encode: one FIFO worker, the event
loop, drawing from ``overhead``; skipped when None), admission to the batcher queue (``max_queue_size``
waiting requests, the next one is rejected, as :class:`~inferperf.serve.batcher.DynamicBatcher`), batch
formation by the **server's own decision function** (:func:`inferperf.policy.batching.decide`, the one
``serve/`` runs, so the simulation cannot drift from it; a caller may pass another), and I instances, each running one batch at a time for a time drawn from ``service`` at the batch's
rows. Like the server, ``decide`` is asked whenever an instance is free and something changed (an arrival, a
batch finished, the oldest request's delay ran out).

Balancers: ``round-robin`` (request ``i`` to replica ``i mod R``), ``random`` (uniform, seeded),
``least-outstanding`` (fewest requests admitted and not finished; ties to the lowest index) and
``power-of-two`` (two distinct replicas at random, the one with fewer outstanding; Mitzenmacher 2001).

Two engines, one semantics: an event loop (heap of completions and delay timers, arrivals merged in order)
for everything, and for batching off with unbounded queues the FIFO recursions. With a state-blind balancer
(round-robin, random) they are vectorised where possible: one worker ``D_i = max(A_i, D_{i-1}) + S_i``
(Lindley 1952), written as ``C_i + max_{k<=i}(A_k - C_{k-1})`` with ``C`` the running sum of ``S``; I
instances by the Kiefer-Wolfowitz (1955) recursion (the i-th request starts at the later of its arrival and
the earliest free instance). With a state-aware balancer (least-outstanding, power-of-two) one loop over the
arrivals runs every replica's recursion jointly: a request's end is known when it is routed (FIFO: only the
earlier requests of its replica matter), so the outstanding counts at the next arrival are the routed
requests whose end is later (a heap of ends; an end at the arrival's instant counts as done, as in the event
loop). All draw the k-th model call's time from the k-th uniform of the replica's stream
(:class:`~.service_model.ServiceStream`), so they give identical runs (tested); ``method`` names the one used.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UsageError
from ..policy.batching import decide as batching_decide
from .service_model import ServiceModel, ServiceStream, stream_seed

BALANCERS = ("round-robin", "random", "least-outstanding", "power-of-two")
#: ``decide(queue, now_ns, policy) -> (take, wait_until_ns)``: the batcher's pure rule
DecideFn = Callable[[Sequence[Any], int, Any], tuple[int, "int | None"]]


@dataclass(frozen=True)
class Setup:
    """What is simulated.

    Attributes:
        policy: the batcher's policy (:class:`inferperf.policy.batching.BatchPolicy`: ``dynamic``, ``max_batch_size``, ``max_queue_delay_ns``,
            ``preferred_batch_sizes``), handed to ``decide`` as it is.
        replicas: R servers behind the balancer (>= 1).
        instances: I model instances per replica (>= 1).
        max_queue_size: requests that may wait per replica (0 = unbounded); the next is rejected.
        balancer: one of :data:`BALANCERS`.
    """

    policy: Any
    replicas: int = 1
    instances: int = 1
    max_queue_size: int = 0
    balancer: str = "round-robin"

    def check(self) -> None:
        """Raises UsageError naming the bad field."""
        if self.replicas < 1 or self.instances < 1 or self.max_queue_size < 0:
            raise UsageError(f"replicas {self.replicas}, instances {self.instances}, max queue {self.max_queue_size}: "
                             "need replicas >= 1, instances >= 1, max queue >= 0")
        if self.balancer not in BALANCERS:
            raise UsageError(f"balancer {self.balancer!r}: use one of {', '.join(BALANCERS)}")


@dataclass
class SimRun:
    """One simulated run; per-request arrays in arrival order (times int64 ns from 0; -1 = rejected).

    Attributes:
        arrival_ns: intended send times. replica: the replica each went to (int32).
        admit_ns: when the batcher queue took it (after the server's own work). dispatch_ns / done_ns: its
            batch's start and end. batching_ns: the part of its wait while an instance was free (waiting for
            the batch to fill), the rest of ``dispatch - admit`` is queueing for an instance.
        rejected: refused by a full queue. batch_rows: rows of its batch (0 if rejected).
        batch_start_ns, batch_end_ns, batch_size_rows, batch_requests, batch_replica: one entry per model call.
        setup, method (``events`` | ``recursion``), seed.
    """

    arrival_ns: np.ndarray
    replica: np.ndarray
    admit_ns: np.ndarray
    dispatch_ns: np.ndarray
    done_ns: np.ndarray
    batching_ns: np.ndarray
    rejected: np.ndarray
    batch_rows: np.ndarray
    batch_start_ns: np.ndarray
    batch_end_ns: np.ndarray
    batch_size_rows: np.ndarray
    batch_requests: np.ndarray
    batch_replica: np.ndarray
    setup: Setup
    method: str
    seed: int
    notes: list[str] = field(default_factory=list)


class _Req:
    __slots__ = ("arrival_ns", "idx", "key", "rows")

    def __init__(self, idx: int, rows: int, key: Hashable) -> None:
        self.idx, self.rows, self.key, self.arrival_ns = idx, rows, key, 0


def _assignment(n: int, setup: Setup, rng: np.random.Generator) -> np.ndarray | None:
    """Replica of each request for a state-blind balancer; None for the state-aware ones."""
    if setup.balancer == "round-robin":
        return (np.arange(n) % setup.replicas).astype(np.int32)
    if setup.balancer == "random":
        return rng.integers(0, setup.replicas, n).astype(np.int32)
    return None


def simulate(arrivals_ns: Any, setup: Setup, service: ServiceModel, *, decide: DecideFn = batching_decide,
             overhead: ServiceModel | None = None, rows: Any = None, keys: Sequence[Hashable] | None = None,
             seed: int = 0, method: str = "auto") -> SimRun:
    """Simulate ``arrivals_ns`` (int ns from 0, non-decreasing) through ``setup`` until every request finished.

    Args:
        arrivals_ns: 1-D intended send times (int ns).
        setup: balancer, replicas, instances, queue limit, batch policy.
        service: model-call time by batch rows. overhead: the server's own time per request (one worker per
            replica, before the batcher), or None.
        decide: the batcher's decision function (default the policy module's, which the server runs).
        rows: rows per request (int array, default 1 each). keys: batching keys (default all equal).
        seed: seeds the balancer and every replica's service streams.
        method: ``auto`` (the recursion where it applies), ``events`` or ``recursion``.

    Returns:
        :class:`SimRun`.

    Raises:
        UsageError: a bad setup, unsorted or negative arrivals, or ``recursion`` asked where it does not apply.
    """
    setup.check()
    arr = np.asarray(arrivals_ns, dtype=np.int64).ravel()
    if arr.size and (arr[0] < 0 or np.any(np.diff(arr) < 0)):
        raise UsageError("simulated arrivals must be non-negative and sorted ascending")
    n = arr.size
    rws = np.ones(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64).ravel()
    if rws.size != n or (n and rws.min() < 1):
        raise UsageError("rows per request: one positive count per arrival")
    bal_rng = np.random.default_rng(np.random.SeedSequence([int(seed), 2**31 - 1]))
    assign = _assignment(n, setup, bal_rng)
    fits = not getattr(setup.policy, "dynamic", False) and setup.max_queue_size == 0 and keys is None
    if method == "recursion" and not fits:
        raise UsageError("the recursion needs batching off, an unbounded queue and no batching keys")
    if method not in ("auto", "events", "recursion"):
        raise UsageError(f"simulation method {method!r}: use auto, events or recursion")
    if fits and method != "events":
        if assign is None:
            return _joint(arr, rws, setup, service, overhead, seed, bal_rng)
        return _recursion(arr, rws, assign, setup, service, overhead, seed)
    return _events(arr, rws, keys, assign, setup, service, overhead, seed, decide, bal_rng)


def _events(arr: np.ndarray, rws: np.ndarray, keys: Sequence[Hashable] | None, assign: np.ndarray | None,
            setup: Setup, service: ServiceModel, overhead: ServiceModel | None, seed: int, decide: DecideFn,
            bal_rng: np.random.Generator) -> SimRun:
    n, R, I = arr.size, setup.replicas, setup.instances
    policy, maxq = setup.policy, setup.max_queue_size
    streams = [ServiceStream(service, stream_seed(seed, r, 0)) for r in range(R)]
    fstreams = [ServiceStream(overhead, stream_seed(seed, r, 1)) for r in range(R)] if overhead is not None else []
    queues: list[deque[_Req]] = [deque() for _ in range(R)]
    free_since: list[deque[int]] = [deque([0] * I) for _ in range(R)]  # when each idle instance became free
    timer_at: list[int | None] = [None] * R
    outstanding = [0] * R
    front: list[deque[_Req]] = [deque() for _ in range(R)]
    admit, dispatch, done, batching = (np.full(n, -1, dtype=np.int64) for _ in range(4))
    rejected = np.zeros(n, dtype=bool)
    brows_req = np.zeros(n, dtype=np.int64)
    replica = np.zeros(n, dtype=np.int32) if assign is None else assign
    b_start: list[int] = []
    b_end: list[int] = []
    b_rows: list[int] = []
    b_reqs: list[int] = []
    b_rep: list[int] = []
    heap: list[tuple[int, int, int, int, Any]] = []
    seq = 0
    arr_l = arr.tolist()
    rows_l = rws.tolist()
    assign_l = assign.tolist() if assign is not None else None
    pairs = bal_rng.integers(0, 2**62, n).tolist() if setup.balancer == "power-of-two" else None

    def run_batches(r: int, t: int) -> None:
        nonlocal seq
        q = queues[r]
        idle = free_since[r]
        while idle and q:
            take, until = decide(q, t, policy)
            if take == 0:
                if until != timer_at[r]:
                    timer_at[r] = until
                    seq += 1
                    heapq.heappush(heap, (until, seq, 1, r, None))
                return
            batch = [q.popleft() for _ in range(take)]
            f = idle.popleft()
            nrows = 0
            for req in batch:
                nrows += req.rows
                dispatch[req.idx] = t
                batching[req.idx] = t - max(req.arrival_ns, f)
            for req in batch:
                brows_req[req.idx] = nrows
            s = streams[r].next_ns(nrows)
            b_start.append(t)
            b_end.append(t + s)
            b_rows.append(nrows)
            b_reqs.append(take)
            b_rep.append(r)
            seq += 1
            heapq.heappush(heap, (t + s, seq, 0, r, batch))
        timer_at[r] = None

    def admit_req(r: int, req: _Req, t: int) -> None:
        admit[req.idx] = t
        if maxq and len(queues[r]) >= maxq:
            rejected[req.idx] = True
            outstanding[r] -= 1
            return
        req.arrival_ns = t
        queues[r].append(req)
        run_batches(r, t)

    def start_front(r: int, req: _Req, t: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t + fstreams[r].next_ns(1), seq, 2, r, req))

    def pick(i: int) -> int:
        if assign_l is not None:
            return assign_l[i]
        if pairs is None:  # least-outstanding
            return outstanding.index(min(outstanding))
        return _pick_two(pairs[i], R, outstanding)

    i = 0
    while i < n or heap:
        if heap and (i >= n or heap[0][0] <= arr_l[i]):
            t, _, kind, r, data = heapq.heappop(heap)
            if kind == 0:  # a batch finished: its instance is free
                for req in data:
                    done[req.idx] = t
                outstanding[r] -= len(data)
                free_since[r].append(t)
                run_batches(r, t)
            elif kind == 1:
                if timer_at[r] == t:
                    run_batches(r, t)
            else:  # the server's own work on a request ended
                front[r].popleft()
                admit_req(r, data, t)
                if front[r]:
                    start_front(r, front[r][0], t)
            continue
        t = arr_l[i]
        r = pick(i)
        replica[i] = r
        outstanding[r] += 1
        req = _Req(i, rows_l[i], None if keys is None else keys[i])
        if overhead is None:
            admit_req(r, req, t)
        else:
            front[r].append(req)
            if len(front[r]) == 1:
                start_front(r, req, t)
        i += 1
    return SimRun(arr, replica, admit, dispatch, done, batching, rejected, brows_req,
                  np.asarray(b_start, dtype=np.int64), np.asarray(b_end, dtype=np.int64),
                  np.asarray(b_rows, dtype=np.int64), np.asarray(b_reqs, dtype=np.int64),
                  np.asarray(b_rep, dtype=np.int32), setup, "events", int(seed))


def _pick_two(v: int, R: int, outstanding: list[int]) -> int:
    """Power of two choices from one draw ``v``: two distinct replicas, the one with fewer outstanding (ties: the first)."""
    if R == 1:
        return 0
    a = v % R
    b = (v // R) % (R - 1)
    b += b >= a
    return a if outstanding[a] <= outstanding[b] else b


def _joint(arr: np.ndarray, rws: np.ndarray, setup: Setup, service: ServiceModel, overhead: ServiceModel | None,
           seed: int, bal_rng: np.random.Generator) -> SimRun:
    """Batching off, unbounded queues, a state-aware balancer: every replica's FIFO recursion in one pass over the
    arrivals (see the module docstring); the same run as the event loop, at a fraction of its cost per request."""
    n, R, I = arr.size, setup.replicas, setup.instances
    pairs = bal_rng.integers(0, 2**62, n).tolist() if setup.balancer == "power-of-two" else None
    svc = [ServiceStream(service, stream_seed(seed, r, 0)) for r in range(R)]
    front = [ServiceStream(overhead, stream_seed(seed, r, 1)) for r in range(R)] if overhead is not None else None
    free = [[0] * I for _ in range(R)]  # per replica, a heap of its instances' free times
    front_free = [0] * R
    outstanding = [0] * R
    ends: list[tuple[int, int]] = []  # (end, replica) of routed requests not yet counted done
    rep_l = [0] * n
    adm_l = [0] * n
    st_l = [0] * n
    end_l = [0] * n
    heappush, heappop = heapq.heappush, heapq.heappop
    for i, (t, rows) in enumerate(zip(arr.tolist(), rws.tolist())):
        while ends and ends[0][0] <= t:
            outstanding[heappop(ends)[1]] -= 1
        r = outstanding.index(min(outstanding)) if pairs is None else _pick_two(pairs[i], R, outstanding)
        outstanding[r] += 1
        a = t
        if front is not None:
            a = (t if t > front_free[r] else front_free[r]) + front[r].next_ns(1)
            front_free[r] = a
        f = heappop(free[r])
        b = a if a > f else f
        e = b + svc[r].next_ns(rows)
        heappush(free[r], e)
        heappush(ends, (e, r))
        rep_l[i], adm_l[i], st_l[i], end_l[i] = r, a, b, e
    replica = np.asarray(rep_l, dtype=np.int32)
    start, end = np.asarray(st_l, dtype=np.int64), np.asarray(end_l, dtype=np.int64)
    order = np.lexsort((np.arange(n), start))
    return SimRun(arr, replica, np.asarray(adm_l, dtype=np.int64), start, end, np.zeros(n, dtype=np.int64),
                  np.zeros(n, dtype=bool), rws.copy(), start[order], end[order], rws[order],
                  np.ones(n, dtype=np.int64), replica[order], setup, "recursion", int(seed))


def _fifo_one(a: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Departures of one FIFO worker: ``D_i = max(A_i, D_{i-1}) + S_i`` (Lindley), vectorised (int64, exact)."""
    if a.size == 0:
        return a.copy()
    c = np.cumsum(s)
    c_prev = c - s
    return c + np.maximum.accumulate(a - c_prev)


def _recursion(arr: np.ndarray, rws: np.ndarray, assign: np.ndarray, setup: Setup, service: ServiceModel,
               overhead: ServiceModel | None, seed: int) -> SimRun:
    n, I = arr.size, setup.instances
    admit = np.empty(n, dtype=np.int64)
    start = np.empty(n, dtype=np.int64)
    end = np.empty(n, dtype=np.int64)
    for r in range(setup.replicas):
        idx = np.flatnonzero(assign == r)
        if idx.size == 0:
            continue
        a = arr[idx]
        if overhead is not None:
            a = _fifo_one(a, ServiceStream(overhead, stream_seed(seed, r, 1)).take_ns(np.ones(idx.size, np.int64)))
        s = ServiceStream(service, stream_seed(seed, r, 0)).take_ns(rws[idx])
        if I == 1:
            e = _fifo_one(a, s)
            st = e - s
        else:  # Kiefer-Wolfowitz: the i-th request takes the earliest free instance
            free = [0] * I
            st_l = [0] * idx.size
            for k, (ak, sk) in enumerate(zip(a.tolist(), s.tolist())):
                f = heapq.heappop(free)
                b = ak if ak > f else f
                st_l[k] = b
                heapq.heappush(free, b + sk)
            st = np.asarray(st_l, dtype=np.int64)
            e = st + s
        admit[idx], start[idx], end[idx] = a, st, e
    order = np.lexsort((np.arange(n), start))
    return SimRun(arr, assign.astype(np.int32), admit, start, end, np.zeros(n, dtype=np.int64),
                  np.zeros(n, dtype=bool), rws.copy(), start[order], end[order], rws[order],
                  np.ones(n, dtype=np.int64), assign[order].astype(np.int32), setup, "recursion", int(seed))


__all__ = ["BALANCERS", "DecideFn", "SimRun", "Setup", "simulate"]
