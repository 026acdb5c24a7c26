"""Capacity planning: cores needed for a target rate at a p99 SLO, from measured throughput per core.

For each measured configuration (one Result = one instance of the model with
its threads and streams):

* cores per instance: the CPU the instance kept busy, ``ceil(cpu_percent_mean / 100)``
  (100 % = one core), bounded by the configured threads x streams and the machine's
  effective CPUs; without a CPU measurement, threads x streams (bounded the same way);
* throughput per core: queries/s / cores, with the 95 % CI over runs scaled the same way;
* instances for a target: ``ceil(target / (qps x (1 - headroom)))``, and the conservative
  figure from the CI's lower bound. ``headroom`` keeps each instance below saturation:
  a closed-loop measurement reports the rate at full load, and open-loop arrivals at that
  rate queue without bound (p99 grows long before 100 % utilization).

A configuration qualifies when its measured p99 is within the SLO. The plan picks the
qualifying configuration with the most throughput per core (by the CI's lower bound
when there is one); an option whose CI reaches 0 (too noisy to bound) ranks after the
bounded ones, so a wider interval never looks better than a narrow one. The SLO is checked at the measured load only: the plan says so.

Pure functions over Result documents.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..results.model import Result
from .points import case_label, point


@dataclass
class Option:
    """One configuration's capacity figures.

    Attributes:
        case_key, label: which Result; label is a short readable description.
        queries_per_s, queries_per_s_ci95: measured throughput of one instance ([] for one run).
        p99_ms: measured p99 latency; meets_slo: p99 <= SLO (True without an SLO).
        cores_per_instance: cores one instance occupies (see module doc); cores_basis: how that was found.
        qps_per_core, qps_per_core_low: throughput per core and its conservative (CI lower bound) value.
        instances, instances_low_ci: instances for the target at the point estimate / the CI's lower bound.
        cores, cores_low_ci: instances x cores per instance.
        low_bounded: False when the CI's lower bound reaches 0 (runs too noisy or too few to bound it): then
            the ``_low`` figures fall back to the point estimate and the plan ranks the option after bounded ones.
    """

    case_key: str
    label: str
    queries_per_s: float
    queries_per_s_ci95: list[float]
    p99_ms: float
    meets_slo: bool
    cores_per_instance: int
    cores_basis: str
    qps_per_core: float
    qps_per_core_low: float
    instances: int = 0
    instances_low_ci: int = 0
    cores: int = 0
    cores_low_ci: int = 0
    low_bounded: bool = True


@dataclass
class CapacityPlan:
    """The plan: the target, the SLO, every option and the chosen one (None when none meets the SLO)."""

    target_qps: float
    slo_p99_ms: float | None
    headroom: float
    options: list[Option] = field(default_factory=list)
    chosen: Option | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON)."""
        return asdict(self)


def instances_for(target_qps: float, qps_per_instance: float, headroom: float = 0.0) -> int:
    """Instances needed to carry ``target_qps`` when each carries ``qps_per_instance x (1 - headroom)``.

    Raises:
        ValueError: a non-positive rate, or headroom outside [0, 1).
    """
    if qps_per_instance <= 0 or target_qps <= 0:
        raise ValueError("capacity needs positive rates")
    if not 0.0 <= headroom < 1.0:
        raise ValueError(f"headroom {headroom} outside [0, 1)")
    return max(1, math.ceil(target_qps / (qps_per_instance * (1.0 - headroom)) - 1e-9))


def cores_per_instance(r: Result) -> tuple[int, str]:
    """Cores one instance of this configuration occupies, and the basis (``measured CPU`` or ``configured``)."""
    eff = r.config.session.effective
    cpus = max(1, r.system.effective_cpus)
    t = eff.get("intra_op_num_threads")
    if not isinstance(t, int) or t <= 0:
        t = eff.get("INFERENCE_NUM_THREADS")
    threads = t if isinstance(t, int) and t > 0 else cpus
    configured = min(cpus, threads * max(1, r.config.concurrency))
    res = r.metrics.resources
    if res is not None and res.cpu_percent_mean:
        busy = math.ceil(res.cpu_percent_mean / 100.0 - 0.05)  # 102 % is one busy core plus sampling noise
        return max(1, min(busy, configured)), "measured CPU"
    return configured, "configured"


def label_of(r: Result) -> str:
    """The case's label (:func:`~.points.case_label`: workload, streams, threads)."""
    return case_label(point(r))


def option(r: Result, target_qps: float, slo_p99_ms: float | None, headroom: float) -> Option:
    """Capacity figures of one Result for ``target_qps`` (queries/s) under ``slo_p99_ms``."""
    tp = r.metrics.throughput
    cores, basis = cores_per_instance(r)
    ci = list(tp.queries_per_s_ci95)
    bounded = bool(ci) and ci[0] > 0
    low = ci[0] if bounded else tp.queries_per_s
    o = Option(
        case_key=r.case_key, label=label_of(r), queries_per_s=tp.queries_per_s, queries_per_s_ci95=ci,
        p99_ms=r.metrics.latency_ms.p99, meets_slo=slo_p99_ms is None or r.metrics.latency_ms.p99 <= slo_p99_ms,
        cores_per_instance=cores, cores_basis=basis, qps_per_core=tp.queries_per_s / cores, qps_per_core_low=low / cores,
        low_bounded=bounded or not ci,
    )  # fmt: skip
    if tp.queries_per_s > 0:
        o.instances = instances_for(target_qps, tp.queries_per_s, headroom)
        o.instances_low_ci = instances_for(target_qps, low, headroom)
        o.cores = o.instances * cores
        o.cores_low_ci = o.instances_low_ci * cores
    return o


def plan(
    results: Iterable[Result], target_qps: float, slo_p99_ms: float | None = None, headroom: float = 0.25,
    valid_only: bool = True,
) -> CapacityPlan:
    """Options for every Result, and the one that needs the fewest cores (CI lower bound) within the SLO.

    Args:
        results: Results of one model (mixing models makes the comparison meaningless; the caller groups).
        target_qps: the rate to carry (queries/s; a query is one batch of ``batch_size`` rows).
        slo_p99_ms: the p99 latency objective (ms), or None for none.
        headroom: the share of each instance's measured throughput kept free (0..1).
        valid_only: skip INVALID Results (unless every Result is INVALID: then plan from them all).

    Raises:
        ValueError: a non-positive target or a headroom outside [0, 1).
    """
    if target_qps <= 0:
        raise ValueError("target rate must be positive")
    if not 0.0 <= headroom < 1.0:
        raise ValueError(f"headroom {headroom} outside [0, 1)")
    out = CapacityPlan(target_qps, slo_p99_ms, headroom)
    rs = [r for r in results if r.metrics.throughput.queries_per_s > 0]
    if valid_only and any(r.validity.valid for r in rs):
        rs = [r for r in rs if r.validity.valid]
    for r in rs:
        out.options.append(option(r, target_qps, slo_p99_ms, headroom))
    out.options.sort(key=lambda o: (not o.meets_slo, not o.low_bounded, o.cores_low_ci, o.cores, o.p99_ms))
    ok = [o for o in out.options if o.meets_slo]
    out.chosen = ok[0] if ok else None
    return out
