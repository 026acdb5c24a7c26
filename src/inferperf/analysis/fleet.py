"""The cheapest fleet that meets a p99 SLO at a rate: simulate each option at growing replica counts.

The one capacity model: ``inferperf plan`` (which measures, validates and writes) and ``inferperf report``
(which plans from the Results it has when no plan Result is there) both size fleets here.

An *option* is a measured candidate (backend, threads, instances; :mod:`.candidates`) with a batching policy:
off, or on up to each measured batch size above 1 with a queue delay of 0 or a tenth of the SLO (at most
5 ms). For each, the fewest replicas whose simulated p99 at ``target x burst`` meets the SLO with no
rejection and no growing backlog, starting from the replicas the mean service time needs; then, for the
cheapest options, the rate where that fleet stops meeting it (bisection) and a p99-versus-rate curve.

Routing: with ``random`` (the default, as Kubernetes' iptables Service) a Poisson stream split at random
stays Poisson, so one replica at ``rate / R`` stands for all (constant arrivals split at random have
geometric gaps, drawn as such); other balancers simulate the R replicas together.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UsageError
from ..policy.arrivals import bursty, constant, poisson
from ..policy.batching import BatchPolicy
from .candidates import Candidate, Overhead
from .serving_sim import BALANCERS, Setup, simulate
from .fleet_detail import curve, limit_rate, p99_precision, resampled_intervals
from .serving_stats import Prediction, summarize

ARRIVALS = ("poisson", "constant", "mmpp")
#: simulated arrivals at most in a joint simulation of several replicas
MAX_JOINT_ARRIVALS = 200_000


@dataclass(frozen=True)
class PlanOptions:
    """What the plan is for (rates per s, times in ms).

    Attributes:
        target_rate_per_s: the rate to carry. slo_p99_ms: the p99 to meet. burst: planned rate = target x burst.
        price_per_core_hour: cost per core and hour (None: rank by cores). balancer: see :data:`BALANCERS`.
        arrival: ``poisson`` | ``constant`` | ``mmpp`` (bursty: 1 s spells alternating 2/3 and 4/3 of the rate).
        requests: simulated arrivals per point (per replica with random routing). duration_s: virtual seconds
        per point instead (arrivals = rate x duration, at least 1000; a joint simulation at most
        :data:`MAX_JOINT_ARRIVALS`). rounds: resampling rounds of the chosen option's interval. seed: seeds
        every simulation. max_replicas: the largest fleet simulated (``--max-replicas``).
    """

    target_rate_per_s: float
    slo_p99_ms: float
    burst: float = 1.0
    price_per_core_hour: float | None = None
    balancer: str = "random"
    arrival: str = "poisson"
    requests: int = 20_000
    rounds: int = 10
    seed: int = 0
    max_replicas: int = 100_000
    duration_s: float | None = None

    def check(self) -> None:
        """Raises UsageError naming the flag."""
        for name, v in (("--target-rate", self.target_rate_per_s), ("--slo-p99-ms", self.slo_p99_ms)):
            if not (v > 0 and math.isfinite(v)):
                raise UsageError(f"{name} {v!r}: must be a positive number")
        if not self.burst >= 1:
            raise UsageError(f"--burst {self.burst!r}: must be >= 1 (1.3 plans for 30 % over the target)")
        if self.price_per_core_hour is not None and not (self.price_per_core_hour >= 0
                                                         and math.isfinite(self.price_per_core_hour)):
            raise UsageError(f"--price-per-core-hour {self.price_per_core_hour!r}: must be a price >= 0 per core and "
                             "hour (e.g. 0.05)")
        if self.balancer not in BALANCERS:
            raise UsageError(f"--balancer {self.balancer!r}: use one of {', '.join(BALANCERS)}")
        if self.arrival not in ARRIVALS:
            raise UsageError(f"--arrival {self.arrival!r}: use one of {', '.join(ARRIVALS)}")
        if not 1000 <= self.requests <= MAX_POINT_ARRIVALS or self.rounds < 2:
            raise UsageError(f"--sim-requests must be in [1000, {MAX_POINT_ARRIVALS:,}] and --rounds >= 2 (longer "
                             "points: --sim-duration-s)")
        if self.max_replicas < 1:
            raise UsageError(f"--max-replicas {self.max_replicas!r}: must be >= 1")
        if self.duration_s is not None and not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            raise UsageError(f"--sim-duration-s {self.duration_s!r}: must be a positive number of virtual seconds")

    @property
    def planned_rate_per_s(self) -> float:
        """``target x burst``."""
        return self.target_rate_per_s * self.burst


@dataclass
class Option:
    """One candidate with one batching policy, and what the search found for it."""

    candidate: Candidate
    policy: BatchPolicy
    replicas: int | None = None
    at_plan: Prediction | None = None
    why_not: str | None = None
    limit_rate_per_s: float | None = None
    curve: list[dict[str, Any]] = field(default_factory=list)
    intervals: dict[str, list[float]] | None = None
    simulation: dict[str, Any] | None = None
    precision: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """``onnxruntime 1 thread x 2 instances, batching up to 8 rows, delay 2 ms``."""
        p = self.policy
        if not p.dynamic:
            return f"{self.candidate.label}, batching off"
        return f"{self.candidate.label}, batching up to {p.max_batch_size} rows, delay {p.max_queue_delay_ns / 1e6:g} ms"

    def cores(self) -> int | None:
        """Cores of the fleet (replicas x cores per replica), None when no fleet meets the SLO."""
        return None if self.replicas is None else self.replicas * self.candidate.cores


def options_for(cands: list[Candidate], opts: PlanOptions) -> list[Option]:
    """Every candidate with batching off and on (each measured size > 1, delay 0 and SLO / 10 up to 5 ms)."""
    delay_ns = sorted({0, min(5_000_000, round(opts.slo_p99_ms * 1e5))})
    out = []
    for c in cands:
        sizes = c.service.sizes
        out.append(Option(c, BatchPolicy(max_batch_size=max(sizes), dynamic=False)))
        for b in sizes:
            if b > 1:
                out += [Option(c, BatchPolicy(max_batch_size=b, dynamic=True, max_queue_delay_ns=d)) for d in delay_ns]
    return out


def capacity_per_s(opt: Option) -> float:
    """Requests per s one replica can serve at most: instances x the best rows / mean time over the sizes allowed."""
    c, p = opt.candidate, opt.policy
    sizes = [b for b in c.service.sizes if b <= p.max_batch_size] if p.dynamic else [1]
    best = max(b / (c.service.mean_ns(b) / 1e9) for b in sizes)
    return c.instances * best


#: a simulated point holds at least this many relaxation times of its queue, so its percentiles are steady-state
#: ones; the relaxation time of a queue at utilisation rho is about 1 / (mu (1 - sqrt(rho))^2) (Morse 1955, for
#: M/M/1), i.e. rho / (1 - sqrt(rho))^2 arrivals: 20,000 arrivals hold 5 of them up to rho ~ 0.97
RELAXATION_TIMES = 5
#: a point is stretched to at most this many arrivals for that (and for MMPP spells); a point that needed more
#: is not steady and never meets the SLO (a replica that close to saturation cannot be predicted)
MAX_POINT_ARRIVALS = 2_000_000
#: --arrival mmpp: virtual seconds a point covers at least (10 spell pairs of 1 s), so a short run does not sit
#: inside one low spell
MMPP_MIN_S = 20.0


def steady_arrivals(rho: float) -> float:
    """Arrivals a run at utilisation ``rho`` needs for :data:`RELAXATION_TIMES` relaxation times (inf at rho >= 1)."""
    if rho >= 1:
        return math.inf
    return RELAXATION_TIMES * rho / (1 - math.sqrt(rho)) ** 2 if rho > 0 else 0.0


class Simulator:
    """Simulates an option at a rate with the plan's arrivals, balancer and seeds; counts its runs and keeps the
    range of arrivals and virtual seconds its runs held (``held``)."""

    def __init__(self, opts: PlanOptions, overhead: Overhead | None) -> None:
        self.opts = opts
        self.overhead = overhead.model if overhead is not None else None
        self.overhead_ms = overhead.mean_ms if overhead is not None else None
        self.calibrated = overhead if overhead is not None and overhead.calibrated else None
        self.runs = 0
        self.last: dict[str, Any] = {}
        self.held: dict[str, list[float]] = {}
        self.method = ("one replica stands for all (random routing: each replica sees the same process at rate / R)"
                       if opts.balancer == "random" else f"joint simulation of the replicas ({opts.balancer})")

    def as_it_runs(self, opt: Option) -> bool:
        """Whether ``opt`` is simulated as the replica runs (:mod:`.replica_sim`): a calibrated loop, one replica
        standing for all (random routing); batching off or on."""
        return self.calibrated is not None and self.opts.balancer == "random"

    def utilisation(self, opt: Option, rate_per_s: float, replicas: int) -> float:
        """Offered load on one replica by mean times: rate / R over the replica's capacity (its instances', or its
        server worker's when the server's own time is known, whichever is less)."""
        return rate_per_s / replicas / self.replica_capacity_per_s(opt)

    def replica_capacity_per_s(self, opt: Option) -> float:
        """One replica's most requests per s: its instances' (mean times), or its server worker's when the server's
        own time is known, whichever is less; as it runs (:meth:`as_it_runs`), also its cores' (loop + call CPU)."""
        if self.as_it_runs(opt):
            from .replica_options import option_capacity_per_s

            return option_capacity_per_s(opt.candidate, self.calibrated, opt.policy)
        cap = capacity_per_s(opt)
        return min(cap, 1000.0 / self.overhead_ms) if self.overhead_ms else cap

    def count(self, rate_per_s: float, replicas: int, opt: Option | None = None) -> tuple[int, bool]:
        """Arrivals of one simulated point, and whether that is enough for a steady state.

        The base is ``requests`` (x replicas when joint), or rate x ``duration_s``; a joint simulation holds at
        most :data:`MAX_JOINT_ARRIVALS` (unless ``requests`` alone is more). It is stretched (up to
        :data:`MAX_POINT_ARRIVALS`) to hold :data:`RELAXATION_TIMES` relaxation times of one replica's queue
        (``opt`` given; x replicas for round-robin's R queues; least-outstanding and power-of-two pool the replicas,
        and an M/M/c queue relaxes in the same arrivals as one M/M/1 at its utilisation) and, with MMPP arrivals,
        :data:`MMPP_MIN_S` virtual seconds."""
        o = self.opts
        joint = o.balancer != "random"
        per_replica = rate_per_s / replicas
        if o.duration_s is not None:
            n = max(1000, math.ceil((rate_per_s if joint else per_replica) * o.duration_s))
        else:
            n = o.requests * replicas if joint else o.requests
        if joint:
            n = min(n, max(o.requests, MAX_JOINT_ARRIVALS))
        need = 0.0
        if opt is not None:  # a state-blind split has R queues of their own to settle; a balancer that reads the
            # replicas' state pools them like one M/M/c queue, whose relaxation takes the same arrivals in all
            pooled = o.balancer in ("least-outstanding", "power-of-two")
            need = steady_arrivals(self.utilisation(opt, rate_per_s, replicas)) * (replicas if joint and not pooled else 1)
        if o.arrival == "mmpp":
            need = max(need, (rate_per_s if joint else per_replica) * MMPP_MIN_S)
        steady = need <= max(n, MAX_POINT_ARRIVALS)
        return (max(n, math.ceil(need)) if steady else n), steady

    def arrivals(self, rate_per_s: float, replicas: int, seed: int, n: int) -> np.ndarray:
        """``n`` arrival offsets (int64 ns) for one replica (random routing) or the whole fleet (other balancers)."""
        o = self.opts
        joint = o.balancer != "random"
        rate = rate_per_s if joint else rate_per_s / replicas
        if o.arrival == "constant" and not joint and replicas > 1:
            gaps = np.random.default_rng(seed).geometric(1 / replicas, n)  # every R-th send of a lattice, at random
            return np.round(np.cumsum(gaps) * (1e9 / rate_per_s)).astype(np.int64)
        sched = {"poisson": lambda: poisson(rate, seed), "constant": lambda: constant(rate),
                 "mmpp": lambda: bursty(rate, seed)}[o.arrival]()
        return np.fromiter((sched.next_offset_ns() for _ in range(n)), dtype=np.int64, count=n)

    def run(self, opt: Option, rate_per_s: float, replicas: int, seed_offset: int = 0, service: Any = None,
            arrivals: int | None = None) -> Any:
        """One simulated run (a :class:`~inferperf.analysis.serving_sim.SimRun`) of :meth:`count` arrivals, or of
        ``arrivals`` when given (a run that must be longer); ``last`` describes it."""
        self.runs += 1
        seed = self.opts.seed + seed_offset
        r_sim = 1 if self.opts.balancer == "random" else replicas
        setup = Setup(opt.policy, replicas=r_sim, instances=opt.candidate.instances,
                      balancer="round-robin" if r_sim == 1 else self.opts.balancer)
        n, steady = self.count(rate_per_s, replicas, opt)
        if arrivals is not None:
            n = max(n, arrivals) if steady else n
        arr = self.arrivals(rate_per_s, replicas, seed, n)
        run = self.simulate(opt, arr, seed, setup, service)
        virtual_s = float(arr[-1]) / 1e9 if arr.size else 0.0
        self.last = {"replicas_simulated": r_sim, "engine": run.method, "arrivals": int(arr.size),
                     "virtual_s": virtual_s, "steady": steady}
        for k, v in (("arrivals", float(arr.size)), ("virtual_s", virtual_s)):
            lo, hi = self.held.get(k, [v, v])
            self.held[k] = [min(lo, v), max(hi, v)]
        return run

    def simulate(self, opt: Option, arr: np.ndarray, seed: int, setup: Setup | None = None,
                 service: Any = None) -> Any:
        """``arr`` through one replica of ``opt`` (``setup``: the fleet's, default one replica): as it runs when
        :meth:`as_it_runs`, else the server's batcher with the server's own time as one FIFO worker before it."""
        service = service or opt.candidate.service
        if self.as_it_runs(opt) and (setup is None or setup.replicas == 1):
            from .replica_options import simulate_option

            return simulate_option(arr, opt, self.calibrated, service, seed)
        setup = setup or Setup(opt.policy, replicas=1, instances=opt.candidate.instances, balancer="round-robin")
        return simulate(arr, setup, service, overhead=self.overhead, seed=seed)

    def predict(self, opt: Option, rate_per_s: float, replicas: int, seed_offset: int = 0,
                arrivals: int | None = None) -> Prediction:
        """The figures of one run (:meth:`run`); ``steady`` False when the run could not hold a steady state (see
        :meth:`count`)."""
        p = summarize(self.run(opt, rate_per_s, replicas, seed_offset=seed_offset, arrivals=arrivals))
        p.steady = bool(self.last["steady"])
        return p

    def meets(self, p: Prediction) -> bool:
        """p99 within the SLO, nothing rejected, no growing backlog, a steady-state run."""
        return (p.latency_ms["p99"] <= self.opts.slo_p99_ms and p.rejected_share == 0 and not p.backlog_growing
                and p.steady)


