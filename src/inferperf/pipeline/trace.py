"""What one pipeline run recorded, item by item: the data every figure is derived from.

Both executors write it: the real one (:mod:`.engine`, threads and processes, the system clock) and the
simulated one (:mod:`.simulate`, virtual time), so the analysis (:mod:`.analysis`) is one code path.
All times are integer nanoseconds on one clock (``perf_counter_ns`` or virtual time).

Per item and stage ``s``: ``enq`` (put into the stage's input queue, i.e. the upstream's hand-over done),
``deq`` (taken by a worker), ``start``/``end`` (the stage's own service), ``out`` (hand-over done: put into
the next queue, or the item finished), ``cpu`` (CPU ns of the thread that ran it), ``handover`` (process
workers: serialisation and transfer), ``worker``. Unvisited stages hold -1. The telescoping sum
``sum_s (out_s - enq_s)`` plus the source delay ``enq_0 - intended`` is the item's end-to-end latency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ItemRecord:
    """One item's path through the stages (see the module docstring for the fields); ``error`` is
    ``(stage, kind)`` when a stage raised; ``rejected`` the stage whose full queue (policy ``reject``)
    refused it; ``measured`` False for a warm-up item (sent before the window opened)."""

    index: int
    intended_ns: int
    n: int
    enq: list[int] = field(default_factory=list)
    deq: list[int] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    out: list[int] = field(default_factory=list)
    cpu: list[int] = field(default_factory=list)
    handover: list[int] = field(default_factory=list)
    worker: list[int] = field(default_factory=list)
    done_ns: int = -1
    error: tuple[str, str] | None = None
    rejected: str | None = None
    measured: bool = True

    def __post_init__(self) -> None:
        for name in ("enq", "deq", "start", "end", "out", "cpu", "handover", "worker"):
            if not getattr(self, name):
                setattr(self, name, [-1] * self.n)


@dataclass
class Trace:
    """One measured run.

    Attributes:
        stages: stage names in chain order; ``workers``/``executors``/``kinds`` per stage.
        queue_sizes: each stage's input-queue capacity (None: unbounded); ``policies`` per queue.
        items: every item sent, warm-up items first (``measured`` False): they fill the pipeline, so the
            window opens on a steady state, and their service inside the window counts as busy time.
        queue_events: per queue, ``(t_ns, +1 | -1)`` for each put and get (occupancy = running sum).
        starved_ns / blocked_ns: per stage, per worker: time waiting for an item (upstream empty) and time
            waiting to hand one on (downstream full).
        t0_ns / t_end_ns: the measurement window: the first measured send to the last one (the source
            stopping). Throughput counts completions inside it; latency covers every measured item, those
            finishing in the drain after it included.
        mode: ``closed`` (``concurrency``) or ``open`` (``schedule``: the arrival schedule's description).
        send_lag_ns: open loop: how late each send was against its intended time.
        incomplete: items still in flight at the drain deadline.
        outputs: the last stage's items of the first measured items (for the check and the Result).
        cpu_s: CPU seconds this process and its stage processes used in the window (None: unknown).
        first_errors: per stage, the first error's ``Kind: message``; capture_errors: stages whose warm-up
            inputs could not be copied (no standalone run for them).
    """

    stages: list[str]
    workers: list[int]
    executors: list[str]
    kinds: list[str]
    queue_sizes: list[int | None]
    policies: list[str]
    items: list[ItemRecord] = field(default_factory=list)
    queue_events: list[list[tuple[int, int]]] = field(default_factory=list)
    starved_ns: list[list[int]] = field(default_factory=list)
    blocked_ns: list[list[int]] = field(default_factory=list)
    t0_ns: int = 0
    t_end_ns: int = 0
    mode: str = "closed"
    concurrency: int | None = None
    schedule: dict[str, Any] | None = None
    send_lag_ns: list[int] = field(default_factory=list)
    incomplete: int = 0
    outputs: list[Any] = field(default_factory=list)
    cpu_s: float | None = None
    first_errors: dict[str, str] = field(default_factory=dict)
    capture_errors: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.stages)
        if not self.queue_events:
            self.queue_events = [[] for _ in range(n)]
        if not self.starved_ns:
            self.starved_ns = [[0] * w for w in self.workers]
        if not self.blocked_ns:
            self.blocked_ns = [[0] * w for w in self.workers]

    @property
    def window_ns(self) -> int:
        """Measurement wall time (ns), at least 1."""
        return max(1, self.t_end_ns - self.t0_ns)

    def completed(self) -> list[ItemRecord]:
        """Measured items that passed every stage."""
        return [r for r in self.items if r.done_ns >= 0 and r.measured]

    def measured(self) -> list[ItemRecord]:
        """Items sent in the window (not warm-up)."""
        return [r for r in self.items if r.measured]

    def completions_in_window(self) -> int:
        """Items (warm-up ones too) that finished inside the window: the throughput's numerator."""
        return sum(1 for r in self.items if self.t0_ns < r.done_ns <= self.t_end_ns)

    def throughput(self) -> float:
        """Completions in the window per second of window."""
        return self.completions_in_window() / (self.window_ns / 1e9)


__all__ = ["ItemRecord", "Trace"]
