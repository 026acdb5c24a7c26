"""From a :class:`~.trace.Trace` to the figures: per-stage service, utilisation, queues, blocked and starved
time, the GIL check, the bottleneck, the "twice as fast" estimate, buffer sizes and worker counts.

Definitions (a stage ``s`` with ``w_s`` workers, window ``T`` = the measurement wall time):

- utilisation: busy time / (w_s * T), busy time = the sum of its service times.
- capacity in the pipeline: w_s / mean service (items/s); alone: measured separately (``standalone``).
- bottleneck: the busiest stage, and only one at least 50 % busy; else the source limits (too few items in
  flight, or too low a rate) and no stage is named.
- twice as fast (Amdahl over stages): the bottleneck's capacity doubled, the pipeline then reaches the lowest
  of the other stages' capacities, the CPU bound (effective CPUs / CPU seconds per item with the bottleneck's
  share halved) and, in a closed loop, Little's law (concurrency / the sum of the service times). An
  estimate, labelled so.
- buffer rule (the seeds' ring-buffer rule): ceil(latency gap / slowest stage time) + 2, the latency gap being
  the difference between the producer's and the consumer's per-item service time (mean service / workers).
- workers: for a target cycle time C, w_s = ceil(S_s / C); C is the smallest cycle the machine's effective
  CPUs sustain: sum_s S_s * cores_s / C <= CPUs (cores_s: CPU time per wall time of the stage, x intra-op
  threads for a model), and no CPU-bound stage gets more busy workers than CPUs (a waiting one, at most 4 x CPUs).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..stats import latency_summary
from .trace import Trace

BUSY_FLOOR = 0.5  # a stage under 50 % busy is never named the bottleneck
OVERHEAD_RATIO = 0.9  # the pipeline below 0.9 x its slowest stage alone: "pipeline overhead"
GIL_RATIO = 0.75  # CPU time / service wall time under this, with threads running Python: waiting (GIL)
MAX_SPANS = 40
MAX_SERIES = 400


def _summary_ms(ns: list[int]) -> dict[str, Any] | None:
    return latency_summary(ns) if ns else None


def occupancy(events: list[tuple[int, int]], t0: int, t1: int) -> dict[str, Any]:
    """Time-weighted occupancy of a queue over ``[t0, t1]`` from its put (+1) / get (-1) events.

    Returns ``mean``, ``p95`` (time-weighted), ``max``, ``share_empty`` and the step series ``t_s``/``depth``
    (downsampled to at most 400 points, the maxima kept).
    """
    if not events:
        return {"mean": 0.0, "p95": 0, "max": 0, "share_empty": 1.0, "t_s": [], "depth": []}
    ev = sorted(events)
    t = np.asarray([e[0] for e in ev], dtype=np.int64)
    depth = np.maximum(np.cumsum([e[1] for e in ev]), 0)
    t = np.clip(t, t0, t1)
    dur = np.diff(np.append(t, t1)).astype(np.float64)
    head = max(0, int(t[0] - t0))  # empty before the first put
    total = dur.sum() + head
    if total <= 0:
        return {"mean": float(depth.mean()), "p95": int(depth.max()), "max": int(depth.max()), "share_empty": 0.0,
                "t_s": [], "depth": []}
    inside = dur > 0  # states held for some time inside the window (pre-window states count from t0 on)
    peak = int(depth[inside].max()) if inside.any() else 0
    order = np.argsort(depth, kind="stable")
    cum = (np.cumsum(dur[order]) + head) / total
    p95 = int(depth[order][min(len(order) - 1, int(np.searchsorted(cum, 0.95)))])
    step = max(1, math.ceil(len(t) / MAX_SERIES))
    idx = np.arange(0, len(t), step)
    keep = [int(i + np.argmax(depth[i:i + step])) for i in idx if dur[i:i + step].sum() > 0 or t[i] > t0]
    return {"mean": float((depth * dur).sum() / total), "p95": p95, "max": peak,
            "share_empty": float((dur[depth == 0].sum() + head) / total),
            "t_s": [round((int(t[k]) - t0) / 1e9, 6) for k in keep], "depth": [int(depth[k]) for k in keep]}


def stage_figures(tr: Trace, s: int) -> dict[str, Any]:
    """One stage's block of ``metrics.stages`` (see docs/results-schema.md, "pipeline")."""
    name, w = tr.stages[s], tr.workers[s]
    t0, t1 = tr.t0_ns, tr.t_end_ns
    ran = [r for r in tr.items if r.start[s] >= 0 and r.end[s] >= 0 and r.measured]
    service = [r.end[s] - r.start[s] for r in ran]
    waits = [r.deq[s] - r.enq[s] for r in ran if r.enq[s] >= 0]
    handover = [r.handover[s] for r in ran if r.error is None or r.error[0] != name]
    hop = [r.out[s] - r.end[s] for r in ran if r.out[s] >= 0 and (r.error is None or r.error[0] != name)]
    busy = cpu = 0.0  # inside the window, warm-up and drain items included (an item's CPU pro rata)
    stuck = 0
    for r in tr.items:
        a, b = r.start[s], r.end[s]
        if a >= 0 and b < 0:  # still in service when the run ended: busy to the end of the window
            stuck += 1
            busy += max(0, t1 - max(a, t0))
        elif a >= 0 and b > a:
            inside = max(0, min(b, t1) - max(a, t0))
            busy += inside
            cpu += r.cpu[s] * inside / (b - a)
    win = tr.window_ns
    errors: dict[str, int] = {}
    for r in tr.items:
        if r.error and r.error[0] == name and r.measured:
            errors[r.error[1]] = errors.get(r.error[1], 0) + 1
    mean_service = sum(service) / len(service) if service else None
    occ = occupancy(tr.queue_events[s], tr.t0_ns, tr.t_end_ns)
    size = tr.queue_sizes[s]
    spans_from = ran[:: max(1, math.ceil(len(ran) / MAX_SPANS))]
    return {
        "index": s, "kind": tr.kinds[s], "executor": tr.executors[s], "workers": w, "items": len(ran),
        "service_ms": _summary_ms(service), "queue_wait_ms": _summary_ms(waits),
        "handover_ms": _summary_ms(handover) if tr.executors[s] == "processes" else None,
        "hop_ms_mean": (sum(hop) / len(hop) / 1e6) if hop else None,
        "utilisation": busy / (w * win),
        "starved_share": sum(tr.starved_ns[s]) / (w * win), "blocked_share": sum(tr.blocked_ns[s]) / (w * win),
        "starved_s": sum(tr.starved_ns[s]) / 1e9, "blocked_s": sum(tr.blocked_ns[s]) / 1e9,
        "cpu_per_wall": (sum(r.cpu[s] for r in ran) / sum(service)) if sum(service) else None, "cpu_cores": cpu / win,
        "capacity_items_per_s": (w * 1e9 / mean_service) if mean_service else None,
        "errors": {"count": sum(errors.values()), "by_kind": errors, "first": tr.first_errors.get(name)},
        "in_service_at_end": stuck,
        "rejected": sum(1 for r in tr.items if r.rejected == name and r.measured),
        "queue": {"size": size, "policy": tr.policies[s],
                  "share_full": None if size is None else _share_at_least(tr.queue_events[s], tr.t0_ns, tr.t_end_ns, size),
                  **occ},
        "spans": [[r.index, r.worker[s], round((r.start[s] - tr.t0_ns) / 1e9, 6), round((r.end[s] - tr.t0_ns) / 1e9, 6)]
                  for r in spans_from],
    }  # fmt: skip


