"""The dynamic batcher's batch-formation rule: pure, shared by the server and any simulator of it.

Batch formation (:func:`decide`) is a pure function of the queue, the time and
the policy, so tests check it exactly on :class:`~inferperf.clock.FakeClock`.
It follows Triton's ``DynamicBatchScheduler::GetDynamicBatch``
(triton-inference-server/core ``src/dynamic_batch_scheduler.cc``; docs:
``docs/user_guide/batcher.md`` "Dynamic Batcher"), evaluated when a model
instance is free:

* requests join in arrival order (FIFO); ``max_batch_size`` counts rows;
* a request whose non-batch dims or datatypes differ from the batch's first
  request ends the batch (no padding, no reordering: ragged requests run apart);
  so does one that would take the batch past ``max_batch_size`` rows;
* with no ``preferred_batch_size``, Triton's config normalisation makes it
  ``[max_batch_size]``; reaching a preferred size dispatches at once (the
  largest one reached); when the next request would pass the largest preferred
  size, what is gathered before it is dispatched at once;
* otherwise the batch waits until ``max_queue_delay_us`` after the OLDEST
  waiting request's arrival (0 = never wait), then goes with all it gathered.

With dynamic batching off each request is its own batch. The asyncio queue that calls :func:`decide` is
:class:`inferperf.serve.batcher.DynamicBatcher`; capacity planning simulates the same rule.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol


@dataclass(frozen=True)
class BatchPolicy:
    """How batches are formed (Triton's ``dynamic_batching`` settings, times in ns).

    Attributes:
        max_batch_size: most rows in one model call (>= 1; a model without a batch dim uses 1
            and ``dynamic=False``).
        dynamic: Triton's ``dynamic_batching {}``; False = one request per batch.
        max_queue_delay_ns: how long the oldest waiting request may wait for more rows (ns; 0 = never).
        preferred_batch_sizes: row counts that dispatch at once (sorted, each <= ``max_batch_size``);
            empty = ``(max_batch_size,)`` as Triton normalises it.
    """

    max_batch_size: int = 1
    dynamic: bool = False
    max_queue_delay_ns: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()

    @property
    def preferred(self) -> tuple[int, ...]:
        """Preferred sizes in force: the configured ones, else ``(max_batch_size,)``."""
        return self.preferred_batch_sizes or (self.max_batch_size,)


class Queued(Protocol):
    """What :func:`decide` reads of a waiting request."""

    rows: int
    key: Hashable
    arrival_ns: int


class Decision(NamedTuple):
    """Result of :func:`decide`.

    ``take``: how many requests from the head of the queue form the batch to dispatch now (0 = none);
    ``wait_until_ns``: when ``take`` is 0 and the queue is not empty, the time (ns, clock of the
    arrivals) at which the oldest request's delay expires; None otherwise.
    """

    take: int
    wait_until_ns: int | None


def decide(queue: Sequence[Queued], now_ns: int, policy: BatchPolicy, flush: bool = False) -> Decision:
    """Which requests to dispatch now, given the queue (oldest first), the time and the policy.

    Called when a model instance is free. Pure: no clock, no I/O.

    Args:
        queue: waiting requests in arrival order.
        now_ns: the current time (ns, same clock as ``arrival_ns``).
        policy: the batching rules.
        flush: dispatch what can be gathered without waiting (shutdown drain).

    Returns:
        A :class:`Decision`.
    """
    if not queue:
        return Decision(0, None)
    if not policy.dynamic:
        return Decision(1, None)
    preferred = policy.preferred
    max_preferred = max(preferred)
    key = queue[0].key
    pending_rows = pending_n = 0
    best_n = 0  # requests in the best batch found that may go at once (a preferred size, or saturated)
    send_now = False
    for req in queue:
        rows = max(1, req.rows)
        if pending_n:
            if pending_rows + rows > max_preferred and best_n == 0:
                best_n = pending_n  # the next request would pass every preferred size
            if pending_rows + rows > policy.max_batch_size or req.key != key:
                send_now = True  # the batch cannot grow: full, or the next request is ragged
                break
        pending_rows += rows
        pending_n += 1
        if pending_rows in preferred:
            best_n = pending_n
    delay_exceeded = policy.max_queue_delay_ns > 0 and now_ns - queue[0].arrival_ns >= policy.max_queue_delay_ns
    if best_n and not delay_exceeded:
        return Decision(best_n, None)
    if send_now or pending_rows >= max_preferred or delay_exceeded or policy.max_queue_delay_ns == 0 or flush:
        return Decision(pending_n, None)
    return Decision(0, queue[0].arrival_ns + policy.max_queue_delay_ns)


__all__ = ["BatchPolicy", "Decision", "Queued", "decide"]
