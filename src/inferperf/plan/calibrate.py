"""A served replica's own cost under load (issue 39 item 2): CPU time per thread role, per request and per model
call, and the run-queue waits, from a short served run at two or more loads on the replica's own CPUs.

Each step drives open-loop Poisson load at one rate at the replica (:func:`.validate.served`: pinned as the plan
costs it) and reads, before and after, every server thread's ``schedstat`` (:mod:`inferperf.measure.threads`:
CPU ns and run-queue wait ns, by role from the names the server gives its threads) and the model's statistics
(Triton's statistics extension: requests, rows, model calls). Per step (:func:`step_cost`):

- the event loop's CPU per request (HTTP, decode, encode, batching) and its run-queue wait per request;
- the instances' CPU per model call (the thread calling the runtime, and the runtime's own pool threads);
- each role's share of the replica's cores (its utilisation: the utilisation law U = X x D holds by construction
  on these figures, so a simulator fed them is checked against the same U).

Why two loads: a cost measured at one stream under-predicts at high load (BENCHMARKS.md, "Capacity plans:
predicted vs measured": squeezenet's server time per request grew with the load). :func:`split_loop_cost` splits
the event loop's CPU into a per-request and a per-batch part by least squares over the steps when their mean
batch sizes differ (batching on), and reports it per request only when they do not (batching off).

Left out of the measurement: waits for Python's GIL (a thread waiting on it sleeps; it is not on a run queue).
The simulator models the GIL itself from the loop's CPU and the instances' Python parts per call (``call_in_ms``,
``call_out_ms``: the server's ``compute_input`` and ``compute_output`` per call, wall time, fitted per call and
per row over the steps: :func:`python_part`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..clock import monotonic_s
from ..measure.threads import ThreadTimes, by_role, read_threads, thread_delta

#: fractions of the replica's predicted capacity a calibration runs at
CALIBRATION_LOADS = (0.3, 0.7)
#: the pilot step's rate (requests/s) when the capacity is the model calls' alone (no serve overhead known): low
#: enough for any replica's event loop (it costs tenths of a millisecond of CPU per request, so one core carries
#: thousands per second), high enough for a few hundred requests in a step
PILOT_RATE_PER_S = 200.0


def pilot_rate(capacity_per_s: float, loads: Sequence[float] = CALIBRATION_LOADS) -> float | None:
    """The pilot step's rate (requests/s) before steps at ``loads`` x ``capacity_per_s`` when that capacity is the
    model calls' alone: :data:`PILOT_RATE_PER_S`, or None when the first step is no faster (the pilot would only
    repeat it). Why: a replica whose event loop is its bottleneck carries far less than its calls do (tiny-cnn:
    calls for 31,240 req/s, the replica 2,000-2,700), so a first step at 30 % of the calls' capacity overloads it
    and measures a queue, not a cost; the pilot's loop CPU per request bounds the capacity the steps use."""
    return PILOT_RATE_PER_S if min(loads) * capacity_per_s > PILOT_RATE_PER_S else None


def _stats_counts(doc: dict[str, Any]) -> dict[str, int]:
    """``{"requests", "rows", "executions"}`` from a model's statistics entry (Triton's extension)."""
    return {"requests": int(doc["inference_stats"]["success"]["count"]), "rows": int(doc["inference_count"]),
            "executions": int(doc["execution_count"])}


def _python_parts(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float | None]:
    """Mean ms per model call of the instance's Python parts between two reads of a model's statistics: batch
    assembly (``compute_input``) and the split per request (``compute_output``), from ``batch_stats`` (one count per
    call there; the top-level figures count per request). None when no call ran. Wall time: on a busy replica it
    holds the thread's waits for a core and for the GIL too."""
    def per_call(doc: dict[str, Any], key: str) -> tuple[int, int]:
        rows = doc.get("batch_stats") or []
        return sum(int(b[key]["ns"]) for b in rows), sum(int(b[key]["count"]) for b in rows)

    out: dict[str, float | None] = {}
    for key, name in (("compute_input", "call_in_ms"), ("compute_output", "call_out_ms")):
        (ns1, c1), (ns0, c0) = per_call(after, key), per_call(before, key)
        out[name] = (ns1 - ns0) / (c1 - c0) / 1e6 if c1 > c0 else None
    return out


