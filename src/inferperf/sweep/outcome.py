"""What a sweep produced (:class:`SweepOutcome`): the run loop (:mod:`.run`) fills it, the outputs (:mod:`.output`)
write it; its own module so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..analysis.findings import Finding
from ..results.model import Result
from .space import Case


@dataclass
class SweepOutcome:
    """What a sweep produced: pooled Results per case (keyed by the case's index), failures, findings."""

    cases: list[Case]
    results: dict[int, Result] = field(default_factory=dict)
    failures: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    skipped_runs: int = 0
    measured_runs: int = 0


__all__ = ["SweepOutcome"]
