"""``plan --validate``: the chosen per-replica configuration run for real, predicted vs measured, and the verdicts.

One replica is served for real (``inferperf serve`` in a spawned child pinned to exactly the CPUs the option is
costed with, :func:`replica_cpus`, :func:`inferperf.serve.child.own_server`, with the option's ``serve --config``
settings) and driven by open-loop ``inferperf load`` with the plan's own arrivals (Poisson, constant or the MMPP)
from the other CPUs at :data:`LOADS` of the replica's predicted capacity, for ``rounds`` rounds (each round every
load in turn). Per load the simulator predicts one
replica at the same rate, and each figure (throughput, p50, p99) gets a verdict. Without a ``serve`` Result to
read the server's own time from, :func:`measure_overhead` measures it first (one light served run), so the
prediction being checked includes it.

Verdicts:

- the measured interval is the range over the rounds, ``[min, max]``;
- widened by the target (:func:`tolerance`): ``[min x (1 - t), max x (1 + t)]``;
- the prediction is **right** when the widened interval contains it. ``error`` is predicted / median of the
  rounds - 1.
- p99 is judged against the simulated range for the same request count instead (issue 39 item 6): a p99 from a
  few thousand requests moves a lot between runs even when the model is perfect (-18 % to +42 % at 70 % with
  2,000), so the p99 of each measured round must lie inside the 95 % range of the simulated p99s of runs of
  that length (:func:`p99_range`), widened by :data:`P99_WIDEN`. A range of rounds that is merely wide (one
  round at 286 ms beside 64.8) no longer makes any prediction inside it right.
- throughput is judged at the offered rate: each round's completions per s are scaled by target / the rate its
  schedule actually offered in the measured span (a Poisson schedule offers 200 +- 14 requests in 2 s at 100/s),
  so the check compares what the server carried with what it was offered, not with the nominal rate.

Targets (issue 27): ``t`` = 10 % for p50 and throughput, 15 % for p99 at <= 70 % of capacity, 25 % for all
at 85 %. A prediction always carries the validation error last measured for it (:mod:`.validations`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..analysis.fleet import Option, Simulator, capacity_per_s
from ..config import BenchConfig
from ..errors import Interrupted
from ..interrupt import STOP, cooperative

#: fractions of one replica's predicted capacity validated
LOADS = (0.5, 0.7, 0.85)
#: the figures validated
METRICS = ("throughput_per_s", "p50_ms", "p99_ms")
#: the simulated p99 range is widened by this much before the measured rounds are held against it
P99_WIDEN = 0.15
#: runs of the measured length whose p99s give the simulated range (its 2.5th and 97.5th percentiles)
P99_WINDOWS = 200
#: a validation request unanswered after this fails (an overloaded step ends instead of waiting 30 s a request)
REQUEST_TIMEOUT_MS = 5000


def tolerance(metric: str, load: float) -> float:
    """The target |predicted / measured - 1| of ``metric`` at ``load`` (fraction of capacity): 0.10 for p50 and
    throughput and 0.15 for p99 up to 0.7, 0.25 above."""
    if load > 0.7 + 1e-9:
        return 0.25
    return 0.15 if metric == "p99_ms" else 0.10


def verdict(predicted: float, measured: Sequence[float], tol: float) -> dict[str, Any]:
    """Whether ``predicted`` lies in the measured range over the rounds widened by ``tol`` (a fraction).

    Returns:
        ``{"predicted", "measured": [per round], "interval": [min, max], "widened": [lo, hi], "tolerance",
        "error": predicted / median - 1, "right": bool}``.

    Raises:
        ValueError: no measured value, or a negative tolerance.
    """
    vals = [float(v) for v in measured]
    if not vals or tol < 0:
        raise ValueError("a verdict needs at least one measured value and a tolerance >= 0")
    lo, hi = min(vals), max(vals)
    wide = [lo * (1 - tol), hi * (1 + tol)]
    med = float(np.median(vals))
    err = predicted / med - 1 if med > 0 else float("inf")
    return {"predicted": float(predicted), "measured": vals, "interval": [lo, hi], "widened": wide,
            "tolerance": tol, "error": err, "right": bool(wide[0] <= predicted <= wide[1])}


def p99_verdict(predicted: float, measured: Sequence[float], simulated: Sequence[float], requests: int,
                widen: float = P99_WIDEN) -> dict[str, Any]:
    """Whether every measured p99 lies in ``simulated`` (the 95 % range ``[lo, hi]`` of the simulated p99s of runs
    of ``requests`` requests, :func:`p99_range`) widened by ``widen``: ``[lo x (1 - widen), hi x (1 + widen)]``.

    Returns:
        :func:`verdict`'s fields (``widened`` is the simulated range widened; ``tolerance`` is ``widen``) and
        ``simulated`` ``[lo, hi]``, ``requests``.

    Raises:
        ValueError: no measured value, a negative ``widen``, or a range that is not ``[lo <= hi]``.
    """
    lo, hi = (float(x) for x in simulated)
    if not lo <= hi:
        raise ValueError(f"a simulated range needs lo <= hi, got [{lo}, {hi}]")
    v = verdict(predicted, measured, widen)
    wide = [lo * (1 - widen), hi * (1 + widen)]
    return {**v, "widened": wide, "simulated": [lo, hi], "requests": int(requests),
            "right": all(wide[0] <= x <= wide[1] for x in v["measured"])}


def judge(load: float, rate_per_s: float, predicted: dict[str, float], rounds: list[dict[str, float]],
          p99_sim: dict[str, Any] | None = None) -> dict[str, Any]:
    """One validation point: the verdict of each of :data:`METRICS` at ``load`` (rate ``rate_per_s``).

    Args:
        predicted: ``{"throughput_per_s", "p50_ms", "p99_ms"}`` of the simulation.
        rounds: the same figures measured, one dict per round.
        p99_sim: ``{"range": [lo, hi], "requests": n}`` (:func:`p99_range`): p99 is judged by
            :func:`p99_verdict`; None: by :func:`verdict` as the others.

    Returns:
        ``{"load", "rate_per_s", "rounds", "metrics": {name: verdict}, "right": all right}``.
    """
    mets = {m: verdict(predicted[m], [r[m] for r in rounds], tolerance(m, load)) for m in METRICS}
    if p99_sim is not None:
        mets["p99_ms"] = p99_verdict(predicted["p99_ms"], [r["p99_ms"] for r in rounds], p99_sim["range"],
                                     p99_sim["requests"])
    return {"load": load, "rate_per_s": rate_per_s, "rounds": len(rounds), "metrics": mets,
            "right": all(v["right"] for v in mets.values())}


def summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"points", "right", "error": {metric: {load: error}}, "misses": [...]}`` of a validation (errors as
    fractions); ``misses`` names each figure outside its widened interval: ``{"metric", "load", "predicted",
    "interval", "error"}``."""
    errs = {m: {f"{p['load']:g}": p["metrics"][m]["error"] for p in points} for m in METRICS}
    misses = [{"metric": m, "load": p["load"], "predicted": p["metrics"][m]["predicted"],
               "interval": p["metrics"][m]["interval"], "error": p["metrics"][m]["error"]}
              for p in points for m in METRICS if not p["metrics"][m]["right"]]
    return {"points": len(points), "right": sum(p["right"] for p in points), "error": errs, "misses": misses}


