"""The search: Optuna asks for a configuration, inferperf measures it (or answers it from the cache), Optuna is told.

One pass of :func:`search` per process; any number of processes may share a study (see
:mod:`inferperf.tune.study` for the budget and stale trials). Per trial:

1. the sampler suggests the parameters (define-by-run, so inter-op threads are asked only in
   parallel mode and session mode only with several streams); parameters that cannot change the
   configuration are dropped (:meth:`TuneSpace.normalize`);
2. an impossible combination (oversubscription) is told PRUNED at no cost, without a ticket;
3. a configuration already measured on this machine (same ``config_key``: model hash + configuration
   + machine fingerprint, :func:`config_key`) is answered from that trial and marked ``cached_from``:
   never measured twice by accident, and no ticket used;
4. a configuration another worker is measuring right now is told PRUNED (no ticket, no second measurement);
   after such an answer (and after every cached one when the whole space fits the budget) one configuration
   nobody has measured or is measuring is enqueued, and the pass ends once there is none left: workers
   sharing a small space do not fill the study with cached and pruned answers while the last ones measure;
5. otherwise a ticket is drawn (:func:`~inferperf.tune.study.claim_ticket`); past the search budget the
   trial is told FAIL with ``over_budget`` (excluded from every output) and the search ends;
6. the trial is measured (:func:`~inferperf.tune.trial.measure_trial`), its pooled Result saved in
   ``DIR/trials/``, its figures kept as user attributes, and Optuna told COMPLETE or PRUNED (a
   configuration that fails to run: FAIL, with the error).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clock import monotonic_s
from ..config import BenchConfig
from ..errors import InferperfError, UsageError
from ..fsutil import atomic_write_json
from ..results.io import save
from ..results.model import SystemInfo
from .objective import Goal
from .records import best_feasible_value, config_key, exploration_seed, measured_trials, set_constraints
from .space import TuneSpace, apply, serve_params
from .study import claim_ticket, heartbeat, sweep_stale
from .trial import Evaluator, TrialPlan, measure_trial

#: user attributes that hold a trial's measured figures (copied to a cached answer)
FIGURE_ATTRS = ("throughput", "queries_per_s", "p50_ms", "p99_ms", "samples", "feasible", "constraint", "result",
                "decided_by", "stages")


@dataclass
class SearchSettings:
    """What one search pass needs besides the study.

    Attributes:
        model: ONNX path or ``zoo:NAME``; model_sha256: its file hash (part of the config key).
        base: the configuration every trial starts from (shapes, stop rule margins, ...).
        serve_base: ServeOptions fields every served trial starts from.
        search_budget: tickets for search measurements (all workers together).
        deadline: :func:`inferperf.clock.monotonic_s` value after which no new trial starts (None = none).
        max_cached: stop after this many cached answers in a row (the sampler keeps proposing measured points).
        explore_after: after this many cached answers in a row, enqueue one feasible configuration nobody has
            measured yet (chosen at random), so a converged sampler does not leave budget and space unused.
        fingerprint: the machine fingerprint (part of the config key).
        variants, variant_sha256: precision -> model file and its hash (the ``precision`` axis).
    """

    model: str
    model_sha256: str
    base: BenchConfig
    space: TuneSpace
    goal: Goal
    plan: TrialPlan
    output: Path
    search_budget: int
    fingerprint: str
    serve_base: dict[str, Any] = field(default_factory=dict)
    variants: dict[str, str] = field(default_factory=dict)
    variant_sha256: dict[str, str] = field(default_factory=dict)
    deadline: float | None = None
    max_cached: int = 25
    explore_after: int = 5
    max_infeasible: int = 200

    def model_of(self, params: dict[str, Any]) -> tuple[str, str]:
        """(model file, its hash) of a configuration: its precision variant's, else the tuned model's."""
        p = params.get("precision")
        if p is None or p not in self.variants:
            return self.model, self.model_sha256
        return self.variants[p], self.variant_sha256[p]


@dataclass
class SearchPass:
    """What a pass did: trials it measured, answered from the cache, pruned before measuring, failed; why it ended;
    whether it drew the validation ticket."""

    measured: int = 0
    cached: int = 0
    infeasible: int = 0
    failed: int = 0
    pruned: int = 0
    stop_reason: str = ""
    validator: bool = False


def suggest(trial: Any, space: TuneSpace, base_concurrency: int = 1) -> dict[str, Any]:
    """Ask ``trial`` for every axis of ``space`` in order, skipping those that cannot matter given earlier answers
    (``base_concurrency``: the streams when concurrency is not searched)."""
    from .space import ORT_ONLY

    params: dict[str, Any] = {}
    for name, values in space.axes().items():
        if params.get("backend", "onnxruntime") != "onnxruntime" and (name in ORT_ONLY or name.startswith("session_config:")):
            continue
        if name == "inter_op_num_threads" and params.get("execution_mode", "sequential") != "parallel":
            continue
        if name == "session_mode" and params.get("concurrency", base_concurrency) <= 1:
            continue
        if name == "max_queue_delay_us" and params.get("max_batch_size", 2) <= 1:
            continue
        params[name] = trial.suggest_categorical(name, values)
    return params


def _tell_pruned(study: Any, trial: Any, goal: Goal, state: Any, value: float | None) -> None:
    if value is not None and len(goal.directions) == 1:
        trial.report(value, step=0)
    study.tell(trial, state=state)


def _worst(goal: Goal) -> float:
    return 1e12 if goal.objective == "p99" else 0.0


def search(study: Any, budget_study: Any, s: SearchSettings, evaluator: Evaluator, info: SystemInfo,
           on_trial: Callable[[dict[str, Any]], None] | None = None) -> SearchPass:
    """Run trials until the global search budget, the deadline, or the space is exhausted (see the module docstring).

    Args:
        on_trial: called with a row per finished trial (``number``, ``params``, ``state``, figures, ``note``).

    Returns:
        What this pass did.

    Raises:
        KeyboardInterrupt: after telling the running trial FAIL (every finished trial is kept; a rerun resumes).
    """
    import random

    p = _Pass(study, budget_study, s, evaluator, info, on_trial, out=SearchPass(),
              rng=random.Random(exploration_seed(s.fingerprint, s.search_budget)),
              grid_size=len(s.space.grid(info, s.base.concurrency)))  # fmt: skip
    (s.output / "trials").mkdir(parents=True, exist_ok=True)
    from ..interrupt import deferred

    with deferred() as stop:  # a signal lands in a measurement (interruptible) or waits for the storage write
        while not (reason := p.ended() or p.step()):
            if stop.requested:
                raise KeyboardInterrupt
    p.out.stop_reason = reason
    return p.out


@dataclass
class _Pass:
    """One pass of :func:`search`: its context, what it did (``out``) and its streaks of cached and infeasible
    answers in a row. :meth:`step` runs one trial through the module docstring's steps 1-6."""

    study: Any
    budget_study: Any
    s: SearchSettings
    evaluator: Evaluator
    info: SystemInfo
    on_trial: Callable[[dict[str, Any]], None] | None
    out: SearchPass
    rng: Any
    grid_size: int
    cached_in_a_row: int = 0
    infeasible_in_a_row: int = 0

    @property
    def small(self) -> bool:
        """The budget measures the whole space: never answer a re-proposal twice."""
        return self.grid_size <= self.s.search_budget

    def ended(self) -> str:
        """Why the pass ends before asking for another trial (``""``: it goes on); sweeps stale trials."""
        if self.s.deadline is not None and monotonic_s() >= self.s.deadline:
            return "time budget (--timeout-s) spent"
        sweep_stale(self.study)
        if len({t.user_attrs.get("config_key") for t in measured_trials(self.study)}) >= self.grid_size:
            return f"every one of the {self.grid_size} feasible configurations is measured"
        if not free_configs(self.study, self.s, self.info, waiting_taken=False):
            return (f"every one of the {self.grid_size} feasible configurations is measured or being measured"
                    " by another worker")
        return ""

    def step(self) -> str:
        """Ask for one trial and answer it: pruned (infeasible, or being measured), failed, cached or measured.

        Returns:
            Why the pass ends after it (``""``: it goes on).
        """
        import optuna

        s, trial = self.s, self.study.ask()
        params = TuneSpace.normalize(suggest(trial, s.space, s.base.concurrency), s.base.concurrency)
        trial.set_user_attr("config", params)
        why = s.space.infeasible(params, self.info)
        if why:
            return self._infeasible(trial, params, why)
        self.infeasible_in_a_row = 0
        try:
            cfg = apply(s.base, params)
        except UsageError as e:
            trial.set_user_attr("error", str(e))
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.out.failed += 1
            _emit(self.on_trial, trial.number, params, "failed", {}, str(e))
            return ""
        serve = {**s.serve_base, **serve_params(params)} if self.evaluator.served else {}
        key = config_key(s.model_of(params)[1], cfg, serve, s.fingerprint)
        trial.set_user_attr("config_key", key)
        hit = next((t for t in measured_trials(self.study) if t.user_attrs.get("config_key") == key), None)
        if hit is not None:
            return self._cached(trial, params, hit)
        self.cached_in_a_row = 0
        if self._busy(trial, params, key):
            return ""
        ticket = claim_ticket(self.budget_study)
        if ticket >= s.search_budget:
            trial.set_user_attr("over_budget", True)
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            self.out.validator = ticket == s.search_budget
            return f"search budget of {s.search_budget} measured trials spent"
        trial.set_user_attr("ticket", ticket)
        _measure(self.study, trial, s, self.evaluator, cfg, params, key, self.out, self.on_trial)
        return ""

    def _busy(self, trial: Any, params: dict[str, Any], key: str) -> bool:
        """Another worker measures this configuration right now: tell it PRUNED (no second measurement, no
        ticket) and enqueue a free one. False when none does."""
        import optuna

        busy = next((t.number for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
                     if t.user_attrs.get("config_key") == key and t.number != trial.number), None)
        if busy is None:
            return False
        trial.set_user_attr("pruned_reason", f"being measured by trial {busy}")
        set_constraints(trial, self.s.goal, [0.0] * len(self.s.goal.constraint_names))
        self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        _emit(self.on_trial, trial.number, params, "pruned", {}, f"being measured by trial {busy}")
        _explore(self.study, self.s, self.info, self.rng)
        return True

    def _infeasible(self, trial: Any, params: dict[str, Any], why: str) -> str:
        """Tell an impossible combination PRUNED at no cost (no ticket); on a small space enqueue a feasible one."""
        import optuna

        s = self.s
        trial.set_user_attr("pruned_reason", why)
        set_constraints(trial, s.goal, [math.inf] * len(s.goal.constraint_names))
        _tell_pruned(self.study, trial, s.goal, optuna.trial.TrialState.PRUNED, _worst(s.goal))
        self.out.infeasible += 1
        self.infeasible_in_a_row += 1
        _emit(self.on_trial, trial.number, params, "pruned", {}, why)
        if self.small:  # the space is known and small: the next trial is a feasible one nobody has measured
            _explore(self.study, s, self.info, self.rng)
        if self.infeasible_in_a_row >= s.max_infeasible:
            return f"{s.max_infeasible} infeasible suggestions in a row: widen the space"
        return ""

    def _cached(self, trial: Any, params: dict[str, Any], hit: Any) -> str:
        """Answer a configuration measured before from that trial (its figures, constraints and state)."""
        import optuna

        s = self.s
        for name in FIGURE_ATTRS:
            if name in hit.user_attrs:
                trial.set_user_attr(name, hit.user_attrs[name])
        trial.set_user_attr("cached_from", hit.number)
        set_constraints(trial, s.goal, hit.user_attrs.get("constraint", []))
        if hit.state == optuna.trial.TrialState.COMPLETE:
            self.study.tell(trial, hit.values)
        else:
            trial.set_user_attr("pruned_reason", hit.user_attrs.get("pruned_reason", ""))
            _tell_pruned(self.study, trial, s.goal, optuna.trial.TrialState.PRUNED,
                         hit.intermediate_values.get(0) if hit.intermediate_values else _worst(s.goal))
        self.out.cached += 1
        self.cached_in_a_row += 1
        _emit(self.on_trial, trial.number, params, "cached", hit.user_attrs, f"= trial {hit.number}")
        if self.small or self.cached_in_a_row % s.explore_after == 0:
            _explore(self.study, s, self.info, self.rng)  # none left: the next round of the loop ends the pass
        if self.cached_in_a_row >= s.max_cached:
            return f"{s.max_cached} suggestions in a row were already measured: the search has converged"
        return ""


