"""A plan option's replica for :mod:`.replica_sim`: its capacity in closed form (the least of its instances', its
event loop's, its GIL's and its cores' bounds: the utilisation law), the call's work alone from a time measured
beside other instances, and the replica a candidate with a calibrated loop runs as (issue 39 item 3)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .replica_sim import Replica, simulate_replica
from .service_model import Deterministic, ServiceModel
from .serving_sim import SimRun


def replica_capacity_per_s(cores: int, instances: int, threads_per_instance: int, loop_ms: float,
                           call_ms: float, rows: int = 1, loop_batch_ms: float = 0.0,
                           call_python_ms: float = 0.0) -> float:
    """Requests per s a replica carries at most with calls of ``rows`` one-row requests taking ``call_ms`` each
    in the runtime and ``call_python_ms`` in Python (batching off: ``rows`` 1): the least of its instances'
    (``instances x rows / (call + Python)``), its event loop's (``1 / (loop + loop_batch / rows)``: ``loop_ms``
    per request, ``loop_batch_ms`` per model call), its GIL's (``1 / (loop + (loop_batch + Python) / rows)``:
    the loop's work and the calls' Python parts hold it in turn) and its cores' (``cores / (loop + (loop_batch
    + Python + threads x call) / rows)``: every request needs that much CPU; the utilisation law U = X x D).
    Times in ms. With one instance the GIL's bound is not reached (the instance waits for the loop at each
    Python part; :func:`simulate_replica` has it).

    Raises:
        ValueError: a time that is not positive (``loop_batch_ms`` or ``call_python_ms`` negative), or ``rows`` < 1.
    """
    if not (loop_ms > 0 and call_ms > 0 and rows >= 1 and loop_batch_ms >= 0 and call_python_ms >= 0):
        raise ValueError("replica capacity needs loop and call times > 0 ms, per-call loop and Python times >= 0 "
                         "and rows >= 1")
    loop = loop_ms + loop_batch_ms / rows
    py = call_python_ms / rows
    return 1e3 * min(instances * rows / (call_ms + call_python_ms), 1 / loop, 1 / (loop + py),
                     cores / (loop + py + threads_per_instance * call_ms / rows))


def alone_factor(candidate: Any) -> float:
    """How much of a measured call's time is its own work: ``min(1, cores / (instances x threads))``.

    The ladder runs a candidate's instances side by side, each calling in a closed loop on the replica's own
    CPUs (:func:`inferperf.plan.ladder.ladder_configs`), so with more runnable threads than cores each measured
    call already holds its share of the others' (2 instances of 1 thread on 1 core: squeezenet 8.5 ms a call
    against 4.2 ms alone). The simulator shares the cores itself, so it takes the call's work alone: the
    measured time x this factor. Without it the sharing was counted twice (squeezenet 2 instances on 1 core:
    capacity predicted 108/s against about 200 measured)."""
    want = candidate.instances * candidate.threads
    return min(1.0, candidate.cores / want) if want > 0 else 1.0


class Scaled:
    """A :class:`~inferperf.analysis.service_model.ServiceModel` whose times are ``inner``'s x ``factor``."""

    def __init__(self, inner: Any, factor: float) -> None:
        self.inner, self.factor = inner, float(factor)

    def sample_ns(self, rows: int, u: np.ndarray) -> np.ndarray:
        """``inner``'s times for these uniforms, scaled (int64 ns)."""
        return np.round(self.inner.sample_ns(rows, u) * self.factor).astype(np.int64)

    def mean_ns(self, rows: int) -> float:
        """``inner``'s mean at ``rows`` rows, scaled."""
        return float(self.inner.mean_ns(rows)) * self.factor

    def describe(self) -> dict[str, Any]:
        """``inner``'s description with the factor."""
        return {**self.inner.describe(), "scaled_by": self.factor}


def _alone(candidate: Any, service: Any) -> Any:
    f = alone_factor(candidate)
    return service if f >= 1.0 else Scaled(service, f)


def replica_of(candidate: Any, calibrated: Any) -> Replica:
    """The replica a plan candidate runs as, with a calibrated loop (an ``Overhead`` with ``calibrated``): its
    per-request and per-call parts, each call's Python parts, and the GIL."""
    def fixed(ms: float | None, per_row_ms: float | None = 0.0) -> Deterministic | None:
        ns, per_row = round((ms or 0.0) * 1e6), round((per_row_ms or 0.0) * 1e6)
        return Deterministic(ns, per_row) if ns + per_row > 0 else None

    get = lambda k: getattr(calibrated, k, 0.0)  # noqa: E731 - fields an older Overhead may lack
    return Replica(candidate.cores, candidate.instances, calibrated.model, fixed(calibrated.loop_out_ms),
                   candidate.threads, fixed(get("loop_batch_ms")), fixed(get("call_in_ms"), get("call_in_per_row_ms")),
                   fixed(get("call_out_ms"), get("call_out_per_row_ms")), gil=True)


def simulate_option(arrivals_ns: Any, opt: Any, calibrated: Any, service: ServiceModel, seed: int) -> SimRun:
    """A plan option's one replica (``opt.candidate``: cores, instances, threads) as it runs, with the calibrated
    loop, calls drawn from ``service`` as their work alone (:func:`alone_factor`; :func:`simulate_replica`)."""
    return simulate_replica(arrivals_ns, replica_of(opt.candidate, calibrated), _alone(opt.candidate, service),
                            seed=seed, policy=opt.policy)[0]


def option_capacity_per_s(candidate: Any, calibrated: Any, policy: Any = None) -> float:
    """:func:`replica_capacity_per_s` of a plan candidate with the calibrated loop (per request, and per model call
    where the calibration split it), its calls' mean times taken as their work alone (:func:`alone_factor`): at one row with batching off (``policy`` None or ``dynamic`` off),
    else at the measured batch size up to ``policy.max_batch_size`` that gives the most (a saturated batcher
    sends full batches)."""
    dynamic = policy is not None and getattr(policy, "dynamic", False)
    measured = getattr(candidate.service, "sizes", None) or range(1, policy.max_batch_size + 1) if dynamic else ()
    sizes = [b for b in measured if b <= policy.max_batch_size] if dynamic else [1]
    f = alone_factor(candidate)
    per_call = float(getattr(calibrated, "loop_batch_ms", 0.0) or 0.0)
    get = lambda k: float(getattr(calibrated, k, 0.0) or 0.0)  # noqa: E731
    py = lambda b: get("call_in_ms") + get("call_out_ms") + b * (get("call_in_per_row_ms") + get("call_out_per_row_ms"))  # noqa: E731
    return max(replica_capacity_per_s(candidate.cores, candidate.instances, candidate.threads, calibrated.mean_ms,
                                      candidate.service.mean_ns(b) * f / 1e6, rows=b, loop_batch_ms=per_call,
                                      call_python_ms=py(b)) for b in sizes or [1])


__all__ = ["Scaled", "alone_factor", "option_capacity_per_s", "replica_capacity_per_s", "replica_of", "simulate_option"]
