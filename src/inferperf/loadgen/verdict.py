"""The verdict of one load step beyond the honest-client rules: target lost, error rate, overload (pure).

Two questions are kept apart (issue 23 item 1):

- **INVALID** (``validity.valid`` false, ``validity.reasons``): the measurement cannot be trusted.
  Besides the generator-bound, unstable and no-success rules of :mod:`.result`, a step is INVALID when
  the target was lost (the step ended because it stopped answering, ``StepSamples.lost``, or its last
  window completed nothing while connections failed) or when the requests sent in the span that failed
  in it are more than ``max_error_rate`` of the requests sent in the span (default :data:`MAX_ERROR_RATE`, 1 %;
  ``--max-error-rate`` changes it).
- **OVERLOADED** (``validity.overloaded``; the measurement is valid): an open-loop step whose target
  fell behind the load offered to it. Any of:

  1. achieved rate (successes / span) under :data:`RATE_SHORT_FRACTION` (95 %) of the rate the
     schedule asked in the span (``scheduled_rate``);
  2. the backlog grew: requests in the system (scheduled, not answered) at the span's end minus at its
     start is more than ``max(1 % of the requests due, 3 sqrt(2 m))``, ``m`` the mean number in flight;
  3. incomplete requests are more than 1 % of those due *and* more than the steady number in flight
     explains, ``m + 3 sqrt(m)``.

  The noise floors come from the M/G/inf queue: in steady state the number of requests in the system
  is Poisson with mean ``m = lambda W`` (Little's law), so its standard deviation is ``sqrt(m)``, and a
  difference of two such counts has ``sqrt(2 m)`` (a classical result, e.g. Kleinrock, *Queueing
  Systems* vol. 1, 1975). A slow server that keeps up (``W`` long against the span) leaves ``~m``
  requests unanswered at the end: that alone is not an overload. A closed loop never offers more than
  the target answers, so it is never OVERLOADED.

Every count uses the driver's one interval convention: due in ``[start, end)``, completed in ``(start, end]``.
"""

from __future__ import annotations

import math
from typing import Any

#: failed requests above this fraction of the requests sent in the span make a step INVALID (default).
MAX_ERROR_RATE = 0.01
#: an achieved rate under this fraction of the scheduled one is an overload (open loop).
RATE_SHORT_FRACTION = 0.95
#: backlog growth or incomplete requests above this fraction of the requests due is an overload (open loop).
OVERLOAD_FRACTION = 0.01


def rules(max_error_rate: float | None) -> dict[str, float]:
    """The thresholds a load step is judged by (``validity.rules``)."""
    return {"max_error_rate": MAX_ERROR_RATE if max_error_rate is None else float(max_error_rate),
            "rate_short_fraction": RATE_SHORT_FRACTION, "overload_fraction": OVERLOAD_FRACTION}  # fmt: skip


def invalid_reasons(client: dict[str, Any], errors: int, max_error_rate: float | None = None) -> list[str]:
    """INVALID reasons from the target's side: lost, or too many failed requests.

    Args:
        client: the step's ``metrics.client`` block (``target_lost``, ``lost_reason``, ``requests_sent``).
        errors: requests sent in the span that failed in it (a subset of ``requests_sent``: a request sent in
            the warm-up that fails in the span is in ``metrics.errors`` but not here, so the share is never over
            100 %).
        max_error_rate: the highest tolerated ``errors / requests_sent`` (None: :data:`MAX_ERROR_RATE`).
    """
    out = []
    if client.get("target_lost"):
        out.append(f"target lost: {client.get('lost_reason') or 'it stopped answering'}")
    limit = MAX_ERROR_RATE if max_error_rate is None else max_error_rate
    sent = int(client.get("requests_sent") or 0)
    if errors and errors > limit * max(sent, 1):
        share = 100.0 * errors / max(sent, 1)
        out.append(f"errors: {errors} of {sent} requests sent failed ({share:.1f} %, over {100 * limit:g} %;"
                   " --max-error-rate sets the limit)")  # fmt: skip
    return out


def overload_reasons(client: dict[str, Any]) -> list[str]:
    """Why an open-loop step's target fell behind the offered load (empty: it kept up; always empty in closed
    loop). Reads ``mode``, ``achieved_rate``, ``scheduled_rate``, ``requests_due``, ``incomplete``,
    ``backlog{start, end}`` and ``littles_law.measured`` (mean in flight) of the client block."""
    if client.get("mode") != "open":
        return []
    out = []
    due = int(client.get("requests_due") or 0)
    achieved, scheduled = float(client.get("achieved_rate") or 0.0), float(client.get("scheduled_rate") or 0.0)
    if scheduled and achieved < RATE_SHORT_FRACTION * scheduled:
        out.append(f"achieved {achieved:.1f} of the {scheduled:.1f} req/s offered")
    m = float((client.get("littles_law") or {}).get("measured") or 0.0)
    backlog = client.get("backlog") or {}
    growth = int(backlog.get("end", 0)) - int(backlog.get("start", 0))
    if due and growth > max(OVERLOAD_FRACTION * due, 3.0 * math.sqrt(2.0 * m)):
        out.append(f"backlog grew by {growth} requests over the span ({backlog.get('start')} in the system at its"
                   f" start, {backlog.get('end')} at its end)")  # fmt: skip
    inc = int(client.get("incomplete") or 0)
    if due and inc > OVERLOAD_FRACTION * due and inc > m + 3.0 * math.sqrt(m):
        out.append(f"{inc} of {due} requests due ({100.0 * inc / due:.1f} %) were unanswered at the span's end,"
                   f" more than the {m:.1f} in flight on average")  # fmt: skip
    return out


__all__ = ["MAX_ERROR_RATE", "OVERLOAD_FRACTION", "RATE_SHORT_FRACTION", "invalid_reasons", "overload_reasons",
           "rules"]
