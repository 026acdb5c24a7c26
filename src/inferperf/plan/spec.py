"""What ``inferperf plan`` is asked to do, as one validated spec: the fleet question (:class:`PlanOptions`), where
the service times come from (``--from`` Results and/or a ``--measure`` ladder), whether to validate, and the gate.

The spec refuses contradictions itself (:meth:`PlanSpec.check`), so :func:`run_spec` (the library call behind the
command) gets the same checks as the CLI; the CLI only maps its flags onto it and renders.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.fleet import PlanOptions
from ..config import BenchConfig
from ..errors import UsageError
from .run import PlanOutcome, plan
from .validations import misses_text


@dataclass
class LadderSpec:
    """``--measure``: batch sizes x instance counts, ``duration_s`` (s) a run, ``rounds`` interleaved rounds, every
    run from ``base`` (backend, shapes, dims). Measured on this process's CPUs, or, with ``--validate`` or
    ``--calibrate``, pinned to the server's share of them (the CPUs the replica is then served on)."""

    batch_sizes: list[int]
    instances: list[int]
    duration_s: float = 3.0
    rounds: int = 3
    base: BenchConfig = field(default_factory=BenchConfig)

    def check(self) -> None:
        """Raises UsageError naming the flag."""
        from .ladder import ladder_configs

        ladder_configs(self.batch_sizes, self.instances, 1, self.duration_s, rounds=self.rounds)  # its own checks

    def doc(self, pinned: bool) -> dict:
        """The ``measure_ladder`` document :func:`.run.plan` takes; ``pinned``: on the server's share of the CPUs."""
        from ..serve.child import split_cpus
        from ..system import collect_system

        pin = split_cpus(sorted(os.sched_getaffinity(0)))[1] if pinned else None
        cpus = len(pin) if pin else collect_system().effective_cpus
        return {"batch_sizes": self.batch_sizes, "instances": self.instances, "cpus": cpus, "rounds": self.rounds,
                "duration_s": self.duration_s, "base": self.base, "pin": pin}


@dataclass
class ValidateSpec:
    """``--validate``: ``rounds`` rounds of ``step_s`` measured seconds a load."""

    rounds: int = 3
    step_s: float = 5.0

    def check(self) -> None:
        """Raises UsageError naming the flags."""
        if self.rounds < 1 or not self.step_s > 0:
            raise UsageError("--validate-rounds must be >= 1 and --validate-step-s > 0 (e.g. --validate-rounds 3 "
                             "--validate-step-s 5)")


@dataclass
class PlanSpec:
    """One plan to make (see the module docstring). ``from_paths`` empty and no ``ladder``: the ladder is measured
    (:meth:`check` fills the default). ``shapes``: ``--shape`` (the workload to plan among ``--from``'s).
    ``calibrate_step_s``: ``--calibrate``'s seconds a load (None: no calibration)."""

    model: str
    opts: PlanOptions
    out_dir: Path | None = None
    from_paths: list[str] = field(default_factory=list)
    ladder: LadderSpec | None = None
    validate: ValidateSpec | None = None
    shapes: dict[str, list[int]] | None = None
    fail_on_invalid: bool = False
    calibrate_step_s: float | None = None

    def check(self) -> PlanSpec:
        """Refuse what cannot be planned; returns self with the defaults filled (an output folder, a ladder when
        nothing is given to plan from).

        Raises:
            UsageError: a bad rate, SLO or simulation setting (:meth:`PlanOptions.check`), a bad ladder or
                validation setting, an output path that is a file.
        """
        self.opts.check()
        if self.ladder is None and not self.from_paths:
            self.ladder = LadderSpec([1, 2, 4, 8], [1, 2])  # nothing measured given: measure what the plan needs
        if self.ladder is not None:
            self.ladder.check()
        if self.validate is not None:
            self.validate.check()
        if self.calibrate_step_s is not None and not self.calibrate_step_s > 0:
            raise UsageError(f"--calibrate-step-s {self.calibrate_step_s!r}: must be > 0 seconds (e.g. 5)")
        self.out_dir = self.out_dir or Path(f"inferperf-plan-{Path(self.model.removeprefix('zoo:')).stem}")
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise UsageError(f"--output {self.out_dir}: a file of that name exists; plan writes a folder: pass a new "
                             "folder name")
        return self


def gate_message(spec: PlanSpec, outcome: PlanOutcome) -> str | None:
    """Why the command exits 3, or None: no option meets the SLO, the validation found the prediction wrong, or
    (``fail_on_invalid``) the plan is INVALID."""
    where = f"(the plan is in {outcome.files['result']})"
    doc = outcome.result.metrics.plan or {}
    if outcome.chosen is None:
        return (f"no option meets p99 <= {spec.opts.slo_p99_ms:g} ms at {spec.opts.planned_rate_per_s:g} req/s "
                f"{where}")
    if outcome.validation_wrong:
        return f"validation found the prediction wrong: {misses_text(doc['validation_points']['summary'])} {where}"
    if spec.fail_on_invalid and not outcome.result.validity.valid:
        return f"the plan is INVALID (--fail-on-invalid): {'; '.join(outcome.result.validity.reasons)} {where}"
    return None


def run_spec(spec: PlanSpec, command: list[str] | None = None,
             progress: Callable[[str], None] | None = None) -> PlanOutcome:
    """Check ``spec`` and make its plan (:func:`.run.plan`).

    Raises:
        UsageError: as :meth:`PlanSpec.check` and :func:`.run.plan`.
    """
    spec.check()
    assert spec.out_dir is not None
    served = spec.validate is not None or spec.calibrate_step_s is not None  # a replica served beside its load
    ladder = spec.ladder.doc(pinned=served) if spec.ladder is not None else None
    validate = {"rounds": spec.validate.rounds, "step_s": spec.validate.step_s} if spec.validate else None
    calibrate = {"step_s": spec.calibrate_step_s} if spec.calibrate_step_s is not None else None
    return plan(spec.model, spec.opts, spec.out_dir, spec.from_paths, ladder, command=command, progress=progress,
                validate=validate, shapes=spec.shapes, calibrate=calibrate)


__all__ = ["LadderSpec", "PlanSpec", "ValidateSpec", "gate_message", "run_spec"]
