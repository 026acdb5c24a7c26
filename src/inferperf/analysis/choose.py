"""Name a winner among cases only when the data can tell them apart.

The rule every "best ..." and "ship X" statement of the report follows:

* INVALID cases are left out (and listed), since their figures did not settle;
* a winner needs >= :data:`MIN_RUNS` runs per candidate: with fewer, the
  interval over runs cannot decide, so the answer is "too few runs (N)";
* the best point estimate wins only when its 95 % interval separates from every
  other candidate's (:func:`inferperf.stats.intervals_separate`); otherwise the
  answer is "within noise", with the candidates whose intervals overlap it.

Candidates must share a workload (:meth:`~.points.Point.workload_key`): the
caller groups. Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from ..stats import intervals_separate

#: Runs per candidate below which no winner is named (the t interval over 2 runs is too wide to decide).
MIN_RUNS = 3

T = TypeVar("T")
Status = Literal["winner", "within noise", "too few runs", "only case", "none valid"]


@dataclass
class Choice(Generic[T]):
    """The outcome of :func:`choose`.

    Attributes:
        status: ``winner`` (intervals separate, enough runs), ``within noise`` (the best's interval overlaps
            ``tied``), ``too few runs`` (some candidate has fewer than ``MIN_RUNS`` runs), ``only case``
            (one valid candidate: nothing to compare), ``none valid`` (every candidate INVALID).
        best: the best point estimate among the valid candidates (None when none is valid). Only a
            ``winner`` (or the ``only case``) may be shipped on this evidence.
        tied: the candidates whose intervals overlap the best's (``within noise``), best first.
        candidates: the valid candidates, best first; invalid: those left out as INVALID.
        min_runs: the fewest runs among the valid candidates.
    """

    status: Status
    best: T | None
    tied: list[T] = field(default_factory=list)
    candidates: list[T] = field(default_factory=list)
    invalid: list[T] = field(default_factory=list)
    min_runs: int = 0

    @property
    def winner(self) -> T | None:
        """The case to name as best: only when the status is ``winner``."""
        return self.best if self.status == "winner" else None


def choose(
    items: Sequence[T],
    value: Callable[[T], float],
    interval: Callable[[T], Sequence[float]],
    runs: Callable[[T], int],
    valid: Callable[[T], bool],
    higher_is_better: bool = True,
    min_runs: int = MIN_RUNS,
) -> Choice[T]:
    """Pick the best of ``items`` by ``value`` and say whether the evidence names it (see the module doc).

    Args:
        items: candidates of one workload.
        value: the figure compared (e.g. samples/s, or p99 ms); interval: its 95 % CI ``[low, high]``
            over runs (empty for one run); runs: runs behind it; valid: the Result's verdict.
        higher_is_better: True for throughput, False for latency.
        min_runs: fewest runs per candidate before a winner may be named.
    """
    ok = [x for x in items if valid(x)]
    bad = [x for x in items if not valid(x)]
    ranked = sorted(ok, key=value, reverse=higher_is_better)
    fewest = min((runs(x) for x in ranked), default=0)
    if not ranked:
        return Choice("none valid", None, invalid=bad)
    best = ranked[0]
    if len(ranked) == 1:
        return Choice("only case", best, candidates=ranked, invalid=bad, min_runs=fewest)
    if fewest < min_runs:
        return Choice("too few runs", best, candidates=ranked, invalid=bad, min_runs=fewest)
    tied = [x for x in ranked[1:] if not intervals_separate(interval(best), interval(x))]
    if tied:
        return Choice("within noise", best, [best, *tied], ranked, bad, fewest)
    return Choice("winner", best, candidates=ranked, invalid=bad, min_runs=fewest)
