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

Inputs (:func:`capacity_inputs`): in-process bench Results (bench, sweep, optimize, runtimes) and, from
HTTP load runs, only the steps that measured a capacity: a finished ``--stress`` ramp's highest load meeting
its SLO, a ``--find-max-rate`` goodput step, or the best step of a saturated closed-loop ladder; their cores
are the server's pinned CPUs. Never open-loop steps below saturation (their throughput is the offered rate),
profile runs (measured under the profiler), tune trials, pipelines or soaks.

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
        chosen: this option is the plan's choice (exactly one option per plan, or none).
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
    chosen: bool = False


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


#: Result kinds measured in-process by bench (a sweep case, an optimize variant, a runtime): capacity inputs.
IN_PROCESS_KINDS = ("bench", "sweep", "optimize", "runtimes")
#: Throughput gain (%) under which a closed-loop ladder's last step counts as saturated (the load findings' rule).
SATURATION_GAIN_PERCENT = 5.0


def _step_doc(r: Result) -> dict[str, Any]:
    return (r.metrics.client or {}).get("stress") or {}


def _load_inputs(rs: list[Result]) -> tuple[list[Result], list[str]]:
    """The load steps that measured a capacity, per load run (one command against one target): a finished
    ``--stress`` ramp's highest load meeting its SLO, a ``--find-max-rate`` search's goodput step, or the
    best step of a closed-loop ladder of >= 3 steps whose last step gained < 5 % (saturated)."""
    runs: dict[tuple, list[Result]] = {}
    for r in rs:
        runs.setdefault((tuple(r.command), str(r.run.get("target", "")), r.config.scenario), []).append(r)
    keep, notes = [], []
    for (cmd, _, scen), steps in runs.items():
        last = max(steps, key=lambda r: _step_doc(r).get("step", -1))
        doc = _step_doc(last)
        pick: Result | None = None
        if doc.get("mode") == "find_max_rate" and doc.get("goodput_rate") is not None:
            pick = max((r for r in steps if r.config.request_rate == doc["goodput_rate"]),
                       key=lambda r: r.created_at, default=None)
        elif doc.get("mode") == "stress" and doc.get("stop_reason") and doc.get("max_load_meeting_slo") is not None:
            key = "request_rate" if scen == "server" else "concurrency"
            pick = next((r for r in steps if getattr(r.config, key) == doc["max_load_meeting_slo"]), None)
        elif not doc and scen == "concurrent" and not any((r.metrics.client or {}).get("soak") for r in steps):
            ladder = sorted(steps, key=lambda r: r.config.concurrency)
            q = [r.metrics.throughput.queries_per_s for r in ladder]
            if len(ladder) >= 3 and q[-2] > 0 and (q[-1] - q[-2]) / q[-2] * 100 < SATURATION_GAIN_PERCENT:
                pick = max(ladder, key=lambda r: r.metrics.throughput.queries_per_s)
        if pick is None:
            what = "open-loop steps measure the offered rate, not capacity" if scen == "server" and not doc else \
                "no saturation or goodput in it"
            notes.append(f"not planned from `{' '.join(cmd)}`: {what}")
        elif not (pick.run.get("placement") or {}).get("server_cpus"):
            notes.append(f"not planned from `{' '.join(cmd)}`: the server's CPUs are not recorded (an external"
                         " server): cores cannot be counted")
        else:
            keep.append(pick)
    return keep, notes


def capacity_inputs(results: Iterable[Result]) -> tuple[list[Result], list[str]]:
    """The Results a capacity plan may rest on, and a note per load run left out (why).

    In-process bench Results (:data:`IN_PROCESS_KINDS`) and, from HTTP load runs, only steps that measured
    a capacity (:func:`_load_inputs`): never an open-loop step below saturation (its throughput is the
    offered rate), a profile run (measured under the profiler), a tune trial, a pipeline or a soak.
    """
    rs = list(results)
    keep = [r for r in rs if r.kind in IN_PROCESS_KINDS]
    loads, notes = _load_inputs([r for r in rs if r.kind == "load"])
    return keep + loads, notes


def cores_per_instance(r: Result) -> tuple[int, str]:
    """Cores one instance of this configuration occupies, and the basis (``measured CPU``, ``configured``,
    or for a load step ``server CPUs``: the CPUs the server was pinned to, ``run.placement.server_cpus``)."""
    server_cpus = (r.run.get("placement") or {}).get("server_cpus") if r.kind == "load" else None
    if server_cpus:
        return len(server_cpus), "server CPUs"
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


def option(r: Result, target_qps: float, slo_p99_ms: float | None, headroom: float, label: str | None = None) -> Option:
    """Capacity figures of one Result for ``target_qps`` (queries/s) under ``slo_p99_ms``."""
    tp = r.metrics.throughput
    cores, basis = cores_per_instance(r)
    ci = list(tp.queries_per_s_ci95)
    bounded = bool(ci) and ci[0] > 0
    low = ci[0] if bounded else tp.queries_per_s
    o = Option(
        case_key=r.case_key, label=label or label_of(r), queries_per_s=tp.queries_per_s, queries_per_s_ci95=ci,
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
    valid_only: bool = True, labels: Iterable[str] | None = None,
) -> CapacityPlan:
    """Options for every Result, and the one that needs the fewest cores (CI lower bound) within the SLO.

    Args:
        results: Results of one model (mixing models makes the comparison meaningless; the caller groups).
        target_qps: the rate to carry (queries/s; a query is one batch of ``batch_size`` rows).
        slo_p99_ms: the p99 latency objective (ms), or None for none.
        headroom: the share of each instance's measured throughput kept free (0..1).
        valid_only: skip INVALID Results (unless every Result is INVALID: then plan from them all).
        labels: one label per Result (default :func:`label_of`): options keep them, so two Results of one
            case stay two rows with their own labels.

    Raises:
        ValueError: a non-positive target or a headroom outside [0, 1).
    """
    if target_qps <= 0:
        raise ValueError("target rate must be positive")
    if not 0.0 <= headroom < 1.0:
        raise ValueError(f"headroom {headroom} outside [0, 1)")
    out = CapacityPlan(target_qps, slo_p99_ms, headroom)
    given = list(results)
    labs = list(labels) if labels is not None else [None] * len(given)
    pairs = [(r, lab) for r, lab in zip(given, labs) if r.metrics.throughput.queries_per_s > 0]
    if valid_only and any(r.validity.valid for r, _ in pairs):
        pairs = [(r, lab) for r, lab in pairs if r.validity.valid]
    for r, lab in pairs:
        out.options.append(option(r, target_qps, slo_p99_ms, headroom, lab))
    out.options.sort(key=lambda o: (not o.meets_slo, not o.low_bounded, o.cores_low_ci, o.cores, o.p99_ms))
    ok = [o for o in out.options if o.meets_slo]
    out.chosen = ok[0] if ok else None
    if out.chosen is not None:
        out.chosen.chosen = True
    return out
