"""The detail the plan gives its cheapest options once their fleets are sized (:func:`.fleet.search`): the rate
where a fleet stops meeting the SLO, a p99-versus-rate curve, and the chosen option's resampled intervals and the
simulation's own precision of its p99.

Each works on an option (:class:`.fleet.Option`) through the search's simulator (:class:`.fleet.Simulator`:
``predict``, ``meets``, ``run``, ``replica_capacity_per_s``), so a replica simulated as it runs
(:mod:`.replica_sim`) has its own capacity here too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .serving_stats import intervals


#: the simulated p99 the plan prints is held to this relative half-width of its 95 % interval (issue 39 item 3)
P99_PRECISION = 0.05
#: independent runs (seeds) the interval is taken over
PRECISION_RUNS = 5


#: the most arrivals the precision of one p99 may simulate in all (its runs and doublings together)
PRECISION_BUDGET = 3_000_000


def p99_precision(opt: Any, sim: Any, max_arrivals: int, target: float = P99_PRECISION,
                  runs: int = PRECISION_RUNS, budget: int = PRECISION_BUDGET) -> None:
    """``opt.precision``: the simulation's own 95 % interval of the p99 at the planned rate on ``opt``'s fleet, long
    enough to be within ``target`` (relative half-width).

    ``runs`` independent runs (seeds apart from the search's) of n arrivals each, starting at the point's own length
    (:meth:`.fleet.Simulator.count`); the interval is Student's t on their p99s (mean +- t(0.975, runs - 1) x
    sd / sqrt(runs): the method of independent replications, Law & Kelton, *Simulation Modeling and Analysis*,
    ch. 9). n doubles, up to ``max_arrivals`` (the search's :data:`.fleet.MAX_POINT_ARRIVALS`) and while the runs
    stay within ``budget`` arrivals in all (a joint fleet's points are long already), until the interval is
    within ``target`` and its mean moved by no more than ``target`` from the previous length's: a short run's p99
    is biased low (a queue's bursts are correlated; at utilisation 0.8 and 1 ms, 5 runs of 4,000 arrivals give
    9.6 ms, of 1,000,000 11.2), a bias replications alone do not show. Why at all: at utilisation 0.8 an M/M/1
    p99 of 20,000 arrivals moves -10 % to +30 % between seeds, more than a plan may print as one figure.

    Sets ``{"p99_ms": mean, "interval": [lo, hi], "half_width": relative, "runs", "arrivals": n per run,
    "target", "met": bool, "stopped": "met" | "longest run" | "budget", "meets_slo": whether the interval's upper
    end is within the SLO}``; None when a
    run could not hold a steady state (its p99 is not a figure).
    """
    from scipy import stats

    assert opt.replicas is not None
    rate, reps = sim.opts.planned_rate_per_s, opt.replicas
    cap = max_arrivals
    n, steady = sim.count(rate, reps, opt)
    if not steady:
        opt.precision = None
        return
    t = float(stats.t.ppf(0.975, runs - 1))
    before, spent, stopped = None, 0, "met"
    while True:
        p99 = np.array([sim.predict(opt, rate, reps, seed_offset=2000 + k, arrivals=n).latency_ms["p99"]
                        for k in range(runs)])
        n = sim.last["arrivals"]
        spent += runs * n
        mean = float(p99.mean())
        hw = t * float(p99.std(ddof=1)) / float(np.sqrt(runs))
        rel = hw / mean if mean > 0 else 0.0
        settled = before is not None and abs(mean - before) <= target * mean
        if rel <= target and settled:
            break
        if n >= cap or spent + runs * min(cap, 2 * n) > budget:
            stopped = "longest run" if n >= cap else "budget"
            break
        before, n = mean, min(cap, 2 * n)
    opt.precision = {"p99_ms": mean, "interval": [mean - hw, mean + hw], "half_width": float(rel), "runs": runs,
                     "arrivals": int(n), "target": target, "met": bool(rel <= target and settled), "stopped": stopped,
                     "meets_slo": bool(mean + hw <= sim.opts.slo_p99_ms)}


def limit_rate(opt: Any, sim: Any, steps: int = 7) -> None:
    """The rate (per s) where ``opt``'s fleet stops meeting the SLO: bisection between the planned rate (met)
    and the fleet's capacity from mean service times (never met)."""
    assert opt.replicas is not None
    lo, hi = sim.opts.planned_rate_per_s, sim.replica_capacity_per_s(opt) * opt.replicas
    for _ in range(steps):
        if hi <= lo * 1.01:
            break
        mid = (lo + hi) / 2
        if sim.meets(sim.predict(opt, mid, opt.replicas)):
            lo = mid
        else:
            hi = mid
    opt.limit_rate_per_s = lo


def curve(opt: Any, sim: Any, fractions: tuple[float, ...] = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.05)) -> None:
    """p50/p99 versus rate for ``opt``'s fleet at these fractions of its capacity (points past saturation marked)."""
    assert opt.replicas is not None
    cap = sim.replica_capacity_per_s(opt) * opt.replicas
    for f in fractions:
        p = sim.predict(opt, cap * f, opt.replicas)
        opt.curve.append({"rate_per_s": cap * f, "p50_ms": p.latency_ms["p50"], "p99_ms": p.latency_ms["p99"],
                          "utilisation": p.utilisation, "rejected_share": p.rejected_share,
                          "past_saturation": p.backlog_growing or not p.steady or f >= 1.0})


def resampled_intervals(opt: Any, sim: Any) -> None:
    """``opt.intervals`` at the planned rate: rounds of resampled measured service times and new arrivals."""
    assert opt.replicas is not None
    rng = np.random.default_rng(sim.opts.seed + 7)
    reps = opt.replicas

    def one(k: int) -> Any:
        return sim.run(opt, sim.opts.planned_rate_per_s, reps, seed_offset=1000 + k,
                       service=opt.candidate.service.resampled(rng))

    opt.intervals = intervals(one, rounds=sim.opts.rounds)


__all__ = ["P99_PRECISION", "PRECISION_BUDGET", "PRECISION_RUNS", "curve", "limit_rate", "p99_precision", "resampled_intervals"]
