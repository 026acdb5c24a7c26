"""inferperf: measure and improve AI-model inference performance.

The public API is curated here (a test checks ``__all__``). Importing
``inferperf`` loads no runtime (onnxruntime, openvino, torch), nor scipy:
the heavy parts load on first use.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

from .config import BenchConfig, SessionOptions, StopOptions, WarmupOptions, WorkloadOptions  # noqa: E402
from .errors import (  # noqa: E402
    BackendUnavailable,
    GateFailed,
    InferperfError,
    MeasurementError,
    ModelError,
    RuntimeFailure,
    UsageError,
)
from .results.io import load, save  # noqa: E402
from .results.model import Result  # noqa: E402


def bench(model: Any, config: BenchConfig | None = None, **kwargs: Any) -> Result:
    """Measure ``model`` (path or ``zoo:NAME``); see :func:`inferperf.measure.bench.bench`."""
    from .measure.bench import bench as _bench

    return _bench(model, config, **kwargs)


def capacity_plan(model: Any, options: Any, out_dir: Any, **kwargs: Any) -> Any:
    """Plan the cheapest fleet meeting a p99 SLO at a rate (``inferperf plan``); see :func:`inferperf.plan.plan`.

    ``options`` is an :class:`inferperf.plan.PlanOptions`; returns a :class:`inferperf.plan.PlanOutcome`.
    (Not named ``plan``: that is the subpackage ``inferperf.plan``.)
    """
    from pathlib import Path

    from .plan import plan as _plan

    return _plan(model, options, Path(out_dir), **kwargs)


def history_add(paths: Any, db: str | None = None, **provenance: Any) -> Any:
    """Add Result files or folders to the history database ``db`` (a path or URL; default
    ``$INFERPERF_HISTORY_DB``, else ``./inferperf-history.db``); ``provenance``: ``commit``, ``branch``, ``time``
    (a naive-UTC datetime). Returns an :class:`inferperf.history.AddReport`. See ``inferperf history add``."""
    import os

    from .history import Provenance, add, open_store, read_results

    one = isinstance(paths, (str, os.PathLike))
    return add(open_store(db), read_results([paths] if one else paths), Provenance(**provenance))


def history_check(db: str | None = None, series: str | None = None, max_regression: float = 0.05) -> Any:
    """The history gate over the series matching the glob ``series``: an :class:`inferperf.history.gate.CheckReport`
    whose ``exit_code`` is 3 when a newest point (or an unacknowledged change) is worse beyond ``max_regression``
    (0.05 = 5 %). See ``inferperf history check``."""
    from .history import open_store
    from .history.gate import check

    return check(open_store(db), series, max_regression)


__all__ = [
    "BackendUnavailable",
    "BenchConfig",
    "GateFailed",
    "InferperfError",
    "MeasurementError",
    "ModelError",
    "Result",
    "RuntimeFailure",
    "SessionOptions",
    "StopOptions",
    "UsageError",
    "WarmupOptions",
    "WorkloadOptions",
    "__version__",
    "bench",
    "capacity_plan",
    "history_add",
    "history_check",
    "load",
    "save",
]
