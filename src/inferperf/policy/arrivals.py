"""Arrival schedules: when each request of an open-loop run is *meant* to be sent.

A schedule is a pure, seeded iterator of send offsets in integer nanoseconds
from time zero (set by the caller, e.g. after its connections are open).
Latency measured from these offsets, not from the actual send, is free of
coordinated omission (Gil Tene, "How NOT to measure latency"; wrk2; MLPerf
LoadGen's Server scenario). Shared by ``loadgen`` (open loop), ``pipeline`` and the serving simulator's fleet
search (``analysis.fleet``): a policy module, so the simulator draws the arrivals the load generator sends.

- :func:`constant`: request ``i`` at ``i / rate`` s (the first at 0).
- :func:`poisson`: exponential gaps of mean ``1 / rate`` s from a seeded numpy
  generator (the first after one gap), as MLPerf LoadGen's Server scenario.
- :func:`mmpp`: bursty arrivals, a two-state Markov-modulated Poisson process (Fischer and Meier-Hellstern
  1993): Poisson at ``rate_high`` for exponential spells of mean ``mean_high_s``, then at ``rate_low`` for
  spells of mean ``mean_low_s``, and so on (seeded; starts in the low state). The spells and the arrivals within
  them draw from two streams of the seed, so schedules of one seed at different rates share their spells (common
  random numbers: a planner comparing fleet sizes compares the same bursts).
- :func:`bursty`: the MMPP of ``--arrival mmpp`` (1 s spells at 2/3 and 4/3 of a mean rate), one definition for
  the planner's simulator and the load generator that validates it.
- :func:`trace`: recorded offsets replayed exactly, ``speed`` times faster (files: :mod:`inferperf.measure.arrivals`).
- :func:`strided`: worker ``k`` of ``n`` takes offsets ``k, k+n, k+2n, ...`` of one
  schedule, so ``n`` processes together send exactly the global schedule.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..errors import UsageError

_CHUNK = 4096


class Schedule(Protocol):
    """An arrival schedule: ``next_offset_ns()`` gives the next send offset (int ns, non-decreasing)
    or ``None`` once a finite schedule (a trace) has ended; ``describe()`` is a JSON-able dict for the Result."""

    def next_offset_ns(self) -> int | None:  # pragma: no cover - protocol
        """The next send offset in ns from time zero, or None when the schedule has ended."""
        ...

    def describe(self) -> dict[str, Any]:  # pragma: no cover - protocol
        """What this schedule is (kind, rate, seed, ...), recorded in the Result."""
        ...


def _check_rate(rate_per_s: float) -> float:
    rate = float(rate_per_s)
    if not rate > 0 or not np.isfinite(rate):
        raise UsageError(f"request rate {rate_per_s!r}: must be a positive number of requests per second")
    return rate


class _Constant:
    def __init__(self, rate_per_s: float) -> None:
        self.rate = _check_rate(rate_per_s)
        self._i = 0

    def next_offset_ns(self) -> int:
        t = round(self._i * 1e9 / self.rate)
        self._i += 1
        return t

    def describe(self) -> dict[str, Any]:
        return {"arrival": "constant", "rate_per_s": self.rate}


class _Poisson:
    def __init__(self, rate_per_s: float, seed: int) -> None:
        self.rate = _check_rate(rate_per_s)
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)
        self._t = 0.0  # running sum in ns, float64: exact to well under 1 ns for runs of days
        self._buf: list[int] = []

    def next_offset_ns(self) -> int:
        if not self._buf:
            gaps = self._rng.exponential(1e9 / self.rate, _CHUNK)
            cum = self._t + np.cumsum(gaps)
            self._t = float(cum[-1])
            self._buf = np.round(cum).astype(np.int64).tolist()[::-1]
        return self._buf.pop()

    def describe(self) -> dict[str, Any]:
        return {"arrival": "poisson", "rate_per_s": self.rate, "seed": self.seed}


class _MMPP:
    def __init__(self, rate_low: float, rate_high: float, mean_low_s: float, mean_high_s: float, seed: int) -> None:
        if not (rate_low >= 0 and rate_high > 0 and mean_low_s > 0 and mean_high_s > 0):
            raise UsageError(f"mmpp rates {rate_low}/{rate_high} per s, spells {mean_low_s}/{mean_high_s} s: "
                             "need rates >= 0 (high > 0) and spells > 0")
        self.rates = (float(rate_low), float(rate_high))
        self.means_s = (float(mean_low_s), float(mean_high_s))
        self.seed = int(seed)
        spells, points = np.random.SeedSequence(self.seed).spawn(2)
        self._spells = np.random.default_rng(spells)
        self._rng = np.random.default_rng(points)
        self._t_s = 0.0
        self._state = 0
        self._buf: list[int] = []

    @property
    def rate(self) -> float:
        """Long-run mean rate (per s): the spell-weighted mean of the two rates."""
        (r0, r1), (m0, m1) = self.rates, self.means_s
        return (r0 * m0 + r1 * m1) / (m0 + m1)

    def next_offset_ns(self) -> int:
        while not self._buf:  # one spell at a time: Poisson count, uniform positions (order statistics)
            dur = self._spells.exponential(self.means_s[self._state])
            k = self._rng.poisson(self.rates[self._state] * dur)
            pts = self._t_s + np.sort(self._rng.uniform(0.0, dur, k))
            self._buf = np.round(pts * 1e9).astype(np.int64).tolist()[::-1]
            self._t_s += dur
            self._state = 1 - self._state
        return self._buf.pop()

    def describe(self) -> dict[str, Any]:
        return {"arrival": "mmpp", "rate_per_s": self.rate, "rate_low_per_s": self.rates[0],
                "rate_high_per_s": self.rates[1], "mean_low_s": self.means_s[0], "mean_high_s": self.means_s[1],
                "seed": self.seed}


class _Trace:
    def __init__(self, offsets_ns: Any, speed: float, source: str | None) -> None:
        if not speed > 0:
            raise UsageError(f"--trace-speed {speed}: must be > 0 (2 replays twice as fast)")
        arr = np.asarray(offsets_ns, dtype=np.int64)
        validate_offsets(arr, source or "trace")
        self.speed = float(speed)
        self.source = source
        self._offsets = np.round(arr / self.speed).astype(np.int64).tolist() if self.speed != 1 else arr.tolist()
        self._i = 0

    def next_offset_ns(self) -> int | None:
        if self._i >= len(self._offsets):
            return None
        t = self._offsets[self._i]
        self._i += 1
        return int(t)

    def describe(self) -> dict[str, Any]:
        n = len(self._offsets)
        span_s = (self._offsets[-1] - self._offsets[0]) / 1e9 if n > 1 else 0.0
        return {"arrival": "trace", "trace": self.source, "speed": self.speed, "requests": n,
                "rate_per_s": (n - 1) / span_s if span_s > 0 else None}  # fmt: skip


class _Strided:
    def __init__(self, inner: Schedule, k: int, n: int) -> None:
        if not 0 <= k < n:
            raise ValueError(f"worker {k} of {n}: need 0 <= k < n")
        self.inner, self.k, self.n = inner, k, n
        self._skipped = False

    def next_offset_ns(self) -> int | None:
        skip = self.k if not self._skipped else self.n - 1
        self._skipped = True
        for _ in range(skip):
            if self.inner.next_offset_ns() is None:
                return None
        return self.inner.next_offset_ns()

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "worker": self.k, "workers": self.n}


def constant(rate_per_s: float) -> Schedule:
    """Evenly spaced sends: request ``i`` at ``round(i * 1e9 / rate_per_s)`` ns.

    Raises:
        UsageError: a rate that is not a positive finite number.
    """
    return _Constant(rate_per_s)


def poisson(rate_per_s: float, seed: int = 0) -> Schedule:
    """Poisson arrivals: exponential gaps of mean ``1e9 / rate_per_s`` ns, seeded (``numpy.random.default_rng``).

    Raises:
        UsageError: a rate that is not a positive finite number.
    """
    return _Poisson(rate_per_s, seed)


def mmpp(rate_low_per_s: float, rate_high_per_s: float, mean_low_s: float, mean_high_s: float,
         seed: int = 0) -> Schedule:
    """Bursty arrivals: a two-state Markov-modulated Poisson process, seeded (see the module docstring).

    Args:
        rate_low_per_s, rate_high_per_s: Poisson rate in each state (per s; low may be 0).
        mean_low_s, mean_high_s: mean spell in each state (s, exponential).

    Raises:
        UsageError: a negative rate, a high rate of 0 or a spell <= 0.
    """
    return _MMPP(rate_low_per_s, rate_high_per_s, mean_low_s, mean_high_s, seed)


#: ``--arrival mmpp``'s spells (s, mean of each state) and rates (fractions of the mean rate, low then high)
BURSTY_SPELL_S = 1.0
BURSTY_RATES = (2 / 3, 4 / 3)


def bursty(rate_per_s: float, seed: int = 0) -> Schedule:
    """``--arrival mmpp``: :func:`mmpp` at :data:`BURSTY_RATES` x ``rate_per_s`` in spells of mean
    :data:`BURSTY_SPELL_S` each (so the long-run rate is ``rate_per_s``), seeded.

    Raises:
        UsageError: a rate that is not a positive finite number.
    """
    rate = _check_rate(rate_per_s)
    return mmpp(rate * BURSTY_RATES[0], rate * BURSTY_RATES[1], BURSTY_SPELL_S, BURSTY_SPELL_S, seed)


def trace(offsets_ns: Any, speed: float = 1.0, source: str | None = None) -> Schedule:
    """Replay recorded send offsets (int ns, non-negative, non-decreasing), divided by ``speed``.

    Raises:
        UsageError: empty, negative or unsorted offsets, or ``speed`` <= 0.
    """
    return _Trace(offsets_ns, speed, source)


def strided(schedule: Schedule, k: int, n: int) -> Schedule:
    """Worker ``k``'s share (0-based) of ``schedule`` split over ``n`` workers: offsets ``k, k+n, ...``."""
    return schedule if n == 1 else _Strided(schedule, k, n)


def validate_offsets(arr: np.ndarray, source: str) -> None:
    """Raises UsageError (naming ``source`` and the offset) unless ``arr`` is a non-empty 1-D, non-negative,
    non-decreasing array of offsets."""
    if arr.ndim != 1 or arr.size == 0:
        raise UsageError(f"{source}: a trace needs at least one send offset (one per line)")
    neg = np.flatnonzero(arr < 0)
    if neg.size:
        raise UsageError(f"{source}: offset {int(neg[0]) + 1} is negative: send offsets count from 0")
    back = np.flatnonzero(np.diff(arr) < 0)
    if back.size:
        raise UsageError(f"{source}: offset {int(back[0]) + 2} goes back in time: sort the offsets ascending")


__all__ = ["BURSTY_RATES", "BURSTY_SPELL_S", "Schedule", "bursty", "constant", "mmpp", "poisson", "strided", "trace",
           "validate_offsets"]
