"""Capacity planning: how many replicas of which configuration carry a rate under a p99 SLO.

Measured service times (:mod:`.service`) drive the serving simulator (:mod:`inferperf.analysis.serving_sim`,
which batches with the server's own rule) over the options (:mod:`.search`); :func:`plan` writes the plan
Result and the chosen configuration as files ``inferperf serve`` and Triton accept (:mod:`.deploy`).
At tune's level: it may compose serve and load (validation), and imports neither tune nor the CLI.
"""

from .run import NOT_VALIDATED, PlanOutcome, plan
from ..analysis.fleet import Option, PlanOptions

__all__ = ["NOT_VALIDATED", "Option", "PlanOptions", "PlanOutcome", "plan"]
