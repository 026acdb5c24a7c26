"""The stores behind :mod:`inferperf.serve.metrics`: a histogram's bucket counts kept as plain integers (a
``bisect`` and three additions per observation, not prometheus-client's locked objects), and a uniform random
sample of the durations for the Result's percentiles (Vitter's algorithm R: J. S. Vitter, "Random sampling with
a reservoir", ACM TOMS 11(1), 1985; seeded)."""

from __future__ import annotations

import random
from array import array
from bisect import bisect_left
from typing import Any

import numpy as np
from prometheus_client.utils import floatToGoString

from ..stats import latency_summary


class Hist:
    """Bucket counts (``le`` semantics), count and exact integer sum of one labelled histogram."""

    __slots__ = ("bounds", "counts", "total", "count")

    def __init__(self, bounds: list[int]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0
        self.count = 0

    def observe(self, value: int) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def family_args(self, scale: float, edges: tuple) -> tuple[list, float]:
        cum, buckets = 0, []
        for edge, n in zip(edges, self.counts, strict=False):
            cum += n
            buckets.append((floatToGoString(edge), cum))
        buckets.append(("+Inf", self.count))
        return buckets, self.total / scale


#: How the Result's duration summaries are sampled (``metrics.server.sampling.method``).
SAMPLING_METHOD = "reservoir (Vitter's algorithm R)"


class Reservoir:
    """A uniform random sample of at most ``capacity`` of the values seen (Vitter's algorithm R), with the
    exact count, sum, min and max of all of them.

    Algorithm R: the first ``capacity`` values are kept; the n-th after them replaces a kept one, chosen at
    random, with probability ``capacity / n`` (draw j in [0, n); replace slot j when j < capacity), so every
    value seen is kept with the same probability ``capacity / n``. ``seed`` makes the sample reproducible.
    """

    __slots__ = ("capacity", "data", "hi", "lo", "rng", "seen", "total")

    def __init__(self, capacity: int, seed: str) -> None:
        self.capacity = capacity
        self.data = array("q")
        self.rng = random.Random(seed)
        self.seen = 0
        self.total = 0
        self.lo = 0
        self.hi = 0

    def add(self, value: int) -> None:
        """Count ``value`` (ns) and offer it to the sample."""
        n = self.seen = self.seen + 1
        self.total += value
        if n == 1 or value < self.lo:
            self.lo = value
        if n == 1 or value > self.hi:
            self.hi = value
        if n <= self.capacity:
            self.data.append(value)
        else:
            j = self.rng.randrange(n)
            if j < self.capacity:
                self.data[j] = value

    def summary(self) -> dict[str, Any] | None:
        """Latency summary (ms): percentiles and std from the sample; count, mean, min, max exact. None if empty."""
        if not self.seen:
            return None
        out = latency_summary(np.frombuffer(self.data, dtype=np.int64))
        out.update(count=self.seen, mean=self.total / self.seen / 1e6, min=self.lo / 1e6, max=self.hi / 1e6)
        return out


__all__ = ["SAMPLING_METHOD", "Hist", "Reservoir"]
