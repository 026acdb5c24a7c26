"""What a plan document says about itself: each option as plain data, the plan's notes, what the simulated runs
held, and the client's share it adds to its latencies (:mod:`.run` writes them into the plan Result)."""

from __future__ import annotations

from typing import Any

from ..analysis.candidates import Candidate, Overhead
from ..analysis.fleet import MAX_JOINT_ARRIVALS, MMPP_MIN_S, RELAXATION_TIMES, Option, Simulator
from .validations import NOT_VALIDATED


def option_doc(o: Option, overhead_src: Overhead | None, price: float | None) -> dict[str, Any]:
    """One option as plain data (times ms, rates per s, shares 0..1)."""
    c, p = o.candidate, o.policy
    cores = o.cores()
    return {
        "label": o.label, "backend": c.backend, "threads_per_instance": c.threads, "instances": c.instances,
        "cores_per_replica": c.cores, "pinned_cpus": c.cpus, "session": c.session, "replicas": o.replicas,
        "cores": cores, "cost_per_hour": cores * price if (cores is not None and price is not None) else None,
        "batching": {"dynamic": p.dynamic, "max_batch_size": p.max_batch_size,
                     "max_queue_delay_us": p.max_queue_delay_ns // 1000},
        "meets_slo": o.replicas is not None, "why_not": o.why_not,
        "at_planned_rate": o.at_plan.to_dict() if o.at_plan is not None else None,
        "intervals_95": o.intervals, "p99_precision": o.precision, "limit_rate_per_s": o.limit_rate_per_s, "curve": o.curve,
        "dominant": o.at_plan.dominant if o.at_plan is not None else None,
        "measured_from": {str(b): v for b, v in c.sources.items()},
        "runs_spread": {str(b): v for b, v in c.spread().items()},
        "server_overhead_from": overhead_src.sources if overhead_src is not None else None,
        "invalid_sources": c.invalid, "validation": NOT_VALIDATED, "simulation": o.simulation,
    }  # fmt: skip


def plan_notes(options: list[Option], cands: list[Candidate], over: Overhead | None, sim: Simulator,
               validation: str) -> list[str]:
    """The plan's notes: whether it was validated, the server's own time it used, what each candidate's samples
    hold, the curve points past saturation, and what the simulated runs held (:func:`held`)."""
    if validation == NOT_VALIDATED:
        notes = [f"every predicted figure is {NOT_VALIDATED}: no real serve + load run has checked this configuration "
                 "on this machine (plan --validate does)"]
    else:
        notes = [f"chosen configuration: {validation}"]
    if over is None:
        notes.append("server overhead (HTTP, decode, encode) not measured: predictions leave it out; pass --from "
                     "a folder with a serve Result (inferperf serve -o) to include it")
    elif over.calibrated:
        notes.append(f"served replica calibrated under load ({', '.join(over.sources)}): event loop {over.mean_ms:.3g} "
                     f"ms CPU per request ({over.loop_out_ms:.3g} ms of it after the call)"
                     + (f" and {over.loop_batch_ms:.3g} ms per model call" if over.loop_batch_ms else "")
                     + "; options are simulated as the "
                     "replica runs (the loop and the instances sharing its cores and taking Python's GIL in turn, the "
                     "server's batcher between them)")
    else:
        notes.append(f"server overhead {over.mean_ms:.3g} ms per request, from {', '.join(over.sources)}")
    for c in cands:
        sizes = c.service.sizes
        between = sorted(x for x in c.service.outside)
        if between:
            notes.append(f"{c.label}: batches of {between} rows are outside the measured sizes {list(sizes)}: scaled "
                         "from the nearest measured size")
        notes.append(f"{c.label}: measured batch sizes {list(sizes)}; sizes between them interpolated by quantile")
        spread = c.spread()
        if spread:
            notes.append(f"{c.label}: p50 spread over the runs pooled per batch size: "
                         + ", ".join(f"batch {b} {v['spread'] * 100:.1f} % ({v['runs']} runs)" for b, v in spread.items()))
        if c.invalid:
            notes.append(f"{c.label}: {len(c.invalid)} source Result(s) not VALID (noisy runs), used as measured")
    for o in options:
        if o.curve and any(pt["past_saturation"] for pt in o.curve):
            notes.append(f"{o.label}: curve points past saturation (marked) depend on the simulated duration")
            break
    notes.append(f"simulation: {sim.method}; {sim.runs} runs, {held(sim)}")
    return notes


def held(sim: Simulator) -> str:
    """What the runs held, as simulated: ``2,000-20,000 arrivals (0.64-12 s of virtual time) a run``, and what
    set it (``--sim-requests`` / ``--sim-duration-s``, the joint cap, the stretch for a steady state)."""
    o, h = sim.opts, sim.held
    if not h:
        return "none"
    (a0, a1), (v0, v1) = h["arrivals"], h["virtual_s"]
    asked = f"--sim-duration-s {o.duration_s:g}" if o.duration_s is not None else f"--sim-requests {o.requests}"
    if o.balancer != "random":
        asked += (f" x replicas (joint: the fleet's arrivals in all), at most {max(o.requests, MAX_JOINT_ARRIVALS):,} a "
                  "run")
    rng = (lambda a, b, f: f(a) if a == b else f"{f(a)}-{f(b)}")
    return (f"{rng(a0, a1, lambda x: f'{x:,.0f}')} arrivals ({rng(v0, v1, lambda x: f'{x:.3g}')} s of virtual time) a "
            f"run: {asked}, stretched where a run needed more for a steady state ({RELAXATION_TIMES} relaxation times"
            + (f"; --arrival mmpp: {MMPP_MIN_S:g} s" if o.arrival == "mmpp" else "") + ")")


def client_share(calibration: dict[str, Any] | None, checked: Any) -> dict[str, Any] | None:
    """``{"ms", "source"}``: the client's share of a request's latency (issue 39 item 4), measured by the
    validation (one stream before its rounds) or else by the calibration (its lowest load); None when neither
    measured it. The plan's latencies are the server's (the SLO is judged on them); this share is what a client
    on the replica's machine adds."""
    if checked is not None and checked.doc.get("client_share_ms") is not None:
        return {"ms": float(checked.doc["client_share_ms"]), "source": "validation, one closed-loop stream"}
    if calibration is not None and calibration.get("client_share_ms") is not None:
        return {"ms": float(calibration["client_share_ms"]), "source": "calibration, its lowest load"}
    return None


__all__ = ["client_share", "held", "option_doc", "plan_notes"]
