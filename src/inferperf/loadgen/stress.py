"""Stress ramp and capacity search for ``inferperf load`` (issue 13 item 5).

Two pure ask/tell strategies decide the next load from the outcomes so far; they never touch a socket,
so they are tested with scripted outcomes:

- :class:`Ramp` (``--stress``): concurrency (closed loop: 1, 2, 4, 8, ... or the ``--concurrency`` ladder,
  then doubling its last value) or rate (open loop: the ``--request-rate`` ladder, then doubling) until the
  throughput gain stays below ``gain_percent`` over two consecutive steps (saturation), p99 exceeds the
  SLO, the error rate exceeds its maximum, or ``max_steps`` is reached.
- :class:`RateSearch` (``--find-max-rate``): doubling the open-loop rate until the SLO breaks (bracketing),
  then bisection until the bracket is narrower than ``resolution_percent`` of its lower end. The highest
  rate meeting the SLO is the goodput.

An OVERLOADED step (the server fell behind the offered rate, :mod:`.verdict`) does not meet the SLO,
whatever its p99: it is an answer of the search, not a failure of the run. The p99 judged is the
table's (``metrics.client.error_adjusted_latency_ms``: unanswered requests at their age, failed ones
infinitely slow; ``None`` when it falls on failures, which misses any SLO).

Step length rule for the capacity search: each step measures at least :data:`MIN_P99_REQUESTS` (1,000)
completed requests, so its p99 has at least 10 samples above it.

:func:`stress` and :func:`find_max_rate` run the strategies with :func:`loadgen.run.run_one` (one
Result, kind ``load``, per step) and record the findings in every step's ``metrics.client.stress``
(docs/results-schema.md "Stress block").
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..clock import SYSTEM_CLOCK, Clock
from ..interrupt import STOP
from ..results.model import Result
from .options import LoadConfig
from .progress import done_line, plan_line, progress_line

MIN_P99_REQUESTS = 1000
"""Completed requests per capacity-search step (p99 then rests on >= 10 samples above it)."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one step measured: ``value`` (concurrency or req/s), ``queries_per_s``, ``p99_ms`` (over every
    request, see the module docstring; None: it falls on failed requests), ``error_rate`` (errors / sent, 0..1),
    ``overloaded`` (the step's verdict is OVERLOADED), ``token_slo_missed`` (token streams: why the step's p99
    TTFT or p99 TPOT missed ``--slo-ttft-ms`` / ``--slo-tpot-ms``; None: met, or none given)."""

    value: float
    queries_per_s: float
    p99_ms: float | None
    error_rate: float
    overloaded: bool = False
    token_slo_missed: str | None = None


def _p99_over(o: Outcome, slo_p99_ms: float | None) -> bool:
    return slo_p99_ms is not None and (o.p99_ms is None or o.p99_ms > slo_p99_ms)


def _meets(o: Outcome, slo_p99_ms: float | None, max_error_rate: float | None) -> bool:
    return (not o.overloaded and not _p99_over(o, slo_p99_ms) and o.token_slo_missed is None
            and (max_error_rate is None or o.error_rate <= max_error_rate))  # fmt: skip


def token_slo_missed(generation: dict[str, Any] | None) -> str | None:
    """Why a token-stream step missed its SLOs: p99 TTFT over ``--slo-ttft-ms`` or p99 TPOT over
    ``--slo-tpot-ms`` (no TTFT at all misses a TTFT SLO); None when met or when no SLO was given."""
    gp = (generation or {}).get("goodput")
    if not gp:
        return None
    for name, slo in (("ttft", gp.get("slo_ttft_ms")), ("tpot", gp.get("slo_tpot_ms"))):
        if slo is None:
            continue
        p99 = ((generation or {}).get(f"{name}_ms") or {}).get("p99")
        if name == "ttft" and p99 is None:
            return f"no TTFT measured (SLO {slo:g} ms)"
        if p99 is not None and p99 > slo:
            return f"p99 {name.upper()} {p99:.2f} ms > SLO {slo:g} ms"
    return None


class Ramp:
    """Ask/tell ramp: ``ask()`` gives the next load (None = stop, see ``stop_reason``); ``tell(outcome)``.

    Args:
        ladder: first loads in order (e.g. [1, 2, 4]); after it, each step doubles the last load.
        gain_percent: stop when the throughput gain over the previous step is below this for two steps.
        slo_p99_ms / max_error_rate: stop once a step exceeds either (None = no limit).
        max_steps: most steps.
        integer: round loads (concurrency).
    """

    def __init__(self, ladder: list[float], *, gain_percent: float = 5.0, slo_p99_ms: float | None = None,
                 max_error_rate: float | None = None, max_steps: int = 12, integer: bool = True) -> None:  # fmt: skip
        self.ladder = list(ladder) or [1]
        self.gain_percent, self.slo_p99_ms, self.max_error_rate = gain_percent, slo_p99_ms, max_error_rate
        self.max_steps, self.integer = max_steps, integer
        self.outcomes: list[Outcome] = []
        self.stop_reason: str | None = None
        self._flat = 0

    def ask(self) -> float | None:
        """The next load, or None when the ramp has stopped."""
        if self.stop_reason is not None:
            return None
        n = len(self.outcomes)
        if n >= self.max_steps:
            self.stop_reason = f"max steps ({self.max_steps})"
            return None
        v = self.ladder[n] if n < len(self.ladder) else self.outcomes[-1].value * 2
        return float(round(v)) if self.integer else float(v)

    def tell(self, o: Outcome) -> None:
        """Record one step's outcome and decide whether to stop."""
        prev = self.outcomes[-1] if self.outcomes else None
        self.outcomes.append(o)
        if self.max_error_rate is not None and o.error_rate > self.max_error_rate:
            self.stop_reason = f"error rate {o.error_rate:.3f} > {self.max_error_rate:g}"
        elif o.overloaded:
            self.stop_reason = f"overloaded at {o.value:g}: the server fell behind the offered rate"
        elif _p99_over(o, self.slo_p99_ms):
            p99 = "inf (failed requests)" if o.p99_ms is None else f"{o.p99_ms:.2f} ms"
            self.stop_reason = f"p99 {p99} > SLO {self.slo_p99_ms:g} ms"
        elif o.token_slo_missed is not None:
            self.stop_reason = o.token_slo_missed
        elif prev is not None:
            gain = 100.0 * (o.queries_per_s - prev.queries_per_s) / max(prev.queries_per_s, 1e-12)
            self._flat = self._flat + 1 if gain < self.gain_percent else 0
            if self._flat >= 2:
                self.stop_reason = f"throughput gain < {self.gain_percent:g} % over two steps"

    def findings(self) -> dict[str, Any]:
        """``knee`` (load of the last step before throughput stopped gaining, or of the best throughput; None
        under :data:`MIN_KNEE_STEPS` steps),
        ``max_load_meeting_slo``, ``errors_began_at`` (first load with any error), ``stop_reason``."""
        return findings(self.outcomes, self.slo_p99_ms, self.max_error_rate, self.gain_percent, self.stop_reason)


