"""What ``inferperf sweep`` is asked to do, as one validated spec: the models (or a matrix file), the axes and
settings laid over the matrix's, the rounds, the output folder.

:meth:`SweepSpec.check` refuses contradictions and expands the matrix itself, so :func:`run_spec` (the library
call behind the command) gets the same one-line refusals as the CLI; the command only maps its flags onto the
spec and renders.
"""

from __future__ import annotations

import copy
import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import UsageError, settings_message
from ..results.model import Result, SystemInfo
from .outcome import SweepOutcome
from .space import Axes, Case, Matrix, ModelEntry, expand, load_matrix, preflight

#: the sweep's own default minimum measured seconds per run (bench's is 5 s)
MIN_DURATION_S = 2.0


@dataclass
class SweepSpec:
    """One sweep to run.

    Attributes:
        models: ONNX files or ``zoo:NAME`` (one matrix entry each); ignored when ``matrix`` is given.
        matrix: a YAML matrix file (format: ``docs/sweep-matrix.md``).
        shapes, dims: shape sets (input -> shape) and dim sets (symbol -> size) for the entries without their own.
        axes: axis -> values under :class:`~inferperf.sweep.space.Axes`' names, laid over the matrix's (None: not
            given). settings: dotted BenchConfig setting -> value (``stop.min_duration_s``), laid over the
            matrix's settings (None: not given); every run's minimum duration defaults to :data:`MIN_DURATION_S`.
        repeat: rounds (None: the matrix's); each case once per round, shuffled with ``seed``.
        beyond_effective: the default thread ladder also tries 2x the effective CPUs.
        output: results folder (None: ``./inferperf-sweep-TIMESTAMP``, set by :meth:`check`).
        resume: continue the sweep in ``output``, skipping finished runs.
        cases, warnings, rounds: filled by :meth:`check` (the expanded matrix, its collapse notes, the rounds).
    """

    models: list[str] | None = None
    matrix: Path | None = None
    shapes: list[dict[str, list[int]]] = field(default_factory=list)
    dims: list[dict[str, int]] = field(default_factory=list)
    axes: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    repeat: int | None = None
    seed: int = 0
    beyond_effective: bool = False
    output: Path | None = None
    resume: bool = False
    cases: list[Case] = field(default_factory=list, init=False)
    warnings: list[str] = field(default_factory=list, init=False)
    rounds: int = field(default=1, init=False)

    def check(self, info: SystemInfo | None = None) -> SweepSpec:
        """Refuse what cannot be swept and expand the matrix on ``info`` (default: this machine); returns self
        with ``cases``, ``warnings``, ``rounds`` and ``output`` filled. Reads every model once (no runtime loaded).

        Raises:
            UsageError: ``resume`` without ``output``; neither models nor a matrix; a bad matrix file, axis or
                setting; a matrix that expands to no case; a missing model, unknown backend or bad shape
                (:func:`~inferperf.sweep.space.preflight`); an output that is a file; resuming another sweep.
            ModelError: a model file that is not a readable ONNX model.
        """
        from ..system import collect_system

        if self.resume and self.output is None:
            raise UsageError("--resume needs --output DIR: the folder of the sweep to continue")
        m = self._matrix()
        self.rounds = self.repeat if self.repeat is not None else m.repeat
        self.cases, self.warnings = expand(m, info or collect_system(), self.beyond_effective)
        if not self.cases:
            raise UsageError("the matrix expands to no case: list at least one model")
        preflight(self.cases)
        if self.output is not None and self.output.exists() and not self.output.is_dir():
            raise UsageError(f"--output '{self.output}' is a file: give a folder for the sweep's results")
        if self.resume and self.output is not None and (self.output / "index.json").exists():
            from .run import check_resumable

            check_resumable(self.cases, self.output)
        self.output = self.output or Path(f"inferperf-sweep-{_dt.datetime.now(_dt.UTC):%Y%m%dT%H%M%S}")
        return self

    def _matrix(self) -> Matrix:
        """The matrix file (or one entry per model) with the shapes, dims, axes and settings laid over it."""
        if self.matrix is not None:
            m = load_matrix(self.matrix)
        elif self.models is not None:
            m = Matrix(models=[ModelEntry(path=p) for p in self.models])
        else:
            raise UsageError("give a MODEL (or several, comma-separated) or --matrix FILE.yaml")
        for entry in m.models:
            entry.shapes = entry.shapes or self.shapes
            entry.dims = entry.dims or self.dims
        try:
            m.axes = Axes.model_validate({**m.axes.model_dump(), **{k: v for k, v in self.axes.items() if v is not None}})
        except ValidationError as e:
            raise UsageError(settings_message(e)) from None
        m.settings = overlay_settings(m.settings, self.settings)
        return m


def overlay_settings(base: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """``base`` (a matrix's settings, BenchConfig's nested keys) with ``flags`` (dotted setting -> value; None:
    not given) laid over it, flags winning; the minimum duration defaults to :data:`MIN_DURATION_S`. ``base`` is
    not changed.

    >>> overlay_settings({"stop": {"min_iterations": 5}}, {"warmup.iterations": 2, "stop.max_duration_s": None})
    {'stop': {'min_iterations': 5, 'min_duration_s': 2.0}, 'placement': {}, 'warmup': {'iterations': 2}}
    """
    settings = copy.deepcopy(base)
    settings.setdefault("stop", {}).setdefault("min_duration_s", MIN_DURATION_S)
    settings.setdefault("placement", {})
    for dotted, value in flags.items():
        if value is None:
            continue
        *parents, leaf = dotted.split(".")
        node = settings
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return settings


def run_spec(spec: SweepSpec, command: list[str] | None = None,
             on_run: Callable[[Case, int, Result | None, str | None], None] | None = None) -> SweepOutcome:
    """Check ``spec`` (unless :meth:`SweepSpec.check` has expanded it already) and measure every case
    ``spec.rounds`` times in shuffled rounds, each run in a fresh worker (:func:`~inferperf.sweep.run.run_sweep`).

    Args:
        command: the argv recorded in each Result. on_run: progress, as :func:`~inferperf.sweep.run.run_sweep`
            takes (``on_run(case, round, result_or_None, error_or_None)``).

    Raises:
        UsageError: as :meth:`SweepSpec.check`; fewer than one round; ``spec.output`` holding another sweep.
        Interrupted: Ctrl-C or SIGTERM (every finished run is kept in ``spec.output``).
    """
    from ..errors import Interrupted
    from ..interrupt import STOP
    from .run import run_sweep

    if not spec.cases:
        spec.check()
    assert spec.output is not None
    if spec.rounds < 1:
        raise UsageError("--repeat must be >= 1")
    try:
        return run_sweep(spec.cases, spec.output, spec.rounds, spec.seed, spec.resume, command, on_run)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted by {STOP.signal_name}: finished runs are kept in {spec.output}; rerun with"
                          " --resume to continue", STOP.exit_code) from None


def failure_message(spec: SweepSpec, outcome: SweepOutcome) -> str | None:
    """Why the sweep failed (exit 1), or None: every case failed, so nothing was measured."""
    if outcome.failures and not outcome.results:
        first = next(iter(outcome.failures.values()))[0]
        return f"every case failed (first: {first['message']}); results in {spec.output}"
    return None


__all__ = ["MIN_DURATION_S", "SweepSpec", "failure_message", "overlay_settings", "run_spec"]