def step_cost(before: dict[int, ThreadTimes], after: dict[int, ThreadTimes], stats_before: dict[str, Any],
              stats_after: dict[str, Any], seconds: float, cores: int, rate_per_s: float) -> dict[str, Any]:
    """One calibration step's figures from two reads of the server's threads and statistics ``seconds`` apart.

    Returns:
        ``{"rate_per_s", "seconds", "requests", "rows", "executions", "throughput_per_s", "mean_batch_requests",
        "roles": by_role, "loop_cpu_ms_per_request", "loop_wait_ms_per_request", "loop_wakeups_per_request"
        (the loop's voluntary context switches per request: its sleeps in ``epoll_wait``, and its waits for the
        GIL), "call_cpu_ms" (instance +
        pool CPU per model call), "call_wait_ms", "call_in_ms", "call_out_ms" (the instance's Python parts per
        call: :func:`_python_parts`), "utilisation": {role: CPU ns / (seconds x 1e9)},
        "replica_utilisation": all server threads' CPU / (seconds x cores)}``; per-request and per-call figures
        are None when the step served nothing.

    Raises:
        ValueError: ``seconds`` or ``cores`` not positive.
    """
    if not seconds > 0 or cores < 1:
        raise ValueError("a calibration step needs seconds > 0 and cores >= 1")
    roles = by_role(thread_delta(before, after))
    a, b = _stats_counts(stats_after), _stats_counts(stats_before)
    n = {k: a[k] - b[k] for k in a}
    loop = roles.get("event-loop", {"cpu_ns": 0, "wait_ns": 0})
    calls = [v for k, v in roles.items() if k.startswith(("instance-", "pool-"))]
    call_cpu, call_wait = sum(v["cpu_ns"] for v in calls), sum(v["wait_ns"] for v in calls)
    per = lambda x, k: x / n[k] / 1e6 if n[k] else None  # noqa: E731 - ns per count -> ms
    return {"rate_per_s": rate_per_s, "seconds": seconds, **n, "throughput_per_s": n["requests"] / seconds,
            "mean_batch_requests": n["requests"] / n["executions"] if n["executions"] else None, "roles": roles,
            "loop_cpu_ms_per_request": per(loop["cpu_ns"], "requests"),
            "loop_wait_ms_per_request": per(loop["wait_ns"], "requests"),
            "loop_wakeups_per_request": loop.get("wakeups", 0) / n["requests"] if n["requests"] else None,
            "call_cpu_ms": per(call_cpu, "executions"), "call_wait_ms": per(call_wait, "executions"),
            **_python_parts(stats_before, stats_after),
            "utilisation": {k: v["cpu_ns"] / (seconds * 1e9) for k, v in roles.items()},
            "replica_utilisation": sum(v["cpu_ns"] for v in roles.values()) / (seconds * 1e9 * cores)}


