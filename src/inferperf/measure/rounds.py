"""Interleaved, shuffled rounds: the one schedule every multi-case, multi-run command follows.

Round ``r`` runs every case once, in an order shuffled by ``random.Random(seed)``,
so machine drift spreads over all cases instead of biasing the last ones. The
order of round ``r`` depends only on ``seed`` and ``r``, so a resumed sweep
replays the same schedule and skips the pairs it already has.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Slot:
    """One (round, case) pair of the schedule.

    Attributes:
        round: round index, from 0.
        case: index of the case in the caller's list.
        order: the case order of this round.
        seed: the shuffle seed.
    """

    round: int
    case: int
    order: tuple[int, ...]
    seed: int

    def marks(self) -> dict[str, Any]:
        """What a run records about its place in the schedule: ``round``, ``round_order``, ``shuffle_seed``."""
        return {"round": self.round, "round_order": list(self.order), "shuffle_seed": self.seed}


def shuffled_rounds(n_cases: int, repeat: int, seed: int = 0) -> Iterator[Slot]:
    """Yield ``repeat`` rounds of ``n_cases`` slots, each round in a shuffled order.

    Args:
        n_cases: cases per round.
        repeat: rounds.
        seed: seed of ``random.Random`` (record it with the results).
    """
    rng = random.Random(seed)
    for r in range(repeat):
        order = list(range(n_cases))
        rng.shuffle(order)
        for i in order:
            yield Slot(round=r, case=i, order=tuple(order), seed=seed)