def _share_at_least(events: list[tuple[int, int]], t0: int, t1: int, level: int) -> float:
    if not events:
        return 0.0
    ev = sorted(events)
    t = np.clip(np.asarray([e[0] for e in ev], dtype=np.int64), t0, t1)
    depth = np.cumsum([e[1] for e in ev])
    dur = np.diff(np.append(t, t1)).astype(np.float64)
    return float(dur[depth >= level].sum() / max(1, t1 - t0))


def bottleneck(stages: dict[str, dict[str, Any]]) -> tuple[str | None, str]:
    """The busiest stage if it is at least 50 % busy, with the reason; ``(None, why)`` otherwise."""
    busy = sorted(stages.items(), key=lambda kv: -kv[1]["utilisation"])
    if not busy:
        return None, "no stages"
    name, fig = busy[0]
    if fig["utilisation"] < BUSY_FLOOR:
        return None, (f"no stage is {BUSY_FLOOR:.0%} busy (the busiest, {name!r}, {fig['utilisation']:.0%}): the"
                      f" source limits: more items in flight (--concurrency) or a higher --request-rate")
    return name, f"{name!r} is {fig['utilisation']:.0%} busy, the busiest stage"


def what_if_faster(stages: dict[str, dict[str, Any]], name: str, *, cpus: int, cpu_s_per_item: float | None,
                   concurrency: int | None, rate: float | None, factor: float = 2.0) -> dict[str, Any]:
    """The pipeline's throughput if stage ``name`` were ``factor`` times faster (see the module docstring).

    Returns ``{"stage", "factor", "items_per_s", "limited_by"}``: the estimate and what would limit it then.
    """
    bounds: dict[str, float] = {}
    for n, f in stages.items():
        cap = f["capacity_items_per_s"]
        if cap:
            bounds[f"stage {n!r}"] = cap * (factor if n == name else 1.0)
    b = stages[name]
    if cpu_s_per_item and b["service_ms"] and b["cpu_per_wall"] is not None:
        own = b["service_ms"]["mean"] / 1e3 * b["cpu_per_wall"]
        need = cpu_s_per_item - own * (1 - 1 / factor)
        if need > 0:
            bounds["the CPUs"] = cpus / need
    if concurrency:
        total = sum((f["service_ms"]["mean"] / 1e3) / (factor if n == name else 1.0)
                    for n, f in stages.items() if f["service_ms"])
        if total > 0:
            bounds[f"concurrency {concurrency} (Little's law)"] = concurrency / total
    if rate:
        bounds["the request rate"] = rate
    if not bounds:
        return {"stage": name, "factor": factor, "items_per_s": None, "limited_by": None}
    lim = min(bounds, key=bounds.__getitem__)
    return {"stage": name, "factor": factor, "items_per_s": bounds[lim], "limited_by": lim}


