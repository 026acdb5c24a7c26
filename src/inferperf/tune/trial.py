"""One trial's measurement: staged runs in fresh processes, early stop on a clear answer, pruning of hopeless ones.

A trial measures its configuration in up to ``max_stages`` runs, each a fresh worker process
(:func:`inferperf.measure.runner.run_in_worker`, or a fresh server for a served model), and pools
their samples (:func:`inferperf.measure.runner.aggregate`: samples pooled, never percentiles averaged):

1. a *probe* of ``probe_fraction`` of the samples and duration. It is pruned when it is hopeless:
   its median latency's 95 % lower bound is already above the p99 SLO (p99 >= p50), or its
   objective is below ``prune_ratio`` x the best feasible value found so far (this machine's
   round-to-round noise is 10-30 %, so 0.7 prunes only what noise cannot explain);
2. the rest of the samples the SLO's percentile needs (:func:`~inferperf.tune.objective.samples_for_percentile`);
3. only when the p99's 95 % interval (order statistics, :func:`inferperf.stats.quantile_ci`) still
   contains the SLO: one more stage of the same size. Otherwise the trial stops: its interval is
   tight enough to decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import BenchConfig, StopOptions
from ..measure.runner import aggregate
from ..results.model import Result
from ..stats import ci_text, median_ci, quantile_ci
from .objective import Goal


class Evaluator(Protocol):
    """Measures one run of a configuration and returns its Result.

    ``run(model, cfg, params, repeat_index)``: ``cfg`` holds the stop rule of this run and the
    in-process parameters; ``params`` all trial parameters (a served evaluator reads the serving knobs).
    """

    served: bool

    def run(self, model: str, cfg: BenchConfig, params: dict[str, Any], repeat_index: int) -> Result:  # pragma: no cover
        """One fresh run."""
        ...


class IsolatedEvaluator:
    """In-process configurations, each run in a fresh worker process (the sweep's isolated runner)."""

    served = False

    def __init__(self, command: list[str] | None = None) -> None:
        self.command = command

    def run(self, model: str, cfg: BenchConfig, params: dict[str, Any], repeat_index: int) -> Result:
        """:func:`~inferperf.measure.runner.run_in_worker` of ``cfg`` (raises its errors)."""
        from ..measure.runner import run_in_worker

        return run_in_worker(model, cfg, repeat_index=repeat_index, command=self.command)


@dataclass(frozen=True)
class TrialPlan:
    """How much a trial measures.

    Attributes:
        min_samples: samples a finished trial has at least (459 for a p99 SLO).
        duration_s: minimum measured seconds of a finished trial (all stages together).
        max_duration_s: cap of one stage (s).
        probe_fraction: share of samples and duration in the probe.
        max_stages: at most this many runs per trial.
        prune_ratio: prune when the probe's objective is below this fraction of the best feasible.
    """

    min_samples: int = 459
    duration_s: float = 4.0
    max_duration_s: float = 60.0
    probe_fraction: float = 0.25
    max_stages: int = 3
    prune_ratio: float = 0.7

    def stop(self, stage: int) -> StopOptions:
        """The stop rule of a stage (0 = probe)."""
        share = self.probe_fraction if stage == 0 else (1.0 - self.probe_fraction if stage == 1 else 1.0)
        return StopOptions(min_iterations=max(20, math.ceil(self.min_samples * share)),
                           min_duration_s=self.duration_s * share,
                           max_duration_s=max(self.max_duration_s, self.duration_s * share))


@dataclass
class Measured:
    """A trial's pooled Result (None when the probe failed), the runs it pooled, why it was pruned (or None)."""

    result: Result | None
    runs: list[Result] = field(default_factory=list)
    pruned: str | None = None
    decided_by: str = ""


def _hopeless(goal: Goal, fig: dict[str, float], params: dict[str, Any], r: Result, best: float | None,
              ratio: float) -> str | None:
    """Why a probe cannot become the best feasible configuration, or None."""
    if goal.slo_p99_ms is not None and r.samples.latency_ns:
        lo = median_ci([x / 1e6 for x in r.samples.latency_ns])[0]
        if lo > goal.slo_p99_ms:
            return f"median latency >= {lo:.3g} ms (95 % lower bound) is already above the p99 SLO {goal.slo_p99_ms:g} ms"
    if best is None or goal.objective == "multi":
        return None
    value = goal.values(fig, params)[0]
    if goal.objective == "p99":
        if fig["p50_ms"] > best:
            return f"median latency {fig['p50_ms']:.3g} ms is above the best p99 found ({best:.3g} ms)"
        return None
    if value < ratio * best:
        return f"{value:.4g} is below {ratio:g} x the best feasible {best:.4g}"
    return None


def measure_trial(evaluator: Evaluator, model: str, cfg: BenchConfig, params: dict[str, Any], plan: TrialPlan,
                  goal: Goal, best: float | None = None, first_index: int = 0) -> Measured:
    """Measure one configuration in stages (see the module docstring).

    Args:
        evaluator: runs one stage.
        cfg: the configuration (its stop rule is replaced per stage).
        params: the trial's parameters.
        best: the best feasible objective value so far (None before the first).
        first_index: repeat index of the first stage (recorded in each run).

    Raises:
        the evaluator's errors (a configuration that does not run: UsageError, RuntimeFailure, ...).
    """
    runs: list[Result] = []
    pooled: Result | None = None
    decided = ""
    for stage in range(plan.max_stages):
        stage_cfg = cfg.model_copy(update={"stop": plan.stop(stage), "repeat": 1})
        runs.append(evaluator.run(model, stage_cfg, params, first_index + stage))
        pooled = runs[0] if len(runs) == 1 else aggregate(runs, cfg)
        fig = goal.figures(pooled)
        if stage == 0:
            why = _hopeless(goal, fig, params, pooled, best, plan.prune_ratio)
            if why:
                return Measured(pooled, runs, pruned=why, decided_by="probe")
            continue
        if fig["samples"] < plan.min_samples:
            decided = f"{int(fig['samples'])} samples (cap reached before {plan.min_samples})"
            continue
        if goal.slo_p99_ms is None:
            decided = f"{int(fig['samples'])} samples"
            break
        lo, hi = quantile_ci([x / 1e6 for x in pooled.samples.latency_ns], 99.0)
        slo = goal.slo_p99_ms
        if math.isnan(lo) or math.isnan(hi):  # too few samples past the p99 for an end: no claim from it
            decided = (f"p99 {ci_text(None)} from {int(fig['samples'])} samples; the measured p99 decides"
                       f" the SLO {slo:g} ms")
            break
        if not (lo <= slo <= hi):
            decided = f"p99 95 % CI [{lo:.3g}, {hi:.3g}] ms decides the SLO {slo:g} ms"
            break
        decided = f"p99 95 % CI [{lo:.3g}, {hi:.3g}] ms still contains the SLO {slo:g} ms after {stage + 1} runs"
    return Measured(pooled, runs, decided_by=decided)
