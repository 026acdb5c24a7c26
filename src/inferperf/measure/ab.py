"""``bench --ab BASE CURRENT``: two models in balanced, alternating rounds (ABBA BAAB ...), each run a fresh process.

Machines drift within minutes: measuring the base first and the change second measures the drift.
Round ``r`` runs A then B when ``r`` is even and B then A when it is odd, so over an even number of
rounds each side holds every position equally often. Runs use the worker runner of
:mod:`inferperf.measure.runner` and record their slot like :mod:`inferperf.measure.rounds`' schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ..config import BenchConfig
from ..errors import UsageError
from ..results.model import Result
from .rounds import Slot
from .runner import aggregate, run_in_worker

SIDES = ("base", "current")


def abba_slots(rounds: int) -> Iterator[Slot]:
    """``rounds`` rounds of two slots: (A, B) in even rounds, (B, A) in odd ones (case 0 = A = base)."""
    for r in range(rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for i in order:
            yield Slot(round=r, case=i, order=order, seed=0)


def run_ab(base_model: str | Path, current_model: str | Path, cfg: BenchConfig, rounds: int,
           command: list[str] | None = None,
           on_result: Callable[[str, int, Result], None] | None = None) -> tuple[Result, Result]:
    """Measure both models in ABBA rounds and pool each side's runs.

    Args:
        rounds: rounds (even, >= 2); each side gets this many runs.
        on_result: called as ``on_result(side, round, result)`` after each run ("base" or "current").

    Returns:
        (base Result, current Result), each pooled by :func:`inferperf.measure.runner.aggregate`.

    Raises:
        UsageError: an odd or too small ``rounds``; the first run's own error otherwise.
    """
    if rounds < 2 or rounds % 2:
        raise UsageError(f"--ab needs an even --repeat >= 2 for balanced ABBA rounds, got {rounds}: use e.g. 4")
    from ..backends import check_available
    from ..zoo import with_default_shapes

    models = (str(base_model), str(current_model))
    cfgs = [with_default_shapes(m, cfg.model_copy(update={"repeat": 1})) for m in models]
    for m, c in zip(models, cfgs):
        check_available([c.backend], m)
    runs: tuple[list[Result], list[Result]] = ([], [])
    for slot in abba_slots(rounds):
        res = run_in_worker(models[slot.case], cfgs[slot.case], repeat_index=slot.round, command=command)
        res.run.update(slot.marks())
        res.run.update({"schedule": "ABBA", "ab_side": SIDES[slot.case]})
        runs[slot.case].append(res)
        if on_result:
            on_result(SIDES[slot.case], slot.round, res)
    return (aggregate(runs[0], cfgs[0].model_copy(update={"repeat": rounds})),
            aggregate(runs[1], cfgs[1].model_copy(update={"repeat": rounds})))
