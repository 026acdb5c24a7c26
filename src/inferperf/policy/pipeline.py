"""The pipeline's queue and source rules: pure functions of counts, times (ns) and settings.

One copy for the real executor (:mod:`inferperf.pipeline.engine`, threads on a clock) and its simulator
(:mod:`inferperf.pipeline.simulate`, virtual time); both drive the same state machine
(:class:`inferperf.pipeline.chain.Chain`), which asks these functions every question of policy:

- a queue of ``size`` items (None: unbounded) has room while it holds fewer (:func:`has_room`);
- a full queue ``block`` s its producer (back-pressure) or, under ``reject``, fails the item at once; a
  closed-loop source always waits at its first queue, never retrying in a hot loop (:func:`when_full`);
- the oldest waiting item goes to the lowest-numbered idle worker (:func:`pick_worker`), and blocked
  producers put their items in the order they blocked (first come, first served);
- a closed loop keeps ``concurrency`` items in flight and sends nothing while its source waits at a full
  first queue (:func:`closed_loop_may_send`);
- the source sends until both ``min_items`` measured items and ``min_duration_s`` are reached, or
  ``max_duration_s`` passes (:func:`source_stops`, :func:`source_timer_ns`); the window opens at the first
  measured send, or at ``max_duration_s`` if the warm-up never ends (:func:`warmup_expired`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass
class StopRule:
    """Send until both ``min_items`` and ``min_duration_s`` are met, or ``max_duration_s`` passes (or the
    schedule ends); then wait up to ``drain_timeout_s`` for the items in flight. Durations in seconds."""

    min_items: int = 100
    min_duration_s: float = 5.0
    max_duration_s: float = 60.0
    drain_timeout_s: float = 60.0


def has_room(size: int | None, depth: int) -> bool:
    """Whether a queue of capacity ``size`` (None: unbounded) holding ``depth`` items takes one more."""
    return size is None or depth < size


def when_full(policy: str, stage: int, closed_loop: bool) -> Literal["block", "reject"]:
    """What a full queue in front of stage ``stage`` (0-based) does with one more item under ``policy``
    (``block`` | ``reject``): a closed-loop source waits at the first queue whatever its policy."""
    if policy == "reject" and not (stage == 0 and closed_loop):
        return "reject"
    return "block"


def pick_worker(idle: Sequence[int]) -> int:
    """The idle worker (ids of one stage, any order, not empty) that takes the oldest waiting item: the lowest id.

    Raises:
        ValueError: ``idle`` is empty.
    """
    return min(idle)


def closed_loop_may_send(in_flight: int, concurrency: int, source_waiting: bool) -> bool:
    """Whether a closed-loop source sends one more item now: fewer than ``concurrency`` in flight and the
    source not waiting at a full first queue."""
    return not source_waiting and in_flight < concurrency


def source_stops(sent: int, elapsed_ns: int, rule: StopRule) -> bool:
    """Whether the source stops at ``elapsed_ns`` into the window, having sent ``sent`` measured items."""
    return (sent >= rule.min_items and elapsed_ns >= rule.min_duration_s * 1e9) or elapsed_ns >= rule.max_duration_s * 1e9


def warmup_expired(since_start_ns: int, rule: StopRule) -> bool:
    """Whether the window opens now though no measured item was sent: the warm-up took ``max_duration_s``."""
    return since_start_ns >= rule.max_duration_s * 1e9


def source_timer_ns(start_ns: int, t0_ns: int | None, sent: int, rule: StopRule) -> float:
    """When time alone can next change the source's state (ns, same clock; ``inf`` for never): the warm-up
    cap before the window opens, then ``min_duration_s`` once ``min_items`` are sent, else ``max_duration_s``."""
    if t0_ns is None:
        return start_ns + rule.max_duration_s * 1e9
    if sent >= rule.min_items:
        return t0_ns + rule.min_duration_s * 1e9
    return t0_ns + rule.max_duration_s * 1e9


__all__ = ["StopRule", "closed_loop_may_send", "has_room", "pick_worker", "source_stops", "source_timer_ns",
           "when_full", "warmup_expired"]