#: no knee from fewer steps (a ramp stopped or interrupted at its first or second step), as the report's rule.
MIN_KNEE_STEPS = 3


def findings(outcomes: list[Outcome], slo_p99_ms: float | None, max_error_rate: float | None,
             gain_percent: float, stop_reason: str | None) -> dict[str, Any]:  # fmt: skip
    """Summary of a ramp's outcomes (see :meth:`Ramp.findings`)."""
    knee = None
    for a, b in zip(outcomes, outcomes[1:]) if len(outcomes) >= MIN_KNEE_STEPS else ():
        if 100.0 * (b.queries_per_s - a.queries_per_s) / max(a.queries_per_s, 1e-12) < gain_percent:
            knee = a.value
            break
    if knee is None and len(outcomes) >= MIN_KNEE_STEPS:
        knee = max(outcomes, key=lambda o: o.queries_per_s).value
    ok = [o for o in outcomes if _meets(o, slo_p99_ms, max_error_rate)]
    best = max(ok, key=lambda o: o.value) if ok else None
    err = next((o.value for o in outcomes if o.error_rate > 0), None)
    return {
        "knee": knee, "max_load_meeting_slo": best.value if best else None,
        "max_queries_per_s_meeting_slo": best.queries_per_s if best else None, "errors_began_at": err,
        "stop_reason": stop_reason, "slo_p99_ms": slo_p99_ms, "max_error_rate": max_error_rate,
        "gain_percent": gain_percent, "steps": [dataclasses.asdict(o) for o in outcomes],
    }  # fmt: skip


