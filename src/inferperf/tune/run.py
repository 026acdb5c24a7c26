"""``tune()``: open or continue the study, search, validate the winner, write the outputs.

Folder layout (``--output DIR``)::

    DIR/study.db              Optuna's SQLite storage (default; --storage moves it)
    DIR/trials/NNNN-KEY.json  each measured trial's pooled Result (kind tune)
    DIR/validation/*.json     each validated candidate's pooled validation runs
    DIR/trials.csv            every trial: parameters, figures, state, cache hits
    DIR/best.yaml             the winner in the settings-file format (bench --config, serve --config)
    DIR/best-matrix.yaml      the winner as a one-case sweep matrix (sweep --matrix)
    DIR/tune.json             the summary: goal, budget, machine, best, validation, importances

A rerun with the same folder (or the same ``--storage``/``--study-name``) continues the study: finished
trials are kept, cached configurations are not measured again, and the budget counts what was spent.
"""

from __future__ import annotations

import socket
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import BenchConfig
from ..errors import BackendUnavailable, UsageError
from ..results.model import SystemInfo
from .lock import LockedEvaluator, held, lock_path
from .objective import Goal
from .search import SearchPass, SearchSettings, search
from .space import TuneSpace, apply
from .study import open_storage, other_machines, quiet_optuna, study_names, tickets_used
from .trial import Evaluator, TrialPlan

SAMPLERS = ("tpe", "gp", "random", "grid")


@dataclass
class TuneSpec:
    """Everything a tune needs (the CLI's flags, as data).

    Attributes:
        n_trials: the budget in measured trials, validation runs included (all workers together).
        timeout_s: wall-clock budget of this process (s), or None.
        validate_top, validation_rounds: candidates re-measured (plus the defaults) and rounds.
        study_name: None = derived from the model's name and hash.
        serve_base: ServeOptions fields for a served tune (``--serve``).
    """

    model: str
    base: BenchConfig
    space: TuneSpace
    goal: Goal
    plan: TrialPlan
    n_trials: int
    output: Path
    sampler: str = "tpe"
    seed: int = 0
    storage: str | None = None
    study_name: str | None = None
    timeout_s: float | None = None
    validate: bool = True
    validate_top: int = 2
    validation_rounds: int = 3
    serve_base: dict[str, Any] = field(default_factory=dict)
    from_sweep: Path | None = None
    variants: dict[str, str] = field(default_factory=dict)

    @property
    def validation_runs(self) -> int:
        """Runs the validation takes from the budget: (candidates + defaults) x rounds."""
        return (self.validate_top + 1) * self.validation_rounds if self.validate else 0


@dataclass
class TuneOutcome:
    """What a tune produced (``summary`` is ``tune.json``)."""

    summary: dict[str, Any]
    search: SearchPass
    study: Any = None


