"""Analysis over Result documents only: scaling fits, knees, findings (pure functions)."""

from .choose import MIN_RUNS, Choice, choose
from .findings import Finding, findings
from .points import case_label, workload_label
from .scaling import Fit, degradation_point, fit_amdahl, fit_usl, knee, size_fit, speedups, sweet_spot

__all__ = [
    "MIN_RUNS",
    "Choice",
    "Finding",
    "Fit",
    "case_label",
    "choose",
    "degradation_point",
    "findings",
    "fit_amdahl",
    "fit_usl",
    "knee",
    "size_fit",
    "speedups",
    "sweet_spot",
    "workload_label",
]
