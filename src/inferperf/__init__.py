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
    "load",
    "save",
]
