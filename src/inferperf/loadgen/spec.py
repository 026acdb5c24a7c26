"""What ``inferperf load`` is asked to do, as one validated spec: the target, its LoadConfig settings, a Locust
import instead, and where the Results go; then the run over a running server, and how it ends (the exit-code gates).

:meth:`LoadSpec.check` refuses contradictions itself, so :func:`run_load` (a running server) and
:func:`inferperf.tune.served.run_load_spec` (also a model served on its own server first: ``loadgen`` never
imports ``serve``) get the same one-line refusals as the CLI; :func:`outcome_error` decides how a finished run
exits. The command maps its flags onto the spec, makes one library call and renders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import GateFailed, InferperfError, Interrupted, MeasurementError, UsageError, first_error
from ..interrupt import STOP, cooperative
from ..measure.speedup import sig
from ..results.model import Result
from .options import LoadConfig


def load_config(flags: dict[str, Any]) -> LoadConfig:
    """LoadConfig from the settings given (field -> value; None = default).

    Raises:
        UsageError: a refused value, one line naming its flag (``--request-rate [0.0]: each rate must be > 0``).
    """
    try:
        return LoadConfig.model_validate({k: v for k, v in flags.items() if v is not None})
    except ValidationError as e:
        _, where, msg, _ = first_error(e, indices=False)
        flag = f"--{where.replace('_', '-')}: " if where and not msg.startswith("--") else ""
        raise UsageError(f"{flag}{msg}") from None


@dataclass
class LoadSpec:
    """One load run.

    Attributes:
        target: ``http://HOST:PORT`` of a KServe v2 server (or any URL with ``body``), or an ONNX file / ``zoo:NAME``
            to serve first (:func:`inferperf.tune.served.run_load_spec`). None only with ``from_locust_csv``.
        settings: LoadConfig fields (None = default), or a LoadConfig; ``url`` comes from ``target``.
        from_locust_csv: a ``locust --csv`` PREFIX to import instead of driving load (no target).
        output: where the command writes the Results (None: nowhere). history: they go into a history database.
        cfg: the validated settings, filled by :meth:`check`.
    """

    target: str | None = None
    settings: dict[str, Any] | LoadConfig = field(default_factory=dict)
    from_locust_csv: str | None = None
    output: Path | None = None
    history: bool = False
    cfg: LoadConfig | None = None

    @property
    def is_url(self) -> bool:
        """The target is a running server's URL (not a model to serve)."""
        return self.target is not None and "://" in self.target

    def check(self) -> LoadSpec:
        """Refuse what cannot run; returns self with ``cfg`` filled (not for a Locust import, which drives nothing).

        Raises:
            UsageError: a target with ``from_locust_csv`` or neither; a refused setting (:func:`load_config`); a token
                stream API (``api`` not kserve) at a model rather than a URL; ``history`` without ``output``; a
                missing or malformed ``trace:FILE``.
        """
        if self.from_locust_csv is not None:
            if self.target is not None:
                raise UsageError("--from-locust-csv takes no TARGET: drop it")
            return self
        if self.target is None:
            raise UsageError("give a TARGET (URL, ONNX file or zoo:NAME) or --from-locust-csv PREFIX")
        doc = self.settings.model_dump() if isinstance(self.settings, LoadConfig) else self.settings
        self.cfg = cfg = load_config({**doc, "url": self.target if self.is_url else None})
        if cfg.api != "kserve" and not self.is_url:
            raise UsageError(f"--api {cfg.api} loads a running server: give its URL (e.g. http://127.0.0.1:8000; a mock:"
                             " inferperf serve --mock-generate)")
        if self.history and self.output is None:
            raise UsageError("--history adds the step Results load writes: pass --output DIR")
        if cfg.arrival.startswith("trace:"):
            from ..measure.arrivals import load_trace

            load_trace(cfg.arrival[len("trace:"):])
        return self


@dataclass
class LoadOutcome:
    """What a load run gave: ``cfg`` as run (on its own server: that server's URL and model name), one Result per
    step that ran, the server's own Result (kind serve) when the run started it, and the CPUs each side had."""

    cfg: LoadConfig
    results: list[Result]
    server: Result | None = None
    placement: dict[str, Any] | None = None