class RateSearch:
    """Ask/tell capacity search over open-loop rates: bracketing (double from ``start`` until a rate
    misses the SLO) then bisection until ``hi - lo <= resolution_percent`` % of ``lo``.

    ``goodput`` is the highest rate that met the SLO (p99 <= ``slo_p99_ms``, error rate <= ``max_error_rate``,
    default 0, and the step not OVERLOADED: the offered rate achieved), None if even ``start`` missed it."""

    def __init__(self, slo_p99_ms: float | None, *, start: float = 10.0, resolution_percent: float = 5.0,
                 max_error_rate: float | None = None, max_steps: int = 20) -> None:  # fmt: skip
        self.slo_p99_ms, self.start, self.resolution_percent = slo_p99_ms, start, resolution_percent
        self.max_error_rate = 0.0 if max_error_rate is None else max_error_rate
        self.max_steps = max_steps
        self.lo: float | None = None
        self.hi: float | None = None
        self.outcomes: list[Outcome] = []
        self.stop_reason: str | None = None

    def ask(self) -> float | None:
        """The next rate (req/s), or None when done."""
        if self.stop_reason is not None:
            return None
        if len(self.outcomes) >= self.max_steps:
            self.stop_reason = f"max steps ({self.max_steps})"
            return None
        if self.hi is None:
            return self.start if self.lo is None else self.lo * 2
        if self.lo is None:
            self.stop_reason = f"even {self.start:g} req/s missed the SLO"
            return None
        if self.hi - self.lo <= self.lo * self.resolution_percent / 100.0:
            self.stop_reason = f"bracket [{self.lo:g}, {self.hi:g}] within {self.resolution_percent:g} %"
            return None
        return (self.lo + self.hi) / 2

    def tell(self, o: Outcome) -> None:
        """Record one rate's outcome: it moves the lower (met the SLO) or upper (missed) bracket end."""
        self.outcomes.append(o)
        if _meets(o, self.slo_p99_ms, self.max_error_rate):
            self.lo = o.value if self.lo is None else max(self.lo, o.value)
        else:
            self.hi = o.value if self.hi is None else min(self.hi, o.value)

    @property
    def goodput(self) -> float | None:
        """Highest rate (req/s) that met the SLO."""
        return self.lo

    def findings(self) -> dict[str, Any]:
        """``goodput_rate``, ``bracket`` [lo, hi], ``resolution_percent``, ``stop_reason``, ``steps``."""
        ok = [o for o in self.outcomes if o.value == self.lo]
        return {
            "goodput_rate": self.lo, "goodput_queries_per_s": ok[-1].queries_per_s if ok else None,
            "bracket": [self.lo, self.hi], "resolution_percent": self.resolution_percent,
            "slo_p99_ms": self.slo_p99_ms, "max_error_rate": self.max_error_rate, "stop_reason": self.stop_reason,
            "min_requests_per_step": MIN_P99_REQUESTS, "steps": [dataclasses.asdict(o) for o in self.outcomes],
        }  # fmt: skip


def outcome(r: Result, value: float) -> Outcome:
    """A step Result -> :class:`Outcome` (error rate = errors / (completed + errors); p99 over every request,
    ``latency_ms.p99`` for a Result without the error-adjusted block)."""
    done = r.metrics.latency_ms.count
    errs = r.metrics.errors.count
    adjusted = (r.metrics.client or {}).get("error_adjusted_latency_ms")
    p99 = adjusted.get("p99") if adjusted else r.metrics.latency_ms.p99
    return Outcome(float(value), r.metrics.throughput.queries_per_s, p99, errs / max(done + errs, 1),
                   overloaded=r.validity.verdict == "OVERLOADED",
                   token_slo_missed=token_slo_missed(r.metrics.generation))  # fmt: skip