def p99_range(sim: Simulator, opt: Option, rate_per_s: float, requests: int, windows: int = P99_WINDOWS) -> list[float]:
    """The 95 % range ``[2.5th, 97.5th percentile]`` (ms) of the p99 of runs of ``requests`` requests each at
    ``rate_per_s`` on one replica of ``opt``, as the validation's steps hold.

    The runs are ``windows`` consecutive windows of one seeded simulated run (seed: the plan's + 1, arrivals as the
    plan's), after a warm-up of :func:`~inferperf.analysis.fleet.steady_arrivals` arrivals (a measured step starts
    after its warm-up, not from an empty queue); fewer windows when ``windows x requests`` would pass
    :data:`~inferperf.analysis.fleet.MAX_POINT_ARRIVALS` (40 at least). Rejected requests have no latency and
    are left out, as the load's percentiles leave out errors.

    Raises:
        ValueError: ``requests`` < 2.
    """
    from ..analysis.fleet import MAX_POINT_ARRIVALS, steady_arrivals
    from ..stats import percentile

    if requests < 2:
        raise ValueError("a p99 range needs runs of at least two requests")
    windows = max(40, min(windows, MAX_POINT_ARRIVALS // requests))
    rho = min(sim.utilisation(opt, rate_per_s, 1), 0.99)
    warm = min(int(math.ceil(steady_arrivals(rho))), MAX_POINT_ARRIVALS)
    seed = sim.opts.seed + 1
    arr = sim.arrivals(rate_per_s, 1, seed, warm + windows * requests)
    run = sim.simulate(opt, arr, seed)
    lat = (run.done_ns - run.arrival_ns).astype(np.float64) / 1e6
    p99s = []
    for k in range(windows):
        w = slice(warm + k * requests, warm + (k + 1) * requests)
        ok = lat[w][~run.rejected[w]]
        if ok.size:
            p99s.append(percentile(ok, 99))
    if not p99s:
        return [math.inf, math.inf]
    return [percentile(p99s, 2.5), percentile(p99s, 97.5)]


def replica_cpus(opt: Option, available: Sequence[int], flag: str = "--validate") -> tuple[list[int], list[int]]:
    """``(load CPUs, server CPUs)`` for serving ``opt`` beside its load (``flag``: ``--validate`` or
    ``--calibrate``, named in the error): the server gets exactly the CPUs the option is costed with (the CPUs its
    ladder was pinned to when this process has them, else the first ``cores`` of ``available``), the load the rest.

    Raises:
        UsageError: ``available`` has no CPU left for the load beside the replica's (one line naming the counts
            and the fix); checked before anything is measured.
    """
    from ..errors import UsageError

    cpus, n = sorted(available), opt.candidate.cores
    if len(cpus) < n + 1:
        fix = (f"plan with --measure {flag} (the ladder then runs pinned to the server's share)" if not
               opt.candidate.cpus else "measure the ladder on fewer CPUs")
        raise UsageError(f"{flag}: {opt.candidate.label} is costed at {n} CPU(s) per replica; serving it on them "
                         f"with the load on others needs {n + 1}, this process has {len(cpus)}: run on a bigger "
                         f"machine, or {fix}")
    pinned = opt.candidate.cpus
    srv = sorted(pinned) if pinned and set(pinned) < set(cpus) else cpus[:n]
    return [c for c in cpus if c not in srv], srv


def replica_capacity_per_s(opt: Option, overhead_ms: float | None) -> float:
    """Requests per s one replica can carry at most: its instances' (mean service times), or its server worker's
    (``1000 / overhead_ms``), whichever is less."""
    cap = capacity_per_s(opt)
    return min(cap, 1000.0 / overhead_ms) if overhead_ms else cap


def _load_shapes(opt: Option) -> list[str]:
    """The measured input shapes as ``load --shape`` values, one row each (inputs with free dims need them)."""
    from .ladder import rows

    shapes = rows(dict(getattr(opt.candidate.example.config.workload, "shapes", None) or {}), 1)
    return [f"{k}:{'x'.join(map(str, v))}" if k else "x".join(map(str, v)) for k, v in shapes.items()]


def _measured(r: Any) -> dict[str, Any]:
    """The figures of :data:`METRICS` of one load step, and what says whether the step measured the server: its
    validity (``valid``, ``reasons``: e.g. generator-bound), the client's send lag p99 and CPU.

    ``throughput_per_s`` is at the target rate: completions per s x target / the rate the schedule offered in the
    measured span (``completions_per_s`` and ``offered_per_s`` keep the raw figures)."""
    lat = r.metrics.latency_ms
    c = r.metrics.client or {}
    done = float(r.metrics.throughput.queries_per_s)
    target, offered = c.get("target_rate"), c.get("scheduled_rate")
    thr = done * float(target) / float(offered) if target and offered else done
    srv = getattr(r.metrics, "server", None) or {}
    calls, rows = srv.get("executions") or 0, srv.get("inferences") or 0
    return {"throughput_per_s": thr, "p50_ms": float(lat.p50), "p99_ms": float(lat.p99),
            "completions_per_s": done, "offered_per_s": offered, "valid": bool(r.validity.valid),
            "reasons": list(r.validity.reasons), "send_lag_p99_ms": (c.get("send_lag_ms") or {}).get("p99"),
            "client_cpu_percent": c.get("client_cpu_percent"),
            # what the server did (its statistics over the step): rows per model call, a call's mean time per batch size
            "server_batch_rows": rows / calls if calls else None,
            "server_call_ms": srv.get("call_ms_by_batch")}


@contextmanager
def served(model: str, opt: Option) -> Iterator[tuple[str, str, Callable[[], Any], dict[str, Any]]]:
    """``opt``'s per-replica configuration served for real in a child pinned to the CPUs it is costed with
    (:func:`replica_cpus`), this process pinned to the others while inside; yields (url, model name, stop -> serve
    Result, placement).

    Raises:
        UsageError: no CPU left for the load, the server refuses the model or settings; MeasurementError: it
            failed to start.
    """
    from ..serve.child import own_server
    from .deploy import serve_settings
    from .ladder import rows

    doc = serve_settings(opt)
    ex = opt.candidate.example.config.workload  # the measured shapes and dims; one row per request
    cfg = BenchConfig.model_validate({"backend": doc["backend"], "session": doc["session"]})
    cfg = cfg.model_copy(update={"workload": cfg.workload.model_copy(update={
        "shapes": rows(dict(getattr(ex, "shapes", None) or {}), 1), "dims": dict(getattr(ex, "dims", None) or {}),
        "batch_size": 1})})
    gen, srv = replica_cpus(opt, sorted(os.sched_getaffinity(0)))
    with own_server(model, srv, cfg, doc["serve"]) as (url, name, stop):
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, gen)
        try:
            yield url, name, stop, {"generator_cpus": gen, "server_cpus": srv, "disjoint": not set(gen) & set(srv)}
        finally:
            os.sched_setaffinity(0, before)


def measure_overhead(model: str, opt: Option, requests: int = 300, command: list[str] | None = None) -> Any:
    """The server's own time measured: ``opt`` served for real, one closed-loop stream of ``requests`` requests
    (batches of one request: request - queue - model time is the server's work). Returns the serve Result
    (kind serve, ``metrics.server``; :func:`.service.overhead` reads it) or None if the server gave none.

    Raises:
        UsageError, MeasurementError: as :func:`served`; the load's errors.
    """
    from ..loadgen.options import LoadConfig
    from ..loadgen.run import load

    with served(model, opt) as (url, name, stop, _):
        load(LoadConfig(url=url, model=name, protocol="binary", concurrency=[1], requests=requests, warmup_s=0.5,
                        shapes=_load_shapes(opt),
                        timeout_ms=REQUEST_TIMEOUT_MS), command=command)
        return stop()


def measure_client_share(url: str, name: str, opt: Option, seconds: float = 1.0,
                         command: list[str] | None = None) -> float | None:
    """The client's share of a request's latency (ms) at the lowest load: one closed-loop stream for ``seconds``
    (after 0.3 s of warm-up) at the served replica, :func:`~inferperf.loadgen.breakdown.client_share_ms` of its
    breakdown (the client's mean latency less the server's whole exchange, both measured). None when the
    server measured no exchange or nothing succeeded.

    Raises:
        MeasurementError: the load's errors.
    """
    from ..loadgen.breakdown import client_share_ms
    from ..loadgen.options import LoadConfig
    from ..loadgen.run import load

    rs = load(LoadConfig(url=url, model=name, protocol="binary", concurrency=[1], duration_s=seconds, warmup_s=0.3,
                         shapes=_load_shapes(opt), max_trials=1, timeout_ms=REQUEST_TIMEOUT_MS), command=command)
    return client_share_ms((rs[0].metrics.server or {}).get("breakdown_ms")) if rs else None


def run_rounds(model: str, opt: Option, rates: list[float], rounds: int, step_s: float, warmup_s: float | None = None,
               command: list[str] | None = None, progress: Callable[[str], None] | None = None,
               arrival: str = "poisson") -> tuple[list[list[dict[str, float]]], dict[str, Any]]:
    """Serve ``opt``'s per-replica configuration for real (:func:`served`) and drive open-loop load with
    ``arrival`` (the plan's: ``poisson``, ``constant`` or ``mmpp``) at each rate, ``rounds`` times (a request
    unanswered after :data:`REQUEST_TIMEOUT_MS` fails: an overloaded step ends).

    ``warmup_s`` (never counted) before each step: default the step's length, at most 1 s.

    Before the rounds, :func:`measure_client_share` measures the client's share at one stream.

    Returns:
        (per round, per rate: measured figures; placement ``{"generator_cpus", "server_cpus", "disjoint",
        "client_share_ms"}``).

    Raises:
        UsageError: the server refuses the model or settings; MeasurementError: it failed or stopped answering.
    """
    from ..loadgen.options import LoadConfig
    from ..loadgen.run import load

    out: list[list[dict[str, float]]] = []
    with served(model, opt) as (url, name, stop, placement), cooperative():  # Ctrl-C ends the step, then here
        lc = LoadConfig(url=url, model=name, protocol="binary", request_rate=rates, arrival=arrival,
                        duration_s=step_s, shapes=_load_shapes(opt), warmup_s=min(1.0, step_s) if warmup_s is None else warmup_s, max_trials=1,
                        timeout_ms=REQUEST_TIMEOUT_MS)
        placement = {**placement, "client_share_ms": measure_client_share(url, name, opt, command=command)}
        for k in range(rounds):
            if STOP.requested:  # Ctrl-C / SIGTERM in a load step: it ended its step; no round follows
                raise Interrupted(f"validation interrupted ({STOP.signal_name}) in round {k} of {rounds}: nothing "
                                  "judged or stored; the plan was not written", STOP.exit_code)
            if progress:
                progress(f"validate round {k + 1}/{rounds}: {', '.join(f'{x:.4g}' for x in rates)} req/s "
                         f"({arrival}), {step_s:g} s each")
            out.append([_measured(r) for r in load(lc.model_copy(update={"seed": k}), command=command)])
        if STOP.requested:
            raise Interrupted(f"validation interrupted ({STOP.signal_name}) in round {rounds} of {rounds}: nothing "
                              "judged or stored; the plan was not written", STOP.exit_code)
        stop()
    return out, placement


def validate(model: str, opt: Option, sim: Simulator, overhead_ms: float | None, rounds: int = 3,
             step_s: float = 5.0, command: list[str] | None = None,
             progress: Callable[[str], None] | None = None,
             runner: Callable[..., tuple[list[list[dict[str, float]]], dict[str, Any]]] | None = None,
             ) -> dict[str, Any]:
    """Validate ``opt`` (one replica) at :data:`LOADS` of its predicted capacity.

    The simulator predicts the latency the server gives (its exchange: first byte read to answer handed over);
    the load measures it at the client. When the runner measured the client's share (``placement
    ["client_share_ms"]``, :func:`measure_client_share`), the predicted p50 and p99, and the simulated p99
    range, are the server's plus that share: the figures are judged as the client sees them (issue 39 item 4),
    and each point keeps the server-side prediction as ``predicted_server``.

    Args:
        runner: what measures (None: :func:`run_rounds`; tests pass scripted figures).

    Returns:
        ``{"capacity_per_s", "points": [judge(...) + "checks": per round, the step's validity, reasons, send lag
        and client CPU (:func:`_measured`)], "summary", "placement", "rounds", "step_s", "client_share_ms"}``.

    Raises:
        ValueError: ``rounds`` < 1; the runner's errors.
    """
    if rounds < 1:
        raise ValueError("--validate-rounds must be >= 1")
    cap = min(sim.replica_capacity_per_s(opt), replica_capacity_per_s(opt, overhead_ms))
    rates = [cap * f for f in LOADS]
    measured, placement = (runner or run_rounds)(model, opt, rates, rounds, step_s, command=command,
                                                 progress=progress, arrival=sim.opts.arrival)
    placement = dict(placement)
    share = placement.pop("client_share_ms", None)
    points = []
    for j, (f, rate) in enumerate(zip(LOADS, rates)):
        got = [rnd[j] for rnd in measured if j < len(rnd)]
        if not got:  # the load stopped before this step (target lost): nothing to judge
            continue
        p = sim.predict(opt, rate, 1)
        add = share or 0.0
        pred = {"throughput_per_s": p.throughput_per_s, "p50_ms": p.latency_ms["p50"] + add,
                "p99_ms": p.latency_ms["p99"] + add}
        n = max(2, round(step_s * float(np.median([g.get("completions_per_s") or rate for g in got]))))
        pt = judge(f, rate, pred, got, {"range": [x + add for x in p99_range(sim, opt, rate, n)], "requests": n})
        pt["predicted_server"] = {"p50_ms": p.latency_ms["p50"], "p99_ms": p.latency_ms["p99"],
                                  "batch_rows": p.mean_batch_rows}
        pt["checks"] = [{k: v for k, v in g.items() if k not in METRICS} for g in got]
        points.append(pt)
    return {"capacity_per_s": cap, "points": points, "summary": summary(points), "placement": placement,
            "rounds": rounds, "step_s": step_s, "arrival": sim.opts.arrival, "client_share_ms": share}


__all__ = ["LOADS", "METRICS", "P99_WIDEN", "P99_WINDOWS", "REQUEST_TIMEOUT_MS", "judge", "measure_client_share", "p99_range", "p99_verdict", "measure_overhead", "replica_capacity_per_s",
           "replica_cpus", "run_rounds", "served", "summary", "tolerance", "validate", "verdict"]
