"""What a tune optimises: the objective, the latency SLO as a constraint, and how many samples a trial needs.

* ``throughput``: maximise samples/s (queries/s at batch 1) subject to ``p99 <= slo_p99_ms``.
* ``throughput-per-core``: the same per CPU the configuration occupies (streams or instances x intra-op
  threads, at most the effective CPUs): for cost.
* ``p99``: minimise p99 latency (ms), optionally subject to ``samples/s >= min_throughput``.
* ``multi``: the Pareto front of throughput (max) vs p99 (min).

Constraints follow Optuna's convention (``constraints_func``): a value <= 0 is satisfied. A trial whose
constraint is violated is *infeasible* and is never reported as the best in any output.

Samples: a p99 from n samples says something beyond the maximum only when n >= ln(1 - c) / ln(q)
(the smallest n for which, with every sample under a bound, the q-quantile is under it with confidence
c): 459 for p99 at c = 0.99, the figure behind MLPerf LoadGen's early-stopping minimum.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import field_validator, model_validator
from pydantic.dataclasses import dataclass

from ..results.model import Result

Objective = Literal["throughput", "throughput-per-core", "p99", "multi"]


def samples_for_percentile(q: float = 99.0, confidence: float = 0.99) -> int:
    """Smallest sample count n with q^n <= 1 - confidence (``q`` in percent): 459 for p99 at 99 %."""
    return math.ceil(math.log(1.0 - confidence) / math.log(q / 100.0))


OBJECTIVES = ("throughput", "throughput-per-core", "p99", "multi")


@dataclass(frozen=True)
class Goal:
    """The objective and its constraints (validated on construction, as the CLI's flags are).

    Attributes:
        objective: see the module docstring.
        slo_p99_ms: p99 latency bound (ms, > 0) or None.
        min_throughput: samples/s lower bound (> 0; ``p99`` objective only) or None.
        effective_cpus: CPUs of this machine (for ``throughput-per-core``; >= 1).

    Raises:
        pydantic.ValidationError: an unknown objective, a bound <= 0, ``min_throughput`` with another objective
            (the message names the flag: :func:`inferperf.errors.settings_message`).
    """

    objective: Objective = "throughput"
    slo_p99_ms: float | None = None
    min_throughput: float | None = None
    effective_cpus: int = 1

    @field_validator("objective", mode="before")
    @classmethod
    def _known(cls, v: Any) -> Any:
        if v not in OBJECTIVES:
            raise ValueError(f"--objective {v!r}: choose throughput, throughput-per-core or p99"
                             " (or --multi-objective)")
        return v

    @model_validator(mode="after")
    def _bounds(self) -> Goal:
        if self.slo_p99_ms is not None and not self.slo_p99_ms > 0:
            raise ValueError(f"--slo-p99-ms {self.slo_p99_ms:g}: give a p99 bound > 0 ms")
        if self.min_throughput is not None and not self.min_throughput > 0:
            raise ValueError(f"--min-throughput {self.min_throughput:g}: give a floor > 0 samples/s")
        if self.min_throughput is not None and self.objective != "p99":
            raise ValueError("--min-throughput is the constraint of --objective p99: use --slo-p99-ms with a"
                             " throughput objective")
        if self.effective_cpus < 1:
            raise ValueError(f"effective_cpus {self.effective_cpus}: a machine has at least 1 CPU")
        return self

    @property
    def directions(self) -> list[str]:
        """Optuna study directions."""
        if self.objective == "multi":
            return ["maximize", "minimize"]
        return ["minimize"] if self.objective == "p99" else ["maximize"]

    @property
    def has_constraint(self) -> bool:
        """True when an SLO or a throughput floor applies."""
        return self.slo_p99_ms is not None or self.min_throughput is not None

    def describe(self) -> str:
        """``maximise throughput (samples/s) subject to p99 <= 60 ms``."""
        what = {"throughput": "maximise throughput (samples/s)",
                "throughput-per-core": "maximise throughput per occupied core (samples/s/core)",
                "p99": "minimise p99 latency (ms)",
                "multi": "Pareto front of throughput (max) vs p99 latency (min)"}[self.objective]
        bounds = []
        if self.slo_p99_ms is not None:
            bounds.append(f"p99 <= {self.slo_p99_ms:g} ms")
        if self.min_throughput is not None:
            bounds.append(f"throughput >= {self.min_throughput:g} samples/s")
        return what + (" subject to " + " and ".join(bounds) if bounds else "")

    def cores(self, params: dict[str, Any]) -> int:
        """CPUs a configuration occupies: (instances or streams) x intra-op threads, within [1, effective CPUs]."""
        threads = params.get("intra_op_num_threads") or self.effective_cpus
        parallel = params.get("instance_count") or params.get("concurrency") or 1
        return max(1, min(self.effective_cpus, parallel * threads))

    def figures(self, r: Result) -> dict[str, float]:
        """``throughput`` (samples/s), ``queries_per_s``, ``p50_ms``, ``p99_ms``, ``samples`` of a Result."""
        lat = r.metrics.latency_ms
        tp = r.metrics.throughput
        return {"throughput": float(tp.samples_per_s or tp.queries_per_s), "queries_per_s": float(tp.queries_per_s),
                "p50_ms": float(lat.p50) if lat else math.inf, "p99_ms": float(lat.p99) if lat else math.inf,
                "samples": float(lat.count) if lat else 0.0}

    def values(self, fig: dict[str, float], params: dict[str, Any]) -> list[float]:
        """The objective value(s) Optuna is told, from :meth:`figures`."""
        if self.objective == "throughput":
            return [fig["throughput"]]
        if self.objective == "throughput-per-core":
            return [fig["throughput"] / self.cores(params)]
        if self.objective == "p99":
            return [fig["p99_ms"]]
        return [fig["throughput"], fig["p99_ms"]]

    @property
    def constraint_names(self) -> list[str]:
        """Names of the constraints :meth:`constraint` returns, in order."""
        return (["p99_over_slo_ms"] if self.slo_p99_ms is not None else []) + (
            ["throughput_under_floor"] if self.min_throughput is not None else [])

    def constraint(self, fig: dict[str, float]) -> list[float]:
        """Optuna constraint values (<= 0 satisfied): ``p99 - slo`` (ms), ``floor - throughput`` (samples/s)."""
        out = []
        if self.slo_p99_ms is not None:
            out.append(fig["p99_ms"] - self.slo_p99_ms)
        if self.min_throughput is not None:
            out.append(self.min_throughput - fig["throughput"])
        return out

    def feasible(self, fig: dict[str, float]) -> bool:
        """Every constraint satisfied."""
        return all(c <= 0 for c in self.constraint(fig))

    def better(self, a: list[float], b: list[float]) -> bool:
        """True when objective values ``a`` beat ``b`` (single objective only)."""
        return a[0] < b[0] if self.objective == "p99" else a[0] > b[0]

    def violation(self, fig: dict[str, float]) -> float:
        """How far outside the constraints, relative to each bound (0 when feasible): ranks infeasible ones."""
        out = 0.0
        if self.slo_p99_ms is not None:
            out += max(0.0, fig["p99_ms"] - self.slo_p99_ms) / self.slo_p99_ms
        if self.min_throughput is not None:
            out += max(0.0, self.min_throughput - fig["throughput"]) / self.min_throughput
        return out
