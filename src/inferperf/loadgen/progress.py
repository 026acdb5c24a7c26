"""What a ramp or a capacity search will do and how long it may take: the plan line printed before the first
step and one progress line before each step (issue 23 item 3). Pure text from the settings and the strategy's
state; the time source is injected, so the lines are tested exactly.

Time per step (s), from the settings (:func:`step_time_s`):

- about: ``warmup_s`` + the measured part (``--find-max-rate``: ``requests``/rate, as each step measures at
  least :data:`~.stress.MIN_P99_REQUESTS` requests at its rate; ``--stress``: ``duration_s``, or 3 windows of
  ``measurement_interval_ms`` when the step runs until stable) + the drain's quiet period;
- at most: ``max_trials`` windows instead of 3, plus ``--timeout-ms`` for the last answers and the drain's
  longest wait (:data:`~.drain.DRAIN_MAX_WAIT_S`). ``--stress --requests N`` has no known rate: its measured
  part is unknown (None).

Steps left: the ramp's ``max_steps`` minus the steps run (an upper bound); the search's bracketing phase has
no bound but ``max_steps``; once bracketed, bisection needs at most ``ceil(log2((hi - lo) / (lo x p / 100)))``
more steps (each halves the bracket; a passing midpoint only raises ``lo`` and so the stopping width), each at
a rate of at least ``lo``.
"""

from __future__ import annotations

from typing import Any

from .drain import DRAIN_MAX_WAIT_S, DRAIN_QUIET_S
from .options import LoadConfig

STABLE_WINDOWS = 3
"""Windows a step that runs until stable needs at the least (the window rule's ``consecutive``)."""


def duration_text(s: float | None) -> str:
    """``45 s``, ``2m10s``, ``1h04m`` (``?`` for None)."""
    if s is None:
        return "?"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def step_time_s(cfg: LoadConfig, value: float, *, search: bool, requests: int | None = None) -> tuple[Any, Any]:
    """(about, at most) seconds of one step at ``value`` (rate for a search, load for a ramp); None when the
    measured part cannot be known before the step (``--stress --requests`` in closed loop)."""
    interval_s = cfg.measurement_interval_ms / 1000
    if search:
        lo = hi = (requests or cfg.requests or 0) / value
    elif cfg.duration_s is not None:
        lo = hi = cfg.duration_s
    elif cfg.requests is not None:
        lo = hi = cfg.requests / value if cfg.mode == "open" else None
    else:
        lo, hi = STABLE_WINDOWS * interval_s, cfg.max_trials * interval_s
    if lo is None or hi is None:
        return None, None
    late = cfg.timeout_ms / 1000 + max(DRAIN_MAX_WAIT_S, cfg.timeout_ms / 1000)
    return cfg.warmup_s + lo + DRAIN_QUIET_S, cfg.warmup_s + hi + DRAIN_QUIET_S + late


def bisection_steps_left(lo: float, hi: float, resolution_percent: float) -> int:
    """Most bisection steps until ``hi - lo <= lo x resolution_percent / 100`` (every midpoint missing)."""
    n = 0
    while hi - lo > lo * resolution_percent / 100.0 and n < 64:
        hi = (lo + hi) / 2
        n += 1
    return n


def plan_line(cfg: LoadConfig, strategy: Any, requests: int | None = None) -> str:
    """The plan of ``--find-max-rate`` (a :class:`~.stress.RateSearch`) or ``--stress`` (a :class:`~.stress.Ramp`)."""
    if hasattr(strategy, "resolution_percent"):  # RateSearch
        s = strategy
        about, most = step_time_s(cfg, s.start, search=True, requests=requests)
        err = f" or errors above {s.max_error_rate:g} of requests" if s.max_error_rate else " or any error"
        return (f"plan: {s.start:g}, {2 * s.start:g}, {4 * s.start:g}, ... req/s (doubling) until a step misses p99 <="
                f" {s.slo_p99_ms:g} ms{err}, then bisection until the bracket is within {s.resolution_percent:g} %;"
                f" at most {s.max_steps} steps of >= {requests} requests; a step at R req/s takes about"
                f" {cfg.warmup_s + DRAIN_QUIET_S:g} s + {requests}/R s (at {s.start:g} req/s {duration_text(about)},"
                f" at most {duration_text(most)} with late answers and the drain); all {s.max_steps} steps at most"
                f" {duration_text(most * s.max_steps)}")  # fmt: skip
    r = strategy
    ladder = ", ".join(f"{v:g}" for v in r.ladder)
    ladder = f"concurrency {ladder}" if r.integer else f"rates {ladder} req/s"
    stops = [f"throughput gains < {r.gain_percent:g} % over two steps"]
    if r.slo_p99_ms is not None:
        stops.append(f"p99 > {r.slo_p99_ms:g} ms")
    if r.max_error_rate is not None:
        stops.append(f"errors above {r.max_error_rate:g} of requests")
    about, most = step_time_s(cfg, r.ladder[0], search=False)
    total = "" if most is None else (f"; all {r.max_steps} steps about {duration_text(about * r.max_steps)}, at most"
                                     f" {duration_text(most * r.max_steps)}")  # fmt: skip
    return (f"plan: {ladder}, then doubling, until {' or '.join(stops)}; at most {r.max_steps} steps of about"
            f" {duration_text(about)} (at most {duration_text(most)} with late answers and the drain){total}")  # fmt: skip


def progress_line(cfg: LoadConfig, strategy: Any, value: float, elapsed_s: float, requests: int | None = None) -> str:
    """The line before step ``len(strategy.outcomes) + 1`` at ``value``: phase, its expected time, the steps and
    time left when they are bounded, the time so far."""
    k = len(strategy.outcomes) + 1
    search = hasattr(strategy, "resolution_percent")
    about, _ = step_time_s(cfg, value, search=search, requests=requests)
    if search:
        s = strategy
        unit = f"{value:g} req/s"
        if s.hi is None:
            phase, rest = "bracketing", ""
        else:
            left = min(bisection_steps_left(s.lo, s.hi, s.resolution_percent), s.max_steps - len(s.outcomes))
            each, _ = step_time_s(cfg, s.lo, search=True, requests=requests)
            phase = f"bisecting [{s.lo:g}, {s.hi:g}]"
            rest = f"; at most {left} step(s) left with this one, about {duration_text(each * left)}"
    else:
        r = strategy
        unit = f"{'concurrency' if r.integer else 'rate'} {value:g}" + ("" if r.integer else " req/s")
        phase, rest = f"of at most {r.max_steps}", ""
    return f"step {k} {phase}: {unit}, about {duration_text(about)}{rest}; {duration_text(elapsed_s)} so far"


def done_line(strategy: Any, elapsed_s: float) -> str:
    """The line after the last step: how many ran, in how long, and why it stopped."""
    n = len(strategy.outcomes)
    return f"done: {n} step{'s' if n != 1 else ''} in {duration_text(elapsed_s)} ({strategy.stop_reason or 'stopped'})"


__all__ = ["bisection_steps_left", "done_line", "duration_text", "plan_line", "progress_line", "step_time_s"]