def buffer_advice(stages: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per queue (the input queue of every stage after the first): the occupancy it needed against its size and
    the seeds' rule ``ceil(latency gap / slowest stage time) + 2``, with a recommendation."""
    names = list(stages)
    per_item = {n: (f["service_ms"]["mean"] / f["workers"]) if f["service_ms"] else 0.0 for n, f in stages.items()}
    slowest = max(per_item.values(), default=0.0)
    out = {}
    for i, n in enumerate(names[1:], 1):
        q = stages[n]["queue"]
        gap = abs(per_item[names[i - 1]] - per_item[n])
        rule = (math.ceil(gap / slowest) if slowest > 0 else 0) + 2
        size = q["size"]
        if size is None:
            text = f"unbounded; it held at most {q['max']} (p95 {q['p95']}): bound it at {max(rule, q['p95'])}"
        elif (q.get("share_full") or 0) > 0.5:
            why = (f"{n!r} itself waits on a full queue downstream {stages[n]['blocked_share']:.0%} of the time"
                   f" (back-pressure from the bottleneck)" if stages[n]["blocked_share"] > 0.3
                   else f"{names[i - 1]!r} is faster than {n!r}")
            text = (f"full {q['share_full']:.0%} of the time: {why}; a larger queue only adds waiting"
                    f" (Little's law), {rule} (the rule) is enough")
        elif q["max"] < size and size > rule:
            text = f"never more than {q['max']} of {size}: {rule} (the rule) holds the same"
        else:
            text = f"size {size}, it held up to {q['max']} (p95 {q['p95']}); the rule gives {rule}"
        out[n] = {"size": size, "needed_max": q["max"], "needed_p95": q["p95"], "latency_gap_ms": gap,
                  "slowest_stage_ms": slowest, "rule_size": rule, "advice": text}
    return out


def worker_advice(service_s: dict[str, float], cores: dict[str, float], cpus: int) -> dict[str, Any]:
    """Worker counts that balance the pipeline on ``cpus`` effective CPUs (see the module docstring).

    Args:
        service_s: per stage, mean service time of one item on one worker (s).
        cores: per stage, CPU cores one busy worker uses (0 < c; 1 for CPU-bound Python, intra-op threads
            for a model).
        cpus: effective CPUs.

    Returns:
        ``{"workers": {stage: n}, "cycle_ms": C, "items_per_s": 1 / C, "limited_by": "the CPUs" | stage}``.
    """
    if not service_s:
        return {"workers": {}, "cycle_ms": None, "items_per_s": None, "limited_by": None}
    t_cpu = sum(service_s[n] * cores[n] for n in service_s) / max(1, cpus)
    cap = {n: max(1, min(4 * cpus, math.floor(cpus / max(cores[n], 1e-3)))) for n in service_s}
    t_stage = {n: service_s[n] / cap[n] for n in service_s}
    worst = max(t_stage, key=t_stage.__getitem__)
    cycle = max(t_cpu, t_stage[worst])
    workers = {n: max(1, math.ceil(service_s[n] / cycle - 1e-9)) for n in service_s}
    return {"workers": workers, "cycle_ms": cycle * 1e3, "items_per_s": 1 / cycle if cycle > 0 else None,
            "limited_by": "the CPUs" if t_cpu >= t_stage[worst] else f"stage {worst!r}"}


__all__ = ["BUSY_FLOOR", "GIL_RATIO", "OVERHEAD_RATIO", "bottleneck", "buffer_advice", "occupancy",
           "stage_figures", "what_if_faster", "worker_advice"]
