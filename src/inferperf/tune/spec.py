"""What ``inferperf tune`` is asked to do, as one validated request: :class:`TuneRequest` holds the command's
flags as data (raw axes, a space file, variants to load or build, the goal's figures) and resolves itself on this
machine into the :class:`~inferperf.tune.run.TuneSpec` (space, goal, trial plan, budget) that
:func:`~inferperf.tune.run.tune` searches.

:meth:`TuneRequest.check` refuses contradictions itself (with TuneSpec's and Goal's own lines), so
:func:`run_tune` (the library call behind the command) gets the same one-line refusals as the CLI; the command
only maps its flags onto a request and renders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..config import BenchConfig
from ..errors import GateFailed, InferperfError, MeasurementError, UsageError, settings_message
from ..results.model import SystemInfo
from .objective import Goal, samples_for_percentile
from .run import TuneOutcome, TuneSpec, tune
from .space import TuneSpace
from .trial import Evaluator, TrialPlan


@dataclass
class TuneRequest:
    """One tune as the command is asked for it, before the space is resolved on this machine.

    Attributes:
        model: ONNX file or ``zoo:NAME``. base: the BenchConfig every trial starts from (settings file < flags).
        axes: axis -> values under :class:`TuneSpace`'s names (an empty or None value: not given).
        space_file: a YAML space whose axes the ``axes`` overlay. No axis at all: the machine's default space.
        max_oversubscription: prune streams x threads above this many per effective CPU (None: the space's).
        served: tune the served model (``--serve``). variants_dir: an ``inferperf optimize -o DIR`` folder whose
        variants become the precision axis; build_variants: variants to build first into ``OUTPUT/variants``
        (not with ``variants_dir``); precision: the precision axis (default: every variant that passed).
        objective, slo_p99_ms (ms), min_throughput (samples/s), multi_objective: the :class:`Goal`.
        min_samples: samples per trial (None: 459 with a p99 goal, else 100); trial_duration_s: minimum measured
        seconds per trial. output: the results folder (None: ``./inferperf-tune-MODEL``).
        options: :class:`TuneSpec`'s own fields, passed through and checked by it: ``n_trials`` (required),
        ``sampler``, ``seed``, ``storage``, ``study_name``, ``timeout_s``, ``validate``, ``validate_top``,
        ``validation_rounds``, ``from_sweep``, ``serve_base``.
    """

    model: str
    base: BenchConfig = field(default_factory=BenchConfig)
    axes: dict[str, Any] = field(default_factory=dict)
    space_file: Path | None = None
    max_oversubscription: float | None = None
    served: bool = False
    variants_dir: Path | None = None
    build_variants: list[str] | None = None
    precision: list[str] | None = None
    objective: str = "throughput"
    slo_p99_ms: float | None = None
    min_throughput: float | None = None
    multi_objective: bool = False
    min_samples: int | None = None
    trial_duration_s: float = 4.0
    output: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        """The results folder: ``output``, or ``./inferperf-tune-MODEL``."""
        return self.output or Path(f"inferperf-tune-{Path(self.model.removeprefix('zoo:')).stem}")

    def check(self, info: SystemInfo | None = None, variants: dict[str, str] | None = None) -> TuneSpec:
        """Refuse what cannot be tuned; returns the :class:`TuneSpec` it resolves to on this machine.

        Args:
            info: this machine (default: :func:`~inferperf.system.collect_system`).
            variants: precision variant -> model file (default: ``variants_dir``'s, or stand-ins named by
                ``build_variants`` so every other input is checked before the build).

        Raises:
            UsageError: both ``variants_dir`` and ``build_variants``; a bad goal, budget, sampler, output or
                serving/precision axis (:class:`Goal`'s and :class:`TuneSpec`'s refusals, as their one line);
                a bad space file or axis value; a variants folder without variants that passed.
        """
        from ..system import collect_system
        from .space import load_variants

        info = info or collect_system()
        try:
            goal = Goal("multi" if self.multi_objective else self.objective, self.slo_p99_ms,  # type: ignore[arg-type]
                        self.min_throughput, info.effective_cpus)
            if self.build_variants is not None and self.variants_dir is not None:
                raise UsageError("pass --variants DIR (variants already built) or --build-variants LIST, not both")
            p99 = self.slo_p99_ms is not None or self.objective == "p99" or self.multi_objective
            plan = TrialPlan(min_samples=self.min_samples or (samples_for_percentile(99.0) if p99 else 100),
                             duration_s=self.trial_duration_s, max_duration_s=self.base.stop.max_duration_s)
            if variants is None:
                variants = (load_variants(self.variants_dir) if self.variants_dir is not None else
                            {name: self.model for name in ["fp32", *self.build_variants]}
                            if self.build_variants is not None else {})
            axes = {**self.axes, "precision": self.precision or (sorted(variants) if variants else None)}
            space = tune_space(axes, self.space_file, self.served, self.max_oversubscription, info)
            return TuneSpec(model=self.model, base=self.base, space=space, goal=goal, plan=plan, output=self.folder,
                            served=self.served, variants=variants, **self.options)
        except ValidationError as e:  # Goal's and TuneSpec's own line, as the CLI prints it
            raise UsageError(settings_message(e)) from None


def tune_space(axes: dict[str, Any], space_file: Path | None, served: bool, max_oversubscription: float | None,
               info: SystemInfo) -> TuneSpace:
    """The space: the file's axes overlaid with ``axes`` (empty values skipped); the machine's default space
    (:func:`~inferperf.tune.space.default_space`) when no axis is given at all.

    Raises:
        UsageError: a bad space file, an unknown axis, a bad value or an unknown backend (one line naming it).
    """
    from importlib.util import find_spec

    from ..measure.runtimes import backend_names
    from .space import check_values, default_space, load_space, validate_space

    doc: dict[str, Any] = load_space(space_file).model_dump(exclude_none=True) if space_file else {}
    doc.update({k: v for k, v in axes.items() if v})
    if max_oversubscription is not None:
        doc["max_oversubscription"] = max_oversubscription
    if not any(v for k, v in doc.items() if k != "max_oversubscription"):
        installed = ["onnxruntime"] + (["openvino"] if find_spec("openvino") else [])  # found, not imported
        base = default_space(info, installed, serve=served).model_dump(exclude_none=True)
        doc = {**base, **({"max_oversubscription": doc["max_oversubscription"]} if "max_oversubscription" in doc else {})}
    space = validate_space(doc, "--space" if space_file else "the axes")
    check_values(space, [b for b in backend_names() if b != "null"])
    return space


def _build_variants(request: TuneRequest, progress: Callable[[str], None] | None) -> Path:
    """Build ``request.build_variants`` with ``optimize`` (accuracy checked against fp32, no speed measurement)
    into ``OUTPUT/variants``, with the request's shapes; returns that folder."""
    from ..optimize import optimize
    from ..optimize.spec import OptimizeOptions

    folder = request.folder / "variants"
    names = request.build_variants or []
    shapes = dict(request.base.workload.shapes)
    bench = {"workload": {"shapes": shapes}} if shapes else {}
    if progress is not None:
        progress(f"building variants {', '.join(names)} into {folder}/ (accuracy against fp32; no speed measurement)")
    optimize(request.model, OptimizeOptions.model_validate({"variants": names, "measure": False, "bench": bench}),
             output=folder)
    return folder


def run_tune(request: TuneRequest, *, command: list[str] | None = None, info: SystemInfo | None = None,
             evaluator: Evaluator | None = None, on_start: Callable[[TuneSpec], None] | None = None,
             on_trial: Callable[[dict[str, Any]], None] | None = None,
             on_validation: Callable[[str, int, Any, str | None], None] | None = None,
             progress: Callable[[str], None] | None = None) -> TuneOutcome:
    """Check ``request``, build its variants (``build_variants``: every other input is checked first), and tune
    (:func:`~inferperf.tune.run.tune`), each trial in a fresh process (a served one with ``served``).

    Args:
        command: the argv recorded in each Result. evaluator: how a trial is measured (default: an
            :class:`~inferperf.tune.trial.IsolatedEvaluator`, or a served one with ``request.served``).
        on_start: called with the checked spec once every input is checked, before the first trial.
        on_trial, on_validation: progress, as :func:`~inferperf.tune.run.tune` takes.
        progress: one line of text for each step before the search (the variants' build).

    Returns:
        The outcome (``outcome.spec`` the spec it ran); :func:`outcome_error` says whether it failed.

    Raises:
        UsageError: as :meth:`TuneRequest.check` and :func:`~inferperf.tune.run.tune`. Interrupted: Ctrl-C or
            SIGTERM during the search (every finished trial is kept in the study).
    """
    from ..errors import Interrupted
    from ..interrupt import STOP
    from ..system import collect_system
    from .space import load_variants

    info = info or collect_system()
    spec = request.check(info)
    if request.build_variants is not None:  # minutes: after every other input is checked, with stand-in files
        spec = request.check(info, load_variants(_build_variants(request, progress)))
    if evaluator is None:
        from .served import ServedEvaluator
        from .trial import IsolatedEvaluator

        evaluator = ServedEvaluator(command=command) if spec.served else IsolatedEvaluator(command=command)
    try:  # on_start once every input is checked: a bad budget, space, storage or model is the only line
        return tune(spec, evaluator, info=info, on_trial=on_trial, on_validation=on_validation,
                    on_start=(lambda: on_start(spec)) if on_start is not None else None)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted by {STOP.signal_name}: every finished trial is kept in the study"
                          f" ({spec.output}); rerun the same command to continue", STOP.exit_code) from None


def outcome_error(outcome: TuneOutcome) -> InferperfError | None:
    """Why the tune failed, or None: every trial failed to run (MeasurementError, exit 1), or no configuration
    met the goal's constraints (GateFailed, exit 3; the message names the closest)."""
    from ..measure.speedup import sig
    from .output import params_text, trial_rows

    s, spec = outcome.summary, outcome.spec
    assert spec is not None
    if s["best"] is None and s.get("closest") is None and s["this_pass"]["failed"]:
        first = next((r["note"] for r in trial_rows(outcome.study) if r["state"] == "fail"), "")
        return MeasurementError(f"every trial failed (first: {first}); see {spec.output}/trials.csv")
    if s["best"] is None:
        c = s.get("closest")
        near = (f": closest was trial {c['trial']} ({params_text(c['config'])}) with p99 {sig(c['p99_ms'])} ms at"
                f" {sig(c['throughput'])} samples/s") if c else ""
        return GateFailed(f"no configuration met {spec.goal.describe().split(' subject to ')[-1]}{near}; relax the SLO"
                          " or widen the space")
    return None


__all__ = ["TuneRequest", "TuneSpec", "outcome_error", "run_tune", "tune_space"]
