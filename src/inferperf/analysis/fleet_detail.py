"""The detail the plan gives its cheapest options once their fleets are sized (:func:`.fleet.search`): the rate
where a fleet stops meeting the SLO, a p99-versus-rate curve, and the chosen option's resampled intervals.

Each works on an option (:class:`.fleet.Option`) through the search's simulator (:class:`.fleet.Simulator`:
``predict``, ``meets``, ``run``, ``replica_capacity_per_s``), so a replica simulated as it runs
(:mod:`.replica_sim`) has its own capacity here too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .serving_stats import intervals


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


__all__ = ["curve", "limit_rate", "resampled_intervals"]