def make_sampler(name: str, seed: int, goal: Goal, space: TuneSpace, budget: int) -> Any:
    """An Optuna sampler: TPE (multivariate, grouped for the conditional axes; Watanabe 2023), Gaussian process
    (needs torch), random, or grid. The SLO reaches TPE and GP through each trial's constraints
    (``Trial.set_constraint``, Optuna >= 5).

    Raises:
        UsageError: an unknown sampler name. BackendUnavailable: ``gp`` without torch (names the extra).
    """
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                              n_startup_trials=max(3, min(10, budget // 3)))
        if name == "gp":
            try:
                import torch  # noqa: F401
            except ImportError:
                raise BackendUnavailable("--sampler gp needs torch: pip install 'inferperf[torch]'") from None
            return optuna.samplers.GPSampler(seed=seed, n_startup_trials=max(3, min(10, budget // 3)))
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if name == "grid":  # the grid's points are enqueued in a shuffled order (:func:`_enqueue_grid`); Optuna's
            return optuna.samplers.RandomSampler(seed=seed)  # GridSampler calls Study.stop, refused under ask-and-tell
    raise UsageError(f"--sampler {name!r}: choose from {', '.join(SAMPLERS)}")


def _preflight(spec: TuneSpec) -> None:
    """Check the model(s), every backend of the space and the shapes before any trial (no runtime loaded):
    a wrong shape or a corrupt file is one line with exit 2, not a study of failed trials.

    Raises:
        UsageError / ModelError: the first problem (the sweep's preflight message).
    """
    from ..sweep.space import Case, preflight

    models = list(dict.fromkeys([spec.model, *spec.variants.values()]))
    backends = spec.space.backend or [spec.base.backend]
    from ..errors import InferperfError

    try:
        preflight([Case(m, apply(spec.base, {"backend": b}), label=m) for m in models for b in backends])
    except InferperfError as e:
        raise type(e)(str(e).replace("sweep case ", "tune model ", 1)) from None


def _model_hash(model: str) -> str:
    from ..measure.facts import model_sha256

    return model_sha256(model)


def _check_same_goal(study: Any, spec: TuneSpec, name: str) -> None:
    """Refuse to continue a study that holds another objective, SLO or space (its trials would not compare)."""
    saved = study.user_attrs.get("goal")
    mine = {"objective": spec.goal.objective, "slo_p99_ms": spec.goal.slo_p99_ms,
            "min_throughput": spec.goal.min_throughput, "space": spec.space.model_dump(mode="json"),
            "served": bool(spec.serve_base) or any(k in spec.space.axes() for k in ("instance_count", "max_batch_size"))}
    if saved is None:
        study.set_user_attr("goal", mine)
        return
    if saved != mine:
        diff = sorted(k for k in mine if saved.get(k) != mine[k])
        raise UsageError(f"study '{name}' holds a tune with another {', '.join(diff)}: rerun with the same flags, or"
                         " give another --study-name / --output")


def check_budget(spec: TuneSpec) -> int:
    """The search budget: ``n_trials`` less the validation runs.

    Raises:
        UsageError: ``n_trials`` < 1, or no search trial left after the validation (one line naming the fixes).
    """
    if spec.n_trials < 1:
        raise UsageError("--n-trials must be >= 1")
    search_budget = spec.n_trials - spec.validation_runs
    if search_budget < 1:
        raise UsageError(f"--n-trials {spec.n_trials} leaves no search trial after {spec.validation_runs} validation runs"
                         f" (({spec.validate_top} candidates + defaults) x {spec.validation_rounds} rounds): raise"
                         f" --n-trials to at least {spec.validation_runs + 1}, lower --validate-top /"
                         " --validation-rounds, or pass --no-validate")
    return search_budget


def tune(spec: TuneSpec, evaluator: Evaluator, info: SystemInfo | None = None,
         on_trial: Callable[[dict[str, Any]], None] | None = None,
         on_validation: Callable[[str, int, Any, str | None], None] | None = None,
         on_start: Callable[[], None] | None = None) -> TuneOutcome:
    """Search for the best configuration of ``spec.model`` under ``spec.goal`` and validate it.

    Every input (budget, space, models, storage, study) is checked before ``on_start`` is called and the first
    trial starts, so a bad one is the only thing a caller printing a header on ``on_start`` shows.

    Returns:
        The outcome; ``summary["best"]`` is None when no configuration met the constraints
        (``summary["closest"]`` names the nearest), which the CLI turns into exit 3.

    Raises:
        UsageError: a budget too small for the validation, a study holding another goal, a storage that cannot be
            reached, an empty space. BackendUnavailable: a missing driver or sampler dependency.
    """
    import optuna

    from ..system import collect_system, machine_fingerprint
    from .output import summarize, write_outputs
    from .validate import validate

    quiet_optuna()
    info = info or collect_system()
    fp = machine_fingerprint(info)
    search_budget = check_budget(spec)
    if not isinstance(evaluator, LockedEvaluator):
        evaluator = LockedEvaluator(evaluator, fp)
    if not spec.space.axes():
        raise UsageError("the search space is empty: give at least one axis (e.g. --intra-op-num-threads 1,2) or --space FILE")
    if not spec.space.grid(info, spec.base.concurrency):
        raise UsageError("every configuration of the space is pruned as infeasible (oversubscribed): widen the space or"
                         " raise --max-oversubscription")
    _preflight(spec)
    sha = _model_hash(spec.model)
    base_name = spec.study_name or f"tune-{Path(spec.model.removeprefix('zoo:')).stem}-{sha[:8]}"
    name, budget_name = study_names(base_name, fp)
    storage = open_storage(spec.storage, spec.output)
    sampler = make_sampler(spec.sampler, spec.seed, spec.goal, spec.space, search_budget)
    study = optuna.create_study(storage=storage, study_name=name, directions=spec.goal.directions, sampler=sampler,
                                load_if_exists=True)
    if [d.name.lower() for d in study.directions] != spec.goal.directions:
        raise UsageError(f"study '{name}' optimises in another direction: give another --study-name / --output")
    budget_study = optuna.create_study(storage=storage, study_name=budget_name, load_if_exists=True)
    _check_same_goal(study, spec, name)
    study.set_user_attr(f"machine:{socket.gethostname()}", info.model_dump(mode="json", include={
        "cpu_model", "physical_cores", "logical_cores", "effective_cpus", "cgroup_cpu_limit", "memory_bytes", "os",
        "packages"}))
    if spec.from_sweep is not None:
        from .warm import enqueue_sweep

        enqueue_sweep(study, spec, info, fp, sha)
    if spec.sampler == "grid":
        _enqueue_grid(study, spec, info)
    settings = SearchSettings(model=spec.model, model_sha256=sha, base=spec.base, space=spec.space, goal=spec.goal,
                              plan=spec.plan, output=spec.output, search_budget=search_budget, fingerprint=fp,
                              serve_base=spec.serve_base, variants=spec.variants,
                              variant_sha256={k: _model_hash(v) for k, v in spec.variants.items()},
                              deadline=time.monotonic() + spec.timeout_s if spec.timeout_s else None)
    if on_start is not None:
        on_start()
    sp = search(study, budget_study, settings, evaluator, info, on_trial)
    validation = study.user_attrs.get("validation")
    if spec.validate and validation is None:
        # the worker that drew the validation ticket validates; so does any worker whose search ended otherwise
        # (converged, space exhausted, time) once no other worker's trial is running
        _wait_for_others(study, settings.deadline)
        validation = study.user_attrs.get("validation")
        if validation is None and (sp.validator or sp.stop_reason):
            with held(lock_path(f"{name}-validation")):  # one validation per study on this machine: the others
                validation = study.user_attrs.get("validation")  # that waited here read the first one's
                if validation is None:
                    validation = validate(study, settings, evaluator, spec.validate_top, spec.validation_rounds,
                                          spec.seed, on_validation)
                    study.set_user_attr("validation", validation)
    summary = summarize(study, spec, settings, sp, validation, fp, other_machines(storage, base_name, fp),
                        tickets_used(budget_study))
    summary["measurement_lock"] = {"path": str(evaluator.path), "waited_s": round(evaluator.waited_s, 3),
                                   "rule": "one measurement at a time on this machine (workers take turns)"}
    write_outputs(study, spec, summary)
    return TuneOutcome(summary=summary, search=sp, study=study)


def _enqueue_grid(study: Any, spec: TuneSpec, info: SystemInfo) -> None:
    """``--sampler grid``: every feasible point not yet measured or waiting, in an order shuffled with the seed."""
    import random

    import optuna

    have = {repr(sorted((t.user_attrs.get("config") or t.system_attrs.get("fixed_params") or t.params).items()))
            for t in study.get_trials(deepcopy=False)
            if t.user_attrs.get("measured") or t.state == optuna.trial.TrialState.WAITING}
    points = [p for p in spec.space.grid(info, spec.base.concurrency) if repr(sorted(p.items())) not in have]
    random.Random(spec.seed).shuffle(points)
    for p in points:
        study.enqueue_trial(p, user_attrs={"grid": True})


def _wait_for_others(study: Any, deadline: float | None, poll_s: float = 2.0, cap_s: float = 900.0) -> None:
    """Wait until no other worker's trial is running (stale ones are failed by the sweep), within a deadline."""
    import optuna

    from .study import sweep_stale

    end = min(deadline or float("inf"), time.monotonic() + cap_s)
    while time.monotonic() < end:
        sweep_stale(study)
        if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            return
        time.sleep(poll_s)