def drive(strategy: Ramp | RateSearch, step: Callable[[float], Result], mode: str,
          on_step: Callable[[Result], None] | None = None, on_progress: Callable[[str], None] | None = None,
          cfg: LoadConfig | None = None, requests: int | None = None, clock: Clock = SYSTEM_CLOCK) -> list[Result]:  # fmt: skip
    """Run ``strategy`` with ``step(value) -> Result``; stamps ``metrics.client.stress`` on every Result
    (the findings so far; the last Result holds the final ones) and calls ``on_step`` after each. A stop
    request (Ctrl-C, SIGTERM) ends the search: the interrupted step is kept but not told to the strategy.

    ``on_progress`` (with ``cfg``): gets the plan line first, a progress line before each step and a last line
    (:mod:`.progress`); ``requests``: each step's measured requests (the search's), for the time figures."""
    out: list[Result] = []
    t0 = clock.now_ns()
    say = on_progress if on_progress is not None and cfg is not None else None
    if say is not None:
        say(plan_line(cfg, strategy, requests))  # type: ignore[arg-type]
    while not STOP.requested and (value := strategy.ask()) is not None:
        if say is not None:
            say(progress_line(cfg, strategy, value, (clock.now_ns() - t0) / 1e9, requests))  # type: ignore[arg-type]
        r = step(value)
        out.append(r)
        c = r.metrics.client or {}
        if c.get("interrupted"):  # partial figures: they move no bracket
            strategy.stop_reason = f"interrupted ({STOP.signal_name})"
        else:
            strategy.tell(outcome(r, value))
            if c.get("target_lost"):
                strategy.stop_reason = "the target stopped answering"
            elif c.get("rejected"):
                strategy.stop_reason = "the server refused the requests (4xx)"
        f = {"mode": mode, "step": len(out) - 1, **strategy.findings()}
        if r.metrics.client is not None:
            r.metrics.client["stress"] = f
        if on_step is not None:
            on_step(r)
        if strategy.stop_reason is not None:
            break
    if STOP.requested and strategy.stop_reason is None:
        strategy.stop_reason = f"interrupted ({STOP.signal_name})"
    if say is not None:
        say(done_line(strategy, (clock.now_ns() - t0) / 1e9))
    final = {"mode": mode, **strategy.findings()}
    for i, r in enumerate(out):
        if r.metrics.client is not None:
            r.metrics.client["stress"] = {**final, "step": i}
    return out


def stress(cfg: LoadConfig, command: list[str] | None = None, on_step: Callable[[Result], None] | None = None,
           target: Any = None, on_progress: Callable[[str], None] | None = None) -> list[Result]:  # fmt: skip
    """``--stress`` (or ``--find-max-rate``): ramp or search against the target; one Result per step.
    ``on_progress`` gets the plan, a line before each step and a last line (:mod:`.progress`).

    Raises:
        UsageError: unreachable target or unknown model (before any load)."""
    from .run import read_load_target, run_one

    target = target or read_load_target(cfg)
    if cfg.find_max_rate:
        return find_max_rate(cfg, command, on_step, target, on_progress=on_progress)
    closed = cfg.mode == "closed"
    ladder = list(cfg.concurrency or [1, 2, 4, 8]) if closed else list(cfg.request_rate or [])
    ramp = Ramp(ladder, gain_percent=cfg.stress_gain_percent, slo_p99_ms=cfg.slo_p99_ms,
                max_error_rate=cfg.max_error_rate, integer=closed)  # fmt: skip
    with _kept(cfg, target) as kept:  # one loop; the target drained before each step
        return drive(ramp, lambda v: run_one(_at(cfg, v, closed), target, v, command, kept), "stress", on_step,
                     on_progress, cfg)  # fmt: skip


def _kept(cfg: LoadConfig, target: Any) -> Any:
    """The steps' :class:`~.run.KeptConnections`, reading the server's busy gauge when it is a KServe v2 one."""
    from .drain import metrics_busy
    from .gen_target import transport_for
    from .run import KeptConnections

    busy = metrics_busy(cfg.url, target.model) if target.kind == "kserve" else None
    return KeptConnections(transport=transport_for(cfg), busy=busy)


def _at(cfg: LoadConfig, value: float, closed: bool) -> LoadConfig:
    return cfg.model_copy(update={"concurrency": [int(value)]} if closed else {"request_rate": [value]})


def find_max_rate(cfg: LoadConfig, command: list[str] | None = None, on_step: Callable[[Result], None] | None = None,
                  target: Any = None, resolution_percent: float = 5.0,
                  on_progress: Callable[[str], None] | None = None) -> list[Result]:  # fmt: skip
    """``--find-max-rate``: :class:`RateSearch` over open-loop rates, each step measuring at least
    :data:`MIN_P99_REQUESTS` completed requests; the last Result's ``metrics.client.stress.goodput_rate``
    is the highest rate meeting ``cfg.slo_p99_ms`` (and, for token streams, ``--slo-ttft-ms``/``--slo-tpot-ms``
    on p99 TTFT/TPOT)."""
    from .run import read_load_target, run_one

    target = target or read_load_target(cfg)
    search = RateSearch(cfg.slo_p99_ms, start=(cfg.request_rate or [10.0])[0], resolution_percent=resolution_percent,
                        max_error_rate=cfg.max_error_rate)  # fmt: skip
    base = cfg.model_copy(update={"requests": max(cfg.requests or 0, MIN_P99_REQUESTS), "duration_s": None})
    with _kept(cfg, target) as kept:  # one loop; the target drained before each step
        return drive(search, lambda v: run_one(_at(base, v, False), target, v, command, kept), "find_max_rate",
                     on_step, on_progress, base, base.requests)  # fmt: skip
