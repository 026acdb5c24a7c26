"""``inferperf plan``: from measured service times to the cheapest fleet meeting a p99 SLO, as a Result.

:func:`plan` reads Results (``--from``) and/or measures a ladder (``--measure``), builds the candidates
(:mod:`.service`), searches the options (:mod:`.search`), writes the plan Result (kind ``plan``:
``metrics.plan`` holds inputs, options, curves, the chosen one; nothing in ``latency_ms`` or
``throughput``, which hold measurements) and the chosen per-replica configuration (:mod:`.deploy`).

Every predicted figure names the Results it came from and carries the validation error last measured for its
model and configuration on this machine (:mod:`.validations`), or says ``not validated``. ``validate``
(``plan --validate``) runs the chosen configuration for real first (:mod:`.validate`) and stores its points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fsutil import json_safe
from ..results.build import new_result
from ..results.io import save
from ..results.model import LatencySummary, Metrics, Result, Samples, Throughput, Validity
from ..system import collect_system, machine_fingerprint
from .validations import NOT_VALIDATED, describe, key, last, remember
from .deploy import serve_settings, write
from ..analysis.candidates import Candidate, Overhead, candidates, overhead
from ..analysis.fleet import MAX_JOINT_ARRIVALS, Option, PlanOptions, Simulator, search
from .ladder import ladder_configs, measure, read_results


@dataclass
class PlanOutcome:
    """What :func:`plan` made: the Result, where it and the deployable files are, the ranked options."""

    result: Result
    options: list[Option]
    chosen: Option | None
    files: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def option_doc(o: Option, overhead_src: Overhead | None, price: float | None) -> dict[str, Any]:
    """One option as plain data (times ms, rates per s, shares 0..1)."""
    c, p = o.candidate, o.policy
    cores = o.cores()
    doc: dict[str, Any] = {
        "label": o.label, "backend": c.backend, "threads_per_instance": c.threads, "instances": c.instances,
        "cores_per_replica": c.cores, "replicas": o.replicas, "cores": cores,
        "cost_per_hour": cores * price if (cores is not None and price is not None) else None,
        "batching": {"dynamic": p.dynamic, "max_batch_size": p.max_batch_size,
                     "max_queue_delay_us": p.max_queue_delay_ns // 1000},
        "meets_slo": o.replicas is not None, "why_not": o.why_not,
        "at_planned_rate": o.at_plan.to_dict() if o.at_plan is not None else None,
        "intervals_95": o.intervals, "limit_rate_per_s": o.limit_rate_per_s, "curve": o.curve,
        "dominant": o.at_plan.dominant if o.at_plan is not None else None,
        "measured_from": {str(b): v for b, v in c.sources.items()},
        "server_overhead_from": overhead_src.sources if overhead_src is not None else None,
        "invalid_sources": c.invalid, "validation": NOT_VALIDATED, "simulation": o.simulation,
    }
    return doc


def option_key(o: Option, fingerprint: str) -> str:
    """The validation store key of ``o`` on the machine ``fingerprint``."""
    return key(fingerprint, o.candidate.example.model.sha256, serve_settings(o))


def _notes(options: list[Option], cands: list[Candidate], over: Overhead | None, sim: Simulator,
           validation: str) -> list[str]:
    if validation == NOT_VALIDATED:
        notes = [f"every predicted figure is {NOT_VALIDATED}: no real serve + load run has checked this configuration "
                 "on this machine (plan --validate does)"]
    else:
        notes = [f"chosen configuration: {validation}"]
    if over is None:
        notes.append("server overhead (HTTP, decode, encode) not measured: predictions leave it out; pass --from "
                     "a folder with a serve Result (inferperf serve -o) to include it")
    else:
        notes.append(f"server overhead {over.mean_ms:.3g} ms per request, from {', '.join(over.sources)}")
    for c in cands:
        sizes = c.service.sizes
        between = sorted(x for x in c.service.outside)
        if between:
            notes.append(f"{c.label}: batches of {between} rows are outside the measured sizes {list(sizes)}: scaled "
                         "from the nearest measured size")
        notes.append(f"{c.label}: measured batch sizes {list(sizes)}; sizes between them interpolated by quantile")
        if c.invalid:
            notes.append(f"{c.label}: {len(c.invalid)} source Result(s) not VALID (noisy runs), used as measured")
    for o in options:
        if o.curve and any(pt["past_saturation"] for pt in o.curve):
            notes.append(f"{o.label}: curve points past saturation (marked) depend on the simulated duration")
            break
    per = (f"{sim.opts.duration_s:g} s of virtual time" if sim.opts.duration_s is not None
           else f"{sim.opts.requests} arrivals" + (" per replica" if sim.opts.balancer != "random" else ""))
    notes.append(f"simulation: {sim.method}; {sim.runs} runs of {per} each"
                 + (f" (at most {MAX_JOINT_ARRIVALS} arrivals a run)" if sim.opts.balancer != "random" else ""))
    return notes


def _measure_overhead(model: str, cands: list[Candidate], opts: PlanOptions, out_dir: Path,
                      command: list[str] | None, progress: Callable[[str], None] | None) -> Overhead | None:
    """``--validate`` without a serve Result: measure the server's own time on the first candidate served for real
    (saved as ``measured/serve-overhead.json``, which a later ``--from`` reads), so the prediction includes it."""
    from ..analysis.fleet import options_for
    from .validate import measure_overhead

    if progress:
        progress("measure the server's own time per request (one served run, closed loop, one stream)")
    r = measure_overhead(model, options_for(cands[:1], opts)[0], command=command)
    if r is None:
        return None
    path = save(r, out_dir / "measured" / "serve-overhead.json")
    return overhead([(path, r)], model)


def plan(model: str, opts: PlanOptions, out_dir: Path, from_paths: list[str] | None = None,
         measure_ladder: dict[str, Any] | None = None, command: list[str] | None = None,
         progress: Callable[[str], None] | None = None, validate: dict[str, Any] | None = None,
         shapes: dict[str, list[int]] | None = None) -> PlanOutcome:
    """Plan ``model``'s fleet for ``opts`` and write ``out_dir/plan.json`` plus the chosen configuration.

    Args:
        model: zoo:NAME or ONNX file (selects the Results and the measured model).
        opts: rate, SLO, burst, price, balancer, arrivals, simulation size.
        out_dir: where the plan Result, ``serve-config.yaml``, ``triton/`` (and ``measured/``) go.
        from_paths: folders/files of Results to plan from.
        measure_ladder: ``{"batch_sizes": [...], "instances": [...], "cpus": N, "duration_s": s, "base":
            BenchConfig | None}`` to measure now (each run in a fresh process, saved under ``out_dir/measured``;
            ``base``: backend, shapes, dims every run starts from; ``pin``: CPU ids every run is pinned to).
        validate: ``{"rounds": n, "step_s": s}`` to run the chosen configuration for real at 50/70/85 % of one
            replica's predicted capacity (:func:`.validate.validate`) and store the points.
        shapes: plan only Results of these input shapes (``--shape``; the leading dim is the rows), when
            ``--from`` holds several workloads.

    Raises:
        UsageError: bad options, nothing to plan from, no candidate for the model.
        the measuring worker's error (``--measure``).
    """
    opts.check()
    system = collect_system()  # the unpinned machine: the validation pins this process to the load's CPUs
    fp = machine_fingerprint(system)
    results = read_results(from_paths) if from_paths else []
    if measure_ladder:
        cfgs = ladder_configs(measure_ladder["batch_sizes"], measure_ladder["instances"], measure_ladder["cpus"],
                              measure_ladder["duration_s"], base=measure_ladder.get("base"),
                              pin=measure_ladder.get("pin"))
        results += measure(model, cfgs, out_dir / "measured", command=command, progress=progress)
    if not results:
        from ..errors import UsageError

        raise UsageError("nothing to plan from: pass --from DIR (bench/sweep Results) or --measure")
    cands = candidates(results, model, shapes)
    over = overhead(results, model)
    if validate and over is None and cands:
        over = _measure_overhead(model, cands, opts, out_dir, command, progress)
    ranked, sim = search(cands, opts, over, progress=progress)
    chosen = ranked[0] if ranked and ranked[0].replicas is not None else None
    checked = None
    if validate and chosen is not None:
        from datetime import datetime, timezone

        from .validate import validate as run_validation

        checked = run_validation(model, chosen, sim, over.mean_ms if over is not None else None,
                                 rounds=validate.get("rounds", 3), step_s=validate.get("step_s", 5.0),
                                 command=command, progress=progress)
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        checked["store"] = str(remember(option_key(chosen, fp), {
            "measured_at": when, "summary": checked["summary"], "label": chosen.label,
            "plan": str(out_dir / "plan.json")}))
    said = {id(o): describe(last(option_key(o, fp))) for o in ranked}
    head = said[id(chosen)] if chosen is not None else NOT_VALIDATED
    notes = _notes(ranked, cands, over, sim, head)
    name = cands[0].model if cands else model
    inputs = {"model": model, "target_rate_per_s": opts.target_rate_per_s, "burst": opts.burst,
              "planned_rate_per_s": opts.planned_rate_per_s, "slo_p99_ms": opts.slo_p99_ms,
              "price_per_core_hour": opts.price_per_core_hour, "balancer": opts.balancer, "arrival": opts.arrival,
              "sim_requests": opts.requests, "sim_duration_s": opts.duration_s, "rounds": opts.rounds, "seed": opts.seed, "method": sim.method,
              "max_replicas": opts.max_replicas,
              "ranked_by": "cost" if opts.price_per_core_hour is not None else "cores"}
    doc = {"inputs": inputs, "chosen": 0 if chosen is not None else None, "validation": head,
           "options": [{**option_doc(o, over, opts.price_per_core_hour), "validation": said[id(o)]} for o in ranked]}
    if checked is not None:
        doc["validation_points"] = checked
    doc = json_safe(doc)
    files: dict[str, Path] = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    if chosen is not None:
        header = (f"inferperf plan: {chosen.label}, {chosen.replicas} replica(s) for {opts.planned_rate_per_s:g} "
                  f"req/s at p99 <= {opts.slo_p99_ms:g} ms ({head})")
        files, more = write(chosen, out_dir, name, header)
        notes += more
        doc["deploy"] = {k: str(v) for k, v in files.items()}
    ex = (chosen.candidate if chosen is not None else cands[0]).example
    result = new_result(
        kind="plan", model_sha256=ex.model.sha256, key_doc={"plan": inputs, "candidates": [c.label for c in cands]},
        command=command, system=system, model=ex.model, config=ex.config,
        metrics=Metrics(latency_ms=LatencySummary.empty(),
                        throughput=Throughput(queries_per_s=0.0, samples_per_s=0.0, duration_s=0.0), plan=doc),
        samples=Samples(), validity=Validity(valid=True), notes=notes)
    path = out_dir / "plan.json"
    save(result, path)
    files = {"result": path, **files}
    return PlanOutcome(result, ranked, chosen, files, notes)


__all__ = ["NOT_VALIDATED", "PlanOutcome", "plan"]
