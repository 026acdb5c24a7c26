"""Build the serving app: from one model (:func:`prepare`) or from a model repository with run-time model
control (:func:`prepare_repository`). Nothing is bound here; :mod:`inferperf.serve.server` runs the app.

Imports flow one way: ``server`` -> ``build`` -> ``app`` and ``control`` (which never import each other).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from ..config import BenchConfig
from ..errors import InferperfError, UsageError
from .app import ServeApp
from .control import MODES, ModelControl, rss
from .metrics import DisabledMetrics, ServerMetrics
from .options import ServeOptions
from .repository import check_name, load_served, read_model, scan


def prepare(
    model: Any,
    config: BenchConfig,
    serve: ServeOptions,
    name: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
    metrics: ServerMetrics | None = None,
    warmup: bool = True,
) -> ServeApp:
    """Load ``model`` (a path / ``zoo:NAME``, or an already built ``ServedModel``) and build the app;
    ``warmup=False`` (``serve --warmup 0``) serves without warming up.

    Raises:
        UsageError / ModelError: bad flags or an unloadable model (nothing is bound yet).
    """
    if metrics is None:
        metrics = ServerMetrics(clock=clock) if serve.metrics else DisabledMetrics(clock=clock)
    if isinstance(model, str):
        from .model import ServedModel

        model = ServedModel.load(model, config, serve, name=name, observer=metrics, clock=clock, warmup=warmup)
    return ServeApp([model], metrics=metrics, clock=clock)


def close_models(models: Iterable[Any]) -> None:
    """Close served models that never ran in a server (a failed start), without draining; errors ignored."""
    for m in models:
        with contextlib.suppress(Exception):
            asyncio.run(m.close(drain=False))


def prepare_repository(root: Any, clock: Clock = SYSTEM_CLOCK, metrics: bool = True,
                       warn: Callable[[str], None] | None = None, *, mode: str = "none",
                       load_models: Sequence[str] | None = None, max_concurrent_loads: int = 1,
                       max_loaded_models: int = 0, exit_on_error: bool = False) -> Any:  # fmt: skip
    """Load the models of the repository at ``root`` (:mod:`inferperf.serve.repository`) and build the app,
    with run-time model control (:class:`inferperf.serve.control.ModelControl`) injected (``app.control``).

    ``mode`` is Triton's ``--model-control-mode``: ``none`` loads every model now, ``explicit`` only
    ``load_models``; ``max_loaded_models`` (0 = no limit) makes later loads unload the least recently
    used. ``warn`` gets each model's warning line (fields of a Triton config inferperf ignores, and
    each model left UNAVAILABLE with its reason); ``metrics`` False turns Prometheus metrics off for the
    whole server.

    A model that cannot be served (its config asks for what inferperf does not do, its file does not load)
    is UNAVAILABLE with its reason in the repository index while the others are served; with
    ``exit_on_error`` (Triton's ``--exit-on-error``) it is fatal instead.

    Raises:
        UsageError / ModelError: an unknown ``mode``, a malformed repository, an unknown ``load_models`` name, no model that can be
            served, or with ``exit_on_error`` any model that cannot (nothing is bound yet; models already
            loaded are closed).
    """
    if mode not in MODES:  # before any model loads (ModelControl checks it again)
        raise UsageError(f"--model-control-mode {mode!r}: use none or explicit")
    root = Path(root)
    failures: dict[str, str] = {}
    if mode == "explicit":
        entries = []
        for n in dict.fromkeys(load_models or []):
            check_name(n)
            if not (root / n).is_dir():
                raise UsageError(f"--load-model {n}: no such model folder in the repository '{root}'")
            try:
                entries.append(read_model(root, n))
            except UsageError as e:
                if exit_on_error:
                    raise
                failures[n] = str(e)
    elif load_models:
        raise UsageError("--load-model needs --model-control-mode explicit (mode none loads every model)")
    else:
        entries = scan(root, None if exit_on_error else failures)
    observer = ServerMetrics(clock=clock) if metrics else DisabledMetrics(clock=clock)
    if max_loaded_models and len(entries) > max_loaded_models:
        raise UsageError(f"{len(entries)} models to load at start but --max-loaded-models {max_loaded_models}:"
                         " raise it, or use --model-control-mode explicit with fewer --load-model")
    served: list[Any] = []
    memory: dict[str, int] = {}
    try:
        for entry in entries:
            for line in entry.warnings:
                if warn is not None:
                    warn(line)
            before = rss()
            try:
                served += load_served(entry, observer=observer, clock=clock)
            except InferperfError as e:
                if exit_on_error:
                    raise
                failures[entry.name] = str(e)
                continue
            memory[entry.name] = max(0, rss() - before)
        for name, reason in failures.items():
            if warn is not None:
                warn(f"model '{name}' is UNAVAILABLE: {reason}")
        if failures and not served:
            first = next(iter(failures))
            raise UsageError(f"no model of the repository '{root}' can be served ({len(failures)} UNAVAILABLE;"
                             f" '{first}': {failures[first]})")
        control = ModelControl(root, mode, max_concurrent_loads, observer=observer, clock=clock,
                               max_loaded_models=max_loaded_models)
        control.rss_bytes.update(memory)
        control.states.update({n: "UNAVAILABLE" for n in failures})
        control.reasons.update(failures)
    except BaseException:
        close_models(served)
        raise
    return ServeApp(served, metrics=observer, clock=clock, repository=control)
