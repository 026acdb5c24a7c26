"""Service-time models for the serving simulator: how long one model call (or one request's server work) takes.

A model maps ``(rows, u)`` to a time in integer ns, where ``u`` is a uniform draw in [0, 1): the
simulator owns the random stream (:class:`ServiceStream`, one per replica and stage), the model only
turns a uniform into a time, so the event engine and the vectorised recursion of
:mod:`.serving_sim` draw exactly the same times for the same batches.

- :class:`Empirical`: measured raw samples per batch size, resampled (``u`` picks one sorted sample:
  the measured tail is the tail, nothing is fitted). A batch size between two measured ones takes the
  same quantile of both and interpolates linearly in rows; one outside the measured sizes is flagged
  (:attr:`Empirical.outside`) and scaled from the nearest measured size in proportion to rows.
- :class:`Exponential`, :class:`Deterministic`: the closed-form cases (M/M/c, M/D/1) the simulator is
  tested against; a time independent of rows.

Nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from ..errors import UsageError

#: uniforms drawn per refill of a :class:`ServiceStream` (the engine and the recursion use the same chunks)
CHUNK = 4096


class ServiceModel(Protocol):
    """Turns uniforms into service times: ``sample_ns(rows, u)`` -> int64 ns, elementwise."""

    def sample_ns(self, rows: int, u: np.ndarray) -> np.ndarray:  # pragma: no cover - protocol
        """Service times (int64 ns, shape of ``u``) of calls with ``rows`` rows for uniforms ``u`` (float64, [0, 1))."""
        ...

    def describe(self) -> dict[str, Any]:  # pragma: no cover - protocol
        """JSON-able description (kind, sizes measured, sources)."""
        ...


class Exponential:
    """Exponential service times of mean ``mean_ns`` (any rows): ``-mean * ln(1 - u)``."""

    def __init__(self, mean_ns: float) -> None:
        if not mean_ns > 0:
            raise UsageError(f"exponential service mean {mean_ns!r} ns: must be > 0")
        self.mean_ns = float(mean_ns)

    def sample_ns(self, rows: int, u: np.ndarray) -> np.ndarray:
        """``round(-mean_ns * log1p(-u))`` as int64 ns (at least 1)."""
        return np.maximum(1, np.round(-self.mean_ns * np.log1p(-u))).astype(np.int64)

    def describe(self) -> dict[str, Any]:
        """``{"kind": "exponential", "mean_ns": ...}``."""
        return {"kind": "exponential", "mean_ns": self.mean_ns}


class Deterministic:
    """Every call takes ``base_ns + per_row_ns * rows`` (int ns)."""

    def __init__(self, base_ns: int, per_row_ns: int = 0) -> None:
        if base_ns + per_row_ns <= 0:
            raise UsageError(f"deterministic service {base_ns} + {per_row_ns}/row ns: must be > 0")
        self.base_ns, self.per_row_ns = int(base_ns), int(per_row_ns)

    def sample_ns(self, rows: int, u: np.ndarray) -> np.ndarray:
        """``base_ns + per_row_ns * rows`` for every uniform."""
        return np.full(np.shape(u), self.base_ns + self.per_row_ns * rows, dtype=np.int64)

    def mean_ns(self, rows: int) -> float:
        """``base_ns + per_row_ns * rows``: every call's time is its mean."""
        return float(self.base_ns + self.per_row_ns * rows)

    def describe(self) -> dict[str, Any]:
        """``{"kind": "deterministic", ...}``."""
        return {"kind": "deterministic", "base_ns": self.base_ns, "per_row_ns": self.per_row_ns}


