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

import importlib.util
import socket
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import ConfigDict, field_validator, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from ..clock import SYSTEM_CLOCK, monotonic_s
from ..config import BenchConfig
from ..errors import BackendUnavailable, UsageError
from ..results.model import SystemInfo
from .lock import LockedEvaluator, held, lock_path
from .objective import Goal
from .search import SearchPass, SearchSettings, search
from .space import SERVE_AXES, TuneSpace, apply, value_error
from .study import open_storage, other_machines, quiet_optuna, study_names, tickets_used
from .trial import Evaluator, TrialPlan

SAMPLERS = ("tpe", "gp", "random", "grid")


@pydantic_dataclass(config=ConfigDict(extra="forbid", arbitrary_types_allowed=True))
class TuneSpec:
    """Everything a tune needs (the CLI's flags, as data), checked on construction as the CLI checks its flags.

    Attributes:
        model: ONNX file or ``zoo:NAME`` (the fp32 reference when ``variants`` are given).
        base: the BenchConfig every trial starts from.
        space: the axes searched; ``goal``: objective and constraints; ``plan``: what one trial measures.
        n_trials: the budget in measured trials, validation runs included (all workers together).
        output: the results folder (created; not a file).
        sampler: ``tpe``, ``gp``, ``random`` or ``grid``.
        timeout_s: wall-clock budget of this process (s, > 0), or None.
        validate, validate_top, validation_rounds: candidates re-measured (plus the defaults) and rounds
            (>= 1 candidate, >= 2 rounds: one round has no interval).
        study_name: None = derived from the model's name and hash.
        served: a served tune (``--serve``; the evaluator must be a served one): the serving axes
            (``max_batch_size``, ``max_queue_delay_us``, ``instance_count``) need it, ``session_mode`` refuses it.
        serve_base: ServeOptions fields for a served tune.
        variants: precision variant name -> model file (``--variants DIR``); the ``precision`` axis needs them.

    Raises:
        pydantic.ValidationError: a refused value or combination; the message is the CLI's one line
            (:func:`inferperf.errors.settings_message`).
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
    served: bool = False
    serve_base: dict[str, Any] = field(default_factory=dict)
    from_sweep: Path | None = None
    variants: dict[str, str] = field(default_factory=dict)

    @field_validator("sampler")
    @classmethod
    def _known_sampler(cls, v: str) -> str:
        if v not in SAMPLERS:
            raise ValueError(f"--sampler {v!r}: choose from {', '.join(SAMPLERS)}")
        return v

    @model_validator(mode="after")
    def _budget(self) -> TuneSpec:
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"--timeout-s {self.timeout_s:g}: give seconds > 0 (or leave it out)")
        if self.validate_top < 1 or self.validation_rounds < 2:
            raise ValueError("--validate-top must be >= 1 and --validation-rounds >= 2 (one round has no interval)")
        if self.n_trials < 1:
            raise ValueError("--n-trials must be >= 1")
        if self.n_trials - self.validation_runs < 1:
            raise ValueError(f"--n-trials {self.n_trials} leaves no search trial after {self.validation_runs} validation"
                             f" runs (({self.validate_top} candidates + defaults) x {self.validation_rounds} rounds):"
                             f" raise --n-trials to at least {self.validation_runs + 1}, lower --validate-top /"
                             " --validation-rounds, or pass --no-validate")
        if self.output.exists() and not self.output.is_dir():
            raise ValueError(f"--output '{self.output}' is a file: give a folder for the tune's results")
        return self

    @model_validator(mode="after")
    def _axes(self) -> TuneSpec:
        why = value_error(self.space)  # backends: the preflight checks them against the registry
        if why is not None:
            raise ValueError(why)
        axes = self.space.axes()
        if not axes:
            raise ValueError("the search space is empty: give at least one axis (e.g. --intra-op-num-threads 1,2) or"
                             " --space FILE")
        if not self.served and ({*SERVE_AXES} & set(axes) or self.serve_base):
            raise ValueError("--max-batch-size / --max-queue-delay-us / --instance-count are serving axes: add --serve")
        if self.served and "session_mode" in axes:
            raise ValueError("--session-mode is an in-process axis: a served model's instances have their own sessions")
        if self.served and "allocator" in axes:
            raise ValueError("--allocator is an in-process axis here: tune it without --serve (serve --allocator"
                             " runs one server with it)")
        if self.space.precision and not self.variants:
            raise ValueError("--precision needs --variants DIR (an inferperf optimize folder with the variant files)")
        missing = [v for v in self.space.precision or [] if v not in self.variants]
        if missing:
            raise ValueError(f"--precision {','.join(missing)}: not among the variants that passed their accuracy gate;"
                             f" these did: {', '.join(sorted(self.variants))}")
        return self

    @property
    def validation_runs(self) -> int:
        """Runs the validation takes from the budget: (candidates + defaults) x rounds."""
        return (self.validate_top + 1) * self.validation_rounds if self.validate else 0


@dataclass
class TuneOutcome:
    """What a tune produced (``summary`` is ``tune.json``; ``spec``: the checked spec it ran)."""

    summary: dict[str, Any]
    search: SearchPass
    study: Any = None
    spec: TuneSpec | None = None


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
            if importlib.util.find_spec("torch") is None:  # looked up, not imported: GPSampler imports it when used
                raise BackendUnavailable("--sampler gp needs torch: pip install 'inferperf[torch]'")
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


def tune(spec: TuneSpec, evaluator: Evaluator, info: SystemInfo | None = None,
         on_trial: Callable[[dict[str, Any]], None] | None = None,
         on_validation: Callable[[str, int, Any, str | None], None] | None = None,
         on_start: Callable[[], None] | None = None) -> TuneOutcome:
    """Search for the best configuration of ``spec.model`` under ``spec.goal`` and validate it.

    ``spec`` checked itself on construction (budget, validation, serving axes, precision: :class:`TuneSpec`);
    the rest (space against this machine, models, storage, study) is checked before ``on_start`` is called and
    the first trial starts, so a bad one is the only thing a caller printing a header on ``on_start`` shows.

    Returns:
        The outcome; ``summary["best"]`` is None when no configuration met the constraints
        (``summary["closest"]`` names the nearest), which the CLI turns into exit 3.

    Raises:
        UsageError: a study holding another goal, a storage that cannot be reached, a space whose every point is
            oversubscribed, an evaluator that is not ``spec.served``'s kind. BackendUnavailable: a missing driver
            or sampler dependency.
    """
    import optuna

    from ..system import collect_system, machine_fingerprint
    from .output import summarize, write_outputs
    from .validate import validate

    quiet_optuna()
    info = info or collect_system()
    fp = machine_fingerprint(info)
    search_budget = spec.n_trials - spec.validation_runs  # >= 1: TuneSpec refuses less
    if bool(getattr(evaluator, "served", False)) != spec.served:
        raise UsageError("a served tune (TuneSpec.served, --serve) needs a served evaluator (ServedEvaluator), an"
                         " in-process one an in-process evaluator: make them agree")
    if not isinstance(evaluator, LockedEvaluator):
        evaluator = LockedEvaluator(evaluator, fp)
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
                              deadline=monotonic_s() + spec.timeout_s if spec.timeout_s else None)
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
    return TuneOutcome(summary=summary, search=sp, study=study, spec=spec)


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

    end = min(deadline or float("inf"), monotonic_s() + cap_s)
    while monotonic_s() < end:
        sweep_stale(study)
        if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            return
        SYSTEM_CLOCK.sleep(poll_s)
