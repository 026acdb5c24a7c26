"""Warm start from a sweep: the configurations a sweep measured on this machine become finished trials.

``--from-sweep DIR`` reads the sweep's pooled case Results (``DIR/cases/*.json``). A case joins the study
when its model hash and machine fingerprint are this tune's and every searched axis has a value the space
lists; its figures are then those of a measured trial (``from_sweep`` names the file), so the sampler
learns from it and the cache answers it. Cases from another machine or model are skipped and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..results.io import load
from ..results.model import Result, SystemInfo
from ..system import machine_fingerprint


def _params(r: Result, axes: dict[str, list[Any]]) -> dict[str, Any] | None:
    """The case's value on each searched axis, or None when one is not in the space."""
    c = r.config
    req = c.session.requested
    have = {"precision": r.model.variant, "backend": c.backend, "intra_op_num_threads": req.get("intra_op_num_threads"),
            "inter_op_num_threads": req.get("inter_op_num_threads"), "execution_mode": req.get("execution_mode"),
            "graph_optimization_level": req.get("graph_optimization_level"),
            "enable_mem_pattern": req.get("enable_mem_pattern"), "enable_cpu_mem_arena": req.get("enable_cpu_mem_arena"),
            "batch_size": c.workload.batch_size, "concurrency": c.concurrency, "session_mode": c.session_mode}
    out = {}
    for name, values in axes.items():
        v = have.get(name)
        if v not in values:
            return None
        out[name] = v
    return out


def enqueue_sweep(study: Any, spec: Any, info: SystemInfo, fingerprint: str, model_sha256: str) -> dict[str, int]:
    """Add the sweep's matching cases to ``study`` as COMPLETE trials (once: a case already added is skipped).

    Returns:
        Counts: ``added``, ``other_machine``, ``other_model``, ``outside_space``, ``already``.

    Raises:
        UsageError: the folder holds no sweep cases.
    """
    import optuna

    from .records import config_key
    from .space import TuneSpace, apply

    folder = Path(spec.from_sweep)
    files = sorted((folder / "cases").glob("*.json"))
    if not files:
        raise UsageError(f"--from-sweep '{folder}': no sweep cases (cases/*.json) there: give a sweep's --output folder")
    axes = spec.space.axes()
    dists = {n: optuna.distributions.CategoricalDistribution(v) for n, v in axes.items()}
    known = {t.user_attrs.get("from_sweep") for t in study.get_trials(deepcopy=False)}
    counts = dict.fromkeys(("added", "other_machine", "other_model", "outside_space", "already"), 0)
    for f in files:
        r = load(f)
        if machine_fingerprint(r.system) != fingerprint:
            counts["other_machine"] += 1
            continue
        if r.model.sha256 != model_sha256:
            counts["other_model"] += 1
            continue
        params = _params(r, axes)
        if params is None:
            counts["outside_space"] += 1
            continue
        if str(f) in known:
            counts["already"] += 1
            continue
        params = TuneSpace.normalize(params, spec.base.concurrency)
        fig = spec.goal.figures(r)
        key = config_key(model_sha256, apply(spec.base, params), {}, fingerprint)
        attrs = {**fig, "feasible": spec.goal.feasible(fig), "constraint": spec.goal.constraint(fig), "measured": True,
                 "result": str(f), "config": params, "config_key": key, "from_sweep": str(f), "stages": 1,
                 "decided_by": "measured by the sweep"}
        trial = optuna.trial.create_trial(params=params, distributions={n: dists[n] for n in params},
                                          values=spec.goal.values(fig, params), user_attrs=attrs,
                                          system_attrs={f"constraints:{n}": min(float(v), 1e9) for n, v in
                                                        zip(spec.goal.constraint_names, attrs["constraint"])})
        study.add_trial(trial)
        counts["added"] += 1
    return counts