def split_loop_cost(steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The event loop's CPU per request and per batch (ms): least squares of ``loop CPU = a x requests +
    b x executions`` over the steps (no intercept), when the steps' requests per execution differ by 5 % or
    more; otherwise ``a`` alone (every figure per request; ``per_batch_ms`` None).

    Returns:
        ``{"per_request_ms", "per_batch_ms", "method": "regression" | "per request", "steps"}``.

    Raises:
        ValueError: no step served a request.
    """
    rows = [s for s in steps if s["requests"]]
    if not rows:
        raise ValueError("no calibration step served a request")
    req = np.array([s["requests"] for s in rows], float)
    exe = np.array([s["executions"] for s in rows], float)
    cpu = np.array([s["roles"].get("event-loop", {"cpu_ns": 0})["cpu_ns"] for s in rows], float) / 1e6
    ratio = req / np.maximum(exe, 1)
    if len(rows) >= 2 and ratio.max() >= ratio.min() * 1.05:
        (a, b), *_ = np.linalg.lstsq(np.column_stack([req, exe]), cpu, rcond=None)
        if a >= 0 and b >= 0:
            return {"per_request_ms": float(a), "per_batch_ms": float(b), "method": "regression", "steps": len(rows)}
    return {"per_request_ms": float(cpu.sum() / req.sum()), "per_batch_ms": None, "method": "per request",
            "steps": len(rows)}


def calibrate(model: str, opt: Any, capacity_per_s: float, step_s: float = 5.0,
              loads: Sequence[float] = CALIBRATION_LOADS, command: list[str] | None = None,
              progress: Callable[[str], None] | None = None, pilot: bool = False) -> dict[str, Any]:
    """Serve ``opt``'s replica for real (:func:`.validate.served`) and measure its cost at each of ``loads`` x
    its capacity for ``step_s`` seconds of Poisson arrivals (the load starts inside the step). The capacity is
    ``capacity_per_s`` for the first step, then at most what the replica's cores carry with the loop's CPU per
    request measured so far and the candidate's mean call (:func:`~inferperf.analysis.replica_options.
    replica_capacity_per_s`), so a later step does not overload a replica whose loop is its bottleneck.
    ``pilot``: ``capacity_per_s`` is the model calls' alone (no serve overhead known), so a pilot step at
    :func:`pilot_rate` runs first and its loop CPU bounds the capacity of the first step too; the pilot is kept
    apart (``"pilot"``), not fitted: the steps stay at ``loads``.

    Returns:
        ``{"steps": [step_cost(...) + "client_share_ms"], "pilot": the pilot's step_cost or None,
        "loop": split_loop_cost(...), "placement",
        "server_cpus": n, "client_share_ms": the client's share of its latency at the lowest load that measured
        it (:func:`~inferperf.loadgen.breakdown.client_share_ms`),
        "decode_ms", "encode_ms": the server's mean decode and encode times over the run (None without its
        Result)}``.

    Raises:
        UsageError, MeasurementError: as :func:`.validate.served` and the load.
    """
    import httpx

    from ..loadgen.options import LoadConfig
    from ..loadgen.run import load
    from .validate import REQUEST_TIMEOUT_MS, _load_shapes, served

    from ..analysis.replica_options import alone_factor, replica_capacity_per_s
    from ..loadgen.breakdown import client_share_ms

    steps: list[dict[str, Any]] = []
    c = opt.candidate
    with served(model, opt) as (url, name, stop, placement):
        pid = stop.pid

        def stats() -> dict[str, Any]:
            return httpx.get(f"{url}/v2/models/{name}/stats", timeout=10).json()["model_stats"][0]

        def step(rate: float, what: str) -> dict[str, Any]:
            if progress:
                progress(f"calibrate: {rate:.4g} req/s ({what}) for {step_s:g} s")
            lc = LoadConfig(url=url, model=name, protocol="binary", request_rate=[rate], arrival="poisson",
                            duration_s=step_s, shapes=_load_shapes(opt), warmup_s=0.0, max_trials=1,
                            timeout_ms=REQUEST_TIMEOUT_MS)
            s0, t0, th0 = stats(), monotonic_s(), read_threads(pid)
            rs = load(lc, command=command)
            th1, t1, s1 = read_threads(pid), monotonic_s(), stats()
            return {**step_cost(th0, th1, s0, s1, t1 - t0, len(placement["server_cpus"]), rate),
                    "client_share_ms": client_share_ms((rs[0].metrics.server or {}).get("breakdown_ms"))
                    if rs else None}

        def bounded(capacity: float, last: dict[str, Any] | None) -> float:
            if last is None or not last["loop_cpu_ms_per_request"]:
                return capacity
            return min(capacity, replica_capacity_per_s(
                len(placement["server_cpus"]), c.instances, c.threads, last["loop_cpu_ms_per_request"],
                c.service.mean_ns(1) * alone_factor(c) / 1e6))

        rate0 = pilot_rate(capacity_per_s, loads) if pilot else None
        first = step(rate0, "pilot: the loop's cost bounds the capacity") if rate0 is not None else None
        capacity_per_s = bounded(capacity_per_s, first)
        for f in loads:
            capacity_per_s = bounded(capacity_per_s, steps[-1] if steps else None)
            steps.append(step(capacity_per_s * f, f"{f * 100:.0f} % of capacity"))
        r = stop()
        server = (r.metrics.server if r is not None else None) or {}
    share = next((st["client_share_ms"] for st in steps if st["client_share_ms"] is not None), None)
    return {"steps": steps, "pilot": first, "loop": split_loop_cost(steps), "placement": placement,
            "server_cpus": len(placement["server_cpus"]), "client_share_ms": share,
            **{k: (server.get(k) or {}).get("mean") for k in ("decode_ms", "encode_ms")}}


def batching_arm(options: Sequence[Any]) -> Any | None:
    """The batching-on option a calibration serves beside batching off: among ``options`` with ``dynamic`` on, the
    largest ``max_batch_size``, then the longest ``max_queue_delay`` (the widest spread of requests per call, so
    :func:`split_loop_cost` can tell per request from per call); None when there is none."""
    on = [o for o in options if getattr(o.policy, "dynamic", False)]
    return max(on, key=lambda o: (o.policy.max_batch_size, o.policy.max_queue_delay_ns), default=None)


def calibrate_arms(model: str, off: Any, on: Any | None, capacity_per_s: Callable[[Any, Any], float],
                   step_s: float = 5.0, command: list[str] | None = None,
                   progress: Callable[[str], None] | None = None, pilot: bool = False) -> dict[str, Any]:
    """:func:`calibrate` ``off`` (batching off), then ``on`` (batching on, if any) at loads of the capacity the
    first calibration predicts for it, merged (:func:`merge_calibrations`): the loop's CPU split into its
    per-request and per-call parts. ``capacity_per_s(option, overhead)``: a replica's predicted capacity with
    that overhead (None for the first: the uncalibrated one), e.g. a :class:`~inferperf.analysis.fleet.Simulator`'s.
    ``pilot``: the uncalibrated capacity knows no serve overhead (the model calls' alone), so the first
    calibration starts with a pilot step (:func:`calibrate`).

    Raises:
        as :func:`calibrate`.
    """
    first = calibrate(model, off, capacity_per_s(off, None), step_s=step_s, command=command, progress=progress,
                      pilot=pilot)
    if on is None:
        return merge_calibrations([first], [off.label])
    if progress:
        progress(f"calibrate the batching-on replica {on.label} (the loop's per-call part)")
    loop = calibrated_overhead(first, "calibration")
    second = calibrate(model, on, capacity_per_s(on, loop), step_s=step_s, command=command, progress=progress)
    return merge_calibrations([first, second], [off.label, on.label])


def merge_calibrations(cals: Sequence[dict[str, Any]], labels: Sequence[str]) -> dict[str, Any]:
    """Several replicas' calibrations (:func:`calibrate`, one per batching arm of the same model and cores) as one:
    every step (each with its replica's ``label``) in one :func:`split_loop_cost`, so batching off (one request
    per call) and on (several) tell the loop's per-request part from its per-call part; the client's share,
    placement and decode/encode times are the first calibration's (batching off's, where it leads).

    Raises:
        ValueError: no calibration, or ``labels`` not one per calibration; as :func:`split_loop_cost`.
    """
    if not cals or len(cals) != len(labels):
        raise ValueError("merge_calibrations needs one label per calibration, and at least one")
    steps = [{**st, "label": lab} for cal, lab in zip(cals, labels, strict=True) for st in cal["steps"]]
    return {**cals[0], "steps": steps, "loop": split_loop_cost(steps), "replicas": list(labels)}


def calibrated_overhead(cal: dict[str, Any], source: str) -> Any:
    """The calibrated loop as the planner's :class:`~inferperf.analysis.candidates.Overhead` (``calibrated``):
    the loop's CPU per request (:func:`split_loop_cost`), its part after the call the server's mean encode time
    (at most the whole), the rest before the batcher; its CPU per model call where the split found one
    (``loop_batch_ms``; else 0: all of it per request); and the instances' Python parts per call (``call_in_ms``,
    ``call_out_ms``, each per call and per row: :func:`python_part`), which the simulator runs under the GIL.
    ``source``: where the calibration is saved."""
    from ..analysis.candidates import Overhead
    from ..analysis.service_model import Deterministic

    total = float(cal["loop"]["per_request_ms"])
    out = min(float(cal.get("encode_ms") or 0.0), total)
    parts = {k: python_part(cal.get("steps", []), k) for k in ("call_in_ms", "call_out_ms")}
    return Overhead(Deterministic(max(1, round((total - out) * 1e6))), total, [source], loop_out_ms=out,
                    calibrated=True, loop_batch_ms=float(cal["loop"].get("per_batch_ms") or 0.0),
                    call_in_ms=parts["call_in_ms"][0], call_in_per_row_ms=parts["call_in_ms"][1],
                    call_out_ms=parts["call_out_ms"][0], call_out_per_row_ms=parts["call_out_ms"][1])


def python_part(steps: Sequence[dict[str, Any]], key: str) -> tuple[float, float]:
    """An instance's Python part per call (``key``: ``call_in_ms`` or ``call_out_ms``) as ``(per call, per row)``
    ms: least squares of the steps' figures on their mean rows per call (batch assembly and the split grow with
    the rows), both parts >= 0; with one batch size among the steps, its mean per call and 0 per row; (0, 0)
    when no step measured it."""
    pts = [(float(st["mean_batch_requests"]), float(st[key])) for st in steps
           if st.get(key) is not None and st.get("mean_batch_requests")]
    if not pts:
        return 0.0, 0.0
    rows, ms = (np.array(v) for v in zip(*pts, strict=True))
    if rows.max() < rows.min() * 1.05:
        return float(ms.mean()), 0.0
    per_row, base = np.polyfit(rows, ms, 1)
    if base < 0:  # through the origin: all of it per row
        return 0.0, float(max(0.0, (rows @ ms) / (rows @ rows)))
    if per_row < 0:
        return float(ms.mean()), 0.0
    return float(base), float(per_row)


__all__ = ["CALIBRATION_LOADS", "batching_arm", "calibrate", "calibrate_arms", "calibrated_overhead", "merge_calibrations", "python_part", "split_loop_cost", "step_cost"]