class Empirical:
    """Measured service times per batch size (rows -> raw samples in ns), resampled.

    Args:
        samples_ns: rows -> 1-D samples (int or float ns, > 0; at least one per size).
        sources: rows -> where the samples came from (Result paths or case keys), kept for the plan.

    A uniform ``u`` picks ``sorted[floor(u * n)]`` of a measured size: plain resampling of the raw
    samples. Rows between two measured sizes ``a < rows < b``: ``q_a + (q_b - q_a) * (rows - a) / (b - a)``
    at the same ``u``. Rows below the smallest or above the largest measured size: the nearest size's
    sample times ``rows / size`` (rows beyond the measurements cost in proportion: a guess, flagged in
    :attr:`outside`).

    Raises:
        UsageError: no sizes, an empty or non-positive sample set, a size < 1.
    """

    def __init__(self, samples_ns: Mapping[int, Any], sources: Mapping[int, str] | None = None) -> None:
        if not samples_ns:
            raise UsageError("a measured service model needs samples for at least one batch size")
        self._sorted: dict[int, np.ndarray] = {}
        for rows, vals in sorted(samples_ns.items()):
            arr = np.sort(np.asarray(vals, dtype=np.float64).ravel())
            if int(rows) < 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or arr[0] <= 0:
                raise UsageError(f"service samples for batch size {rows}: need rows >= 1 and positive finite times")
            self._sorted[int(rows)] = arr
        self.sizes = tuple(self._sorted)
        self.sources = dict(sources or {})
        self.outside: set[int] = set()  # row counts asked for outside the measured sizes

    def _at(self, size: int, u: np.ndarray) -> np.ndarray:
        arr = self._sorted[size]
        return arr[np.minimum((u * arr.size).astype(np.int64), arr.size - 1)]

    def sample_ns(self, rows: int, u: np.ndarray) -> np.ndarray:
        """Resampled times (int64 ns) for calls of ``rows`` rows; see the class docstring for unmeasured sizes."""
        rows = int(rows)
        if rows in self._sorted:
            val = self._at(rows, u)
        elif self.sizes[0] < rows < self.sizes[-1]:
            i = int(np.searchsorted(self.sizes, rows))
            a, b = self.sizes[i - 1], self.sizes[i]
            qa, qb = self._at(a, u), self._at(b, u)
            val = qa + (qb - qa) * ((rows - a) / (b - a))
        else:
            self.outside.add(rows)
            near = self.sizes[0] if rows < self.sizes[0] else self.sizes[-1]
            val = self._at(near, u) * (rows / near)
        return np.maximum(1, np.round(val)).astype(np.int64)

    def resampled(self, rng: np.random.Generator) -> Empirical:
        """A bootstrap copy: each size's samples drawn with replacement (same counts), for intervals."""
        return Empirical({k: rng.choice(v, size=v.size, replace=True) for k, v in self._sorted.items()}, self.sources)

    def mean_ns(self, rows: int) -> float:
        """Mean service time (ns) at ``rows``, by the same rule as :meth:`sample_ns` (midpoint quantiles)."""
        n = max(a.size for a in self._sorted.values())
        return float(self.sample_ns(rows, (np.arange(n) + 0.5) / n).mean())

    def describe(self) -> dict[str, Any]:
        """Kind, measured sizes with their sample counts and medians (ms), sources, sizes used outside them."""
        return {"kind": "empirical",
                "sizes": {str(k): {"samples": int(v.size), "p50_ms": float(np.median(v)) / 1e6,
                                   "source": self.sources.get(k)} for k, v in self._sorted.items()},
                "outside_measured_sizes": sorted(self.outside)}  # fmt: skip


class ServiceStream:
    """The uniforms of one replica's stage, drawn in chunks of :data:`CHUNK` from a seeded generator,
    and the times they give: the ``k``-th call of :meth:`next_ns` uses the ``k``-th uniform.

    Args:
        model: the :class:`ServiceModel`.
        seed: seed of this stream (see :func:`stream_seed`).

    Times for a row count are computed a chunk at a time (numpy), so ``next_ns`` costs a dict look-up.
    """

    def __init__(self, model: ServiceModel, seed: Any) -> None:
        self.model = model
        self._rng = np.random.default_rng(seed)
        self._u = self._rng.random(CHUNK)
        self._k = 0
        self._cache: dict[int, np.ndarray] = {}

    def _refill_if_spent(self) -> None:
        if self._k == CHUNK:
            self._u = self._rng.random(CHUNK)
            self._k = 0
            self._cache.clear()

    def _values(self, rows: int) -> np.ndarray:
        """This chunk's times for ``rows`` rows (computed once per chunk and row count, for every uniform)."""
        vals = self._cache.get(rows)
        if vals is None:
            vals = self._cache[rows] = self.model.sample_ns(rows, self._u)
        return vals

    def next_ns(self, rows: int) -> int:
        """The next call's time (int ns) for ``rows`` rows."""
        self._refill_if_spent()
        t = int(self._values(rows)[self._k])
        self._k += 1
        return t

    def take_ns(self, rows: np.ndarray) -> np.ndarray:
        """The next ``len(rows)`` calls' times (int64 ns) at once, call ``i`` with ``rows[i]`` rows: exactly the
        values ``len(rows)`` calls of :meth:`next_ns` would give."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(rows.size, dtype=np.int64)
        done = 0
        while done < rows.size:
            self._refill_if_spent()
            n = min(CHUNK - self._k, rows.size - done)
            part = rows[done:done + n]
            idx = np.arange(self._k, self._k + n)
            for r in np.unique(part):
                m = part == r
                out[done:done + n][m] = self._values(int(r))[idx[m]]
            self._k += n
            done += n
        return out


def stream_seed(seed: int, replica: int, stage: int) -> np.random.SeedSequence:
    """The seed of replica ``replica``'s stage ``stage`` (0 = model calls, 1 = server work) for a run seeded ``seed``."""
    return np.random.SeedSequence([int(seed), int(replica), int(stage)])


__all__ = ["CHUNK", "Deterministic", "Empirical", "Exponential", "ServiceModel", "ServiceStream", "stream_seed"]