def free_configs(study: Any, s: SearchSettings, info: SystemInfo, waiting_taken: bool = True) -> list[dict[str, Any]]:
    """The feasible configurations of the space that no trial has measured and none is measuring (RUNNING), nor,
    with ``waiting_taken``, waits for (enqueued, WAITING: the next ``ask`` of some worker returns it), in grid
    order."""
    import optuna

    def key(params: dict[str, Any]) -> str:
        return repr(sorted(params.items()))

    states = (optuna.trial.TrialState.RUNNING,) + ((optuna.trial.TrialState.WAITING,) if waiting_taken else ())
    taken = {key(t.user_attrs["config"]) for t in measured_trials(study) if t.user_attrs.get("config")}
    for t in study.get_trials(deepcopy=False, states=states):
        params = t.user_attrs.get("config") or t.system_attrs.get("fixed_params") or t.params
        if params and "cached_from" not in t.user_attrs:
            taken.add(key(params))
    return [p for p in s.space.grid(info, s.base.concurrency) if key(p) not in taken]


def _explore(study: Any, s: SearchSettings, info: SystemInfo, rng: Any) -> None:
    """Enqueue one feasible configuration nobody has measured, is measuring or waits for (the next ``ask`` returns
    it); nothing when there is none."""
    left = free_configs(study, s, info)
    if left:
        study.enqueue_trial(rng.choice(left), user_attrs={"explored": True})