#: p99 of a fleet can be lower than that of the next smaller one by this much (simulated with batching on, p99
#: rose between neighbouring sizes at 17 of 49 steps, by up to 2.4 %; MMPP arrivals at 11 of 49): the scan down
#: from the bisection's answer goes on through sizes that fail by less, and stops at the first that fails by more
NON_MONOTONE_MARGIN = 0.05


def size_fleet(opt: Option, sim: Simulator) -> None:
    """Fill ``opt.replicas`` / ``opt.at_plan`` with the fewest replicas meeting the SLO, or ``opt.why_not``.

    The search starts at the replicas the mean service time needs (fewer run at >= 100 % utilisation: their
    backlog grows), doubles to an upper bound that meets the SLO, bisects between the last size that failed and
    it, then scans down from the answer until a size fails by more than :data:`NON_MONOTONE_MARGIN` (the
    simulated p99 is not strictly monotone in replicas), keeping the smallest size that met. Nothing above
    ``max_replicas`` (``--max-replicas``) is simulated; reaching it is said, naming the flag.
    """
    rate, cap, slo = sim.opts.planned_rate_per_s, sim.opts.max_replicas, sim.opts.slo_p99_ms
    floor_ms = float(np.percentile(opt.candidate.service.sample_ns(1, (np.arange(2000) + 0.5) / 2000), 99)) / 1e6
    if floor_ms > slo:
        opt.why_not = f"one call's measured p99 ({floor_ms:.3g} ms) is over the SLO"
        return
    start = max(1, math.ceil(rate / sim.replica_capacity_per_s(opt) - 1e-9))
    if start > cap:
        opt.why_not = f"the mean service time alone needs {start} replicas, over --max-replicas {cap}"
        return
    seen: dict[int, tuple[Prediction, dict[str, Any]]] = {}

    def at(r: int) -> Prediction:
        if r not in seen:
            seen[r] = (sim.predict(opt, rate, r), {"method": sim.method, **sim.last})
        return seen[r][0]

    lo, hi = start - 1, start  # lo: the largest size known to fail (start - 1: utilisation >= 1)
    while not sim.meets(at(hi)):
        if hi >= cap:
            p99 = seen[hi][0].latency_ms["p99"]
            opt.at_plan, opt.simulation = seen[hi]
            opt.why_not = (f"no fleet up to --max-replicas {cap} meets the SLO (p99 {p99:.3g} ms at {cap}): raise "
                           "--max-replicas, or the SLO")
            return
        lo, hi = hi, min(cap, 2 * hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sim.meets(at(mid)):
            hi = mid
        else:
            lo = mid
    best = r = hi
    while r - 1 >= start:
        r -= 1
        p = at(r)
        if sim.meets(p):
            best = r
        elif (p.rejected_share > 0 or p.backlog_growing or not p.steady
              or p.latency_ms["p99"] > slo * (1 + NON_MONOTONE_MARGIN)):
            break
    opt.replicas = best
    opt.at_plan, opt.simulation = seen[best]


def search(cands: list[Candidate], opts: PlanOptions, overhead: Overhead | None,
           progress: Callable[[str], None] | None = None, detail: int = 4) -> tuple[list[Option], Simulator]:
    """Size a fleet for every option, then limit rate, curve (and, for the best, intervals) for the ``detail``
    cheapest that meet the SLO. Returns the options ranked (meeting first, by cost, then p99) and the simulator.

    Raises:
        UsageError: bad options, or no candidate.
    """
    opts.check()
    if not cands:
        raise UsageError("no measured candidate for this model: pass --from DIR with bench/sweep Results, or --measure")
    sim = Simulator(opts, overhead)
    allopts = options_for(cands, opts)
    for i, o in enumerate(allopts):
        if progress:
            progress(f"option {i + 1}/{len(allopts)}: {o.label}")
        size_fleet(o, sim)

    def rank(o: Option) -> tuple[Any, ...]:
        ok = o.replicas is not None
        p99 = o.at_plan.latency_ms["p99"] if o.at_plan is not None else math.inf
        return (not ok, o.cores() or 0, p99, o.label)

    allopts.sort(key=rank)
    for k, o in enumerate([o for o in allopts if o.replicas is not None][:detail]):
        if progress:
            progress(f"rate limit and curve: {o.label} x {o.replicas}")
        limit_rate(o, sim)
        curve(o, sim)
        if k == 0:
            resampled_intervals(o, sim)
            p99_precision(o, sim, MAX_POINT_ARRIVALS)
    return allopts, sim


__all__ = ["ARRIVALS", "MAX_JOINT_ARRIVALS", "MAX_POINT_ARRIVALS", "MMPP_MIN_S", "NON_MONOTONE_MARGIN", "RELAXATION_TIMES", "Option", "PlanOptions", "Simulator", "capacity_per_s",
           "curve", "limit_rate", "options_for", "p99_precision", "resampled_intervals", "search", "size_fleet", "steady_arrivals"]