def runner_for(cfg: LoadConfig) -> Callable[..., list[Result]]:
    """The library function a run of ``cfg`` is: :func:`.soak.soak`, :func:`.stress.stress` (also
    ``find_max_rate``) or :func:`.run.load`."""
    if cfg.soak_s is not None:
        from .soak import soak

        return soak
    if cfg.stress or cfg.find_max_rate:
        from .stress import stress

        return stress
    from .run import load

    return load


def served_shapes(model: str, cfg: LoadConfig) -> list[str]:
    """``--shape`` values of a run on its own server: the given ones, else the zoo model's default shapes (as
    ``bench`` measures it: ``load zoo:ppocr-cls`` sends x:1x3x48x192), none with ``input_data``."""
    from ..zoo import default_shapes

    if cfg.shapes or cfg.input_data is not None:
        return list(cfg.shapes)
    return [f"{k}:{'x'.join(map(str, dims))}" for k, dims in default_shapes(model).items()]


def run_steps(cfg: LoadConfig, *, command: list[str] | None = None,
              on_start: Callable[[LoadConfig], None] | None = None, on_step: Callable[[Result], None] | None = None,
              on_interval: Callable[[dict], Any] | None = None, on_progress: Callable[[str], None] | None = None,
              on_end: Callable[[], None] | None = None, placement: dict[str, Any] | None = None) -> LoadOutcome:  # fmt: skip
    """Read the target of ``cfg`` and run its steps (:func:`runner_for`) in a cooperative section: Ctrl-C or
    SIGTERM ends the step in progress, kept and marked (:mod:`inferperf.interrupt`); a second one raises
    KeyboardInterrupt (the hard stop).

    Args:
        on_start: called with ``cfg`` once the target answered, before the first step.
        on_step: each step's Result as it ends (``placement`` already recorded in it).
        on_interval: a soak's live figures per interval. on_progress: a search's plan and a line per step.
        on_end: called when the steps ended (not after a hard stop), before anything else (a server's stop).
        placement: ``{generator_cpus, server_cpus, disjoint}`` of a run on its own server, recorded in each Result.

    Raises:
        Interrupted: Ctrl-C or SIGTERM while the target was read (nothing measured).
        UsageError: an unreachable target or a shape the model refuses (one line, before any step).
        GateFailed: a soak's ``fail_on_leak`` found a leak.
    """
    from .gen_target import read_load_target

    try:
        target = read_load_target(cfg)
    except KeyboardInterrupt:  # before the cooperative section: nothing was measured
        raise Interrupted(nothing_kept(STOP.signal_name), STOP.exit_code) from None

    def placed(r: Result) -> None:
        if placement is not None:
            r.run["placement"] = placement
            r.config.placement.cpus = placement["generator_cpus"]
            if not placement["disjoint"]:
                r.notes.append("one CPU: the generator and the server share it")
        if on_step is not None:
            on_step(r)

    extra: dict[str, Any] = {}
    if (cfg.stress or cfg.find_max_rate) and on_progress is not None:
        extra["on_progress"] = on_progress
    if cfg.soak_s is not None and on_interval is not None:
        extra["on_interval"] = on_interval
    try:
        if on_start is not None:
            on_start(cfg)
        with cooperative():
            results = runner_for(cfg)(cfg, command=command, on_step=placed, target=target, **extra)
    finally:
        close = getattr(target, "close", None)  # --shared-memory system: regions unregistered, segments unlinked
        if close is not None:  # (also on a hard stop)
            close()
    if on_end is not None:
        on_end()
    return LoadOutcome(cfg, results, placement=placement)


def run_load(spec: LoadSpec, *, command: list[str] | None = None, **hooks: Any) -> LoadOutcome:
    """Check ``spec`` and drive its running server (:func:`run_steps`; ``hooks``: its callbacks).

    Raises:
        UsageError: as :meth:`LoadSpec.check`; a Locust import or a model target (served first only by
            :func:`inferperf.tune.served.run_load_spec`).
        Interrupted, GateFailed: as :func:`run_steps`.
    """
    spec.check()
    if spec.cfg is None or not spec.is_url:
        raise UsageError("run_load drives a running server: give its URL (a model is served first by "
                         "inferperf.tune.served.run_load_spec; a Locust import is loadgen.locust_import)")
    return run_steps(spec.cfg, command=command, **hooks)


