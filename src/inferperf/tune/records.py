"""What a study's trials record and how they are read back: the configuration key that makes a measurement
reusable, the seed of the exploration stream, the trials that hold a measurement of their own, the best feasible
value, and the constraints Optuna's samplers read. Used by :mod:`inferperf.tune.search` and the outputs."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..config import BenchConfig
from .objective import Goal


def exploration_seed(fingerprint: str, search_budget: int) -> int:
    """The seed of the stream that picks unmeasured configurations to explore.

    Derived from recorded values (machine fingerprint, search budget) through sha256, so every process and every
    rerun draws the same stream (Python's ``hash`` of a str changes with ``PYTHONHASHSEED``).

    Returns:
        An int in [0, 2**32).
    """
    digest = hashlib.sha256(f"{fingerprint}\x00{search_budget}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def config_key(model_sha256: str, cfg: BenchConfig, serve: dict[str, Any], fingerprint: str) -> str:
    """16 hex digits: the model hash, what defines the configuration (not how long it is measured), the serving
    knobs and the machine fingerprint."""
    doc = cfg.model_dump(mode="json", exclude={"warmup", "stop", "validity", "percentile_method", "repeat",
                                               "sampler", "sampler_interval_s", "worker_timeout_s"})
    blob = json.dumps({"model": model_sha256, "config": doc, "serve": serve, "machine": fingerprint},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def measured_trials(study: Any) -> list[Any]:
    """Trials that hold a measurement of their own (COMPLETE or PRUNED, not cached, not over budget)."""
    import optuna

    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return [t for t in study.get_trials(deepcopy=False, states=states)
            if t.user_attrs.get("measured") and "cached_from" not in t.user_attrs]


def best_feasible_value(study: Any, goal: Goal) -> float | None:
    """The best objective value among measured feasible COMPLETE trials (None before one exists)."""
    import optuna

    vals = [t.values[0] for t in measured_trials(study)
            if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("feasible") and t.values]
    if not vals:
        return None
    return min(vals) if goal.objective == "p99" else max(vals)


def set_constraints(trial: Any, goal: Goal, values: list[float]) -> None:
    """Record the constraint values on the trial (Optuna's ``Trial.set_constraint``: <= 0 feasible), capped at 1e9."""
    for name, v in zip(goal.constraint_names, values):
        trial.set_constraint(name, min(float(v), 1e9))


__all__ = ["best_feasible_value", "config_key", "exploration_seed", "measured_trials", "set_constraints"]
