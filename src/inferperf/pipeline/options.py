"""How ``inferperf pipeline`` drives a pipeline file, as one validated spec (:class:`PipelineOptions`): the loop,
the stop rule, per-stage overrides, the extra queue-size runs, and the gate.

:meth:`PipelineOptions.check` refuses contradictions itself, so :func:`~inferperf.pipeline.run.run_pipeline` (the
library call behind the command) gets the same one-line refusals as the CLI; :func:`gate_message` decides exit 3.
The command maps its flags onto the options, reads the file (:func:`~inferperf.pipeline.spec.load`), makes the
one call and renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import UsageError
from ..policy.pipeline import StopRule
from ..results.model import Result


@dataclass
class PipelineOptions:
    """How to drive the pipeline.

    Attributes:
        concurrency: closed loop: items in flight (None: every worker busy plus one waiting per queue).
        request_rate: open loop: items/s on ``arrival`` (``constant`` | ``poisson``); excludes concurrency.
        stop: when to stop sending (items, seconds); ``warmup`` items first (never counted).
        workers / executors / queue_sizes_by_stage: per-stage overrides of the file (``--workers det=2``).
        queue_policy: overrides every queue's policy (``block`` | ``reject``).
        queue_sizes: extra runs with every queue at these sizes (int, ``recommended`` or ``unbounded``).
        standalone / standalone_s: measure each stage alone (seconds per stage).
        fail_fast: stop at the first stage error.
        pool_size: items taken from a generator (cycled); keep_outputs: final items kept in the Result.
        seed: the Poisson schedule's seed.
        fail_on_invalid: the gate: an INVALID main Result exits 3 (:func:`gate_message`).
    """

    concurrency: int | None = None
    request_rate: float | None = None
    arrival: str = "constant"
    stop: StopRule = field(default_factory=StopRule)
    warmup: int | None = None
    workers: dict[str, int] = field(default_factory=dict)
    executors: dict[str, str] = field(default_factory=dict)
    queue_sizes_by_stage: dict[str, int | None] = field(default_factory=dict)
    queue_policy: str | None = None
    queue_sizes: list[int | str] = field(default_factory=list)
    standalone: bool = True
    standalone_s: float = 1.5
    fail_fast: bool = False
    pool_size: int = 64
    keep_outputs: int = 32
    seed: int = 0
    fail_on_invalid: bool = False

    def check(self) -> PipelineOptions:
        """Refuse what cannot run; returns self with the stop rule's cap raised to its minimum duration.

        Raises:
            UsageError: an unknown queue policy; fewer than 1 item, pool item or in flight; a negative warm-up;
                an arrival schedule without a rate; a negative ``min_duration_s``, a ``max_duration_s``,
                ``drain_timeout_s`` or ``standalone_s`` not above 0 s; both a concurrency and a rate.
        """
        stop = self.stop
        if self.queue_policy is not None and self.queue_policy not in ("block", "reject"):
            raise UsageError(f"--queue-policy {self.queue_policy!r}: use block or reject")
        for flag, v in (("--items", stop.min_items), ("--pool-size", self.pool_size)):
            if v < 1:
                raise UsageError(f"{flag} {v}: must be >= 1")
        if self.concurrency is not None and self.concurrency < 1:
            raise UsageError(f"--concurrency {self.concurrency}: must be >= 1")
        if self.warmup is not None and self.warmup < 0:
            raise UsageError(f"--warmup {self.warmup}: must be >= 0 items")
        if self.request_rate is None and self.arrival != "constant":
            raise UsageError(f"--arrival {self.arrival} needs --request-rate R (the open loop's items/s)")
        for flag, s, low in (("--duration-s", stop.min_duration_s, 0.0), ("--max-duration-s", stop.max_duration_s, None),
                             ("--drain-timeout-s", stop.drain_timeout_s, None), ("--standalone-s", self.standalone_s, None)):
            if not (s >= low if low is not None else s > 0):
                raise UsageError(f"{flag} {s:g}: must be {'>= 0' if low is not None else '> 0'} seconds")
        if self.concurrency is not None and self.request_rate is not None:
            raise UsageError("--concurrency and --request-rate contradict: a closed loop or an open loop, not both")
        self.stop = replace(stop, max_duration_s=max(stop.max_duration_s, stop.min_duration_s))
        return self


def gate_message(opts: PipelineOptions, results: list[Result]) -> str | None:
    """Why the command exits 3, or None: the main Result (``results[0]``) is INVALID and ``fail_on_invalid``."""
    if opts.fail_on_invalid and results and not results[0].validity.valid:
        return f"result is INVALID ({'; '.join(results[0].validity.reasons)}) and --fail-on-invalid is set"
    return None


__all__ = ["PipelineOptions", "gate_message"]