def nothing_kept(signal_name: str) -> str:
    """The one line of a run stopped before any step finished."""
    return f"interrupted by {signal_name} before any step finished: nothing measured to keep"


def step_label(r: Result) -> str:
    """A load step named by its load: ``concurrency 8``, ``50 req/s`` or ``the trace``."""
    c = r.metrics.client or {}
    if r.config.scenario == "concurrent":
        return f"concurrency {r.config.concurrency}"
    rate = c.get("target_rate")
    return f"{sig(rate) if isinstance(rate, float) else rate} req/s" if rate else "the trace"


def refused_line(cfg: LoadConfig, refused: dict[str, Any]) -> str:
    """The one line for a step the server refused (``metrics.client.rejected``): what happened, then the fix for
    the API spoken. A token-stream request answered 404 or 405 is a server that does not serve that route (not an
    OpenAI-compatible server, or another path): KServe's hints (--shape, --protocol) mean nothing there."""
    said = " ".join(str(refused.get("body") or "").split()) or "(no body)"
    head = f"the server refused the requests ({refused['in_a_row']} answers {refused['status']} in a row; the first said: {said})"
    if getattr(cfg, "api", "kserve") == "kserve":
        return f"{head}: fix --shape, --input-data, --protocol or --model"
    if refused["status"] in (404, 405):
        from .gen_target import request_path

        return (f"{head}: {cfg.url} does not serve POST {request_path(cfg, cfg.model or 'MODEL')} (--api {cfg.api}): "
                "point the URL at an OpenAI-compatible server (or Triton's generate extension with --api triton-generate)")
    return f"{head}: fix --model, --max-tokens or --header"


def lost_line(r: Result, results: list[Result], cfg: LoadConfig) -> str:
    """The one line ``load`` exits 1 with when the target stopped answering during step ``r``."""
    kept = f"{len(results)} step Result(s) kept, no later step run"
    reason = (r.metrics.client or {}).get("lost_reason") or "it stopped answering"
    return (f"the target stopped answering during the step at {step_label(r)}: {reason}; {kept}; check that the"
            f" server at {cfg.url} is up")


def outcome_error(outcome: LoadOutcome) -> InferperfError | None:
    """How a run that was not interrupted ends, or None (exit 0), checked after every step ran: the server refused
    the requests (UsageError, exit 2), the target stopped answering (MeasurementError, 1), a step INVALID with
    ``fail_on_invalid`` or a rate short of its target with ``strict_rate`` (GateFailed, 3)."""
    from .run import rate_short

    cfg, results = outcome.cfg, outcome.results
    refused = next(((r.metrics.client or {})["rejected"] for r in results if (r.metrics.client or {}).get("rejected")),
                   None)  # fmt: skip
    if refused:
        return UsageError(refused_line(cfg, refused))
    lost = [r for r in results if (r.metrics.client or {}).get("target_lost")]
    if lost:
        return MeasurementError(lost_line(lost[0], results, cfg))
    bad = [r for r in results if not r.validity.valid]
    if cfg.fail_on_invalid and bad:
        return GateFailed(f"--fail-on-invalid: {len(bad)} of {len(results)} step(s) INVALID (first, at"
                          f" {step_label(bad[0])}: {'; '.join(bad[0].validity.reasons)})")
    short = [r for r in results if rate_short(r)]
    if cfg.strict_rate and short:
        c = short[0].metrics.client or {}
        return GateFailed(f"--strict-rate: achieved {c['achieved_rate']:.1f} req/s of the {c['scheduled_rate']:.1f}"
                          f" scheduled (target {c['target_rate']:g})")
    return None


__all__ = ["LoadOutcome", "LoadSpec", "load_config", "lost_line", "nothing_kept", "outcome_error", "refused_line",
           "run_load", "run_steps", "runner_for", "served_shapes", "step_label"]
