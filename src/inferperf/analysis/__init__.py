"""Analysis over Result documents only: scaling fits, knees, findings (pure functions)."""

from .findings import Finding, findings
from .scaling import Fit, degradation_point, fit_amdahl, fit_usl, knee, size_fit, speedups, sweet_spot

__all__ = [
    "Finding",
    "Fit",
    "degradation_point",
    "findings",
    "fit_amdahl",
    "fit_usl",
    "knee",
    "size_fit",
    "speedups",
    "sweet_spot",
]