def _measure(study: Any, trial: Any, s: SearchSettings, evaluator: Evaluator, cfg: BenchConfig,
             params: dict[str, Any], key: str, out: SearchPass, on_trial: Callable | None) -> None:
    """Measure one trial and tell Optuna (FAIL on a configuration that does not run; KeyboardInterrupt re-raised)."""
    import optuna

    from ..interrupt import interruptible

    best = best_feasible_value(study, s.goal)  # reads the storage: outside the interruptible part
    try:
        with heartbeat(study, trial), interruptible():
            m = measure_trial(evaluator, s.model_of(params)[0], cfg, params, s.plan, s.goal,
                              best=best, first_index=trial.number * 10)
    except InferperfError as e:
        trial.set_user_attr("error", str(e)[:500])
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        out.failed += 1
        _emit(on_trial, trial.number, params, "failed", {}, str(e))
        return
    except BaseException:
        try:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        except Exception:  # noqa: BLE001 - the interrupt is the news; a RUNNING trial left is swept as stale
            pass
        raise
    r = m.result
    assert r is not None
    r.kind = "tune"
    r.run.update(tune_trial=trial.number, tune_params=params, config_key=key)
    if evaluator.served:
        r.run["serve_options"] = {**s.serve_base, **serve_params(params)}
    path = save(r, s.output / "trials" / f"{trial.number:04d}-{key}.json")
    fig = s.goal.figures(r)
    attrs = {**fig, "feasible": s.goal.feasible(fig), "constraint": s.goal.constraint(fig), "measured": True,
             "result": str(path.relative_to(s.output)), "decided_by": m.decided_by, "stages": len(m.runs)}
    for name, value in attrs.items():
        trial.set_user_attr(name, value)
    set_constraints(trial, s.goal, attrs["constraint"])
    values = s.goal.values(fig, params)
    if m.pruned:
        trial.set_user_attr("pruned_reason", m.pruned)
        _tell_pruned(study, trial, s.goal, optuna.trial.TrialState.PRUNED, values[0])
        out.pruned += 1
        _emit(on_trial, trial.number, params, "pruned", attrs, m.pruned)
        return
    study.tell(trial, values)
    out.measured += 1
    _emit(on_trial, trial.number, params, "complete", attrs, m.decided_by)


def _emit(on_trial: Callable | None, number: int, params: dict[str, Any], state: str, attrs: dict[str, Any],
          note: str) -> None:
    if on_trial is not None:
        on_trial({"number": number, "params": params, "state": state, "note": note,
                  **{k: attrs.get(k) for k in ("throughput", "p99_ms", "feasible", "samples")}})


def write_json(path: Path, doc: Any) -> None:
    """Pretty strict JSON (NaN and infinities as null: :func:`~inferperf.fsutil.json_safe`), written atomically."""
    atomic_write_json(path, doc)
