"""``inferperf plan``: from measured service times to the cheapest fleet meeting a p99 SLO, as a Result.

:func:`plan` runs five steps, each handing the next a typed record:

1. read and measure (:func:`gather` -> :class:`Inputs`): Results from ``--from`` and/or a ladder measured now in
   interleaved rounds (:mod:`.ladder`), the candidates of one workload and the server's own time
   (:mod:`inferperf.analysis.candidates`), and the spread of the runs pooled per batch size;
2. search (:func:`inferperf.analysis.fleet.search` -> :class:`Found`): the options ranked, the chosen one;
3. validate (``--validate``, :func:`check` -> :class:`Checked`): the chosen configuration run for real on the CPUs
   it is costed with (:mod:`.validate`), its points stored unless empty (:mod:`.validations`);
4. judge (:func:`judge`): the plan is INVALID when the runs it pools disagree beyond
   :data:`~inferperf.analysis.candidates.ROUND_SPREAD_LIMIT`, or when the chosen configuration's last validation on
   this machine found the prediction wrong; the reasons lead the headline;
5. write (:func:`write_plan`): the plan Result (kind ``plan``: ``metrics.plan`` holds inputs, options, curves, the
   chosen one; nothing in ``latency_ms`` or ``throughput``, which hold measurements) and the chosen per-replica
   configuration (:mod:`.deploy`).

Every predicted figure names the Results it came from and carries the validation error last measured for its
model and configuration on this machine (:mod:`.validations`), or says ``not validated``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..analysis.candidates import ROUND_SPREAD_LIMIT, Candidate, Overhead, candidates, overhead
from ..analysis.fleet import Option, PlanOptions, Simulator, options_for, search
from ..errors import UsageError
from ..fsutil import json_safe
from ..results.build import new_result
from ..results.io import save
from ..results.model import LatencySummary, Metrics, Result, Samples, SystemInfo, Throughput, Validity
from ..system import collect_system, machine_fingerprint
from .deploy import serve_settings, write
from .ladder import ladder_configs, measure, read_results
from .notes import client_share, option_doc, plan_notes
from .validations import NOT_VALIDATED, describe, key, last, misses_text, remember, wrong

Progress = Callable[[str], None] | None


@dataclass
class PlanOutcome:
    """What :func:`plan` made: the Result, where it and the deployable files are, the ranked options, and
    ``validation_wrong``: this run's ``--validate`` found the prediction wrong (the CLI exits 3)."""

    result: Result
    options: list[Option]
    chosen: Option | None
    files: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    validation_wrong: bool = False


@dataclass
class Inputs:
    """Step 1: the Results read and measured, the candidates of one workload, the server's own time."""

    results: list[tuple[Path, Result]]
    candidates: list[Candidate]
    overhead: Overhead | None
    skipped: list[str] = field(default_factory=list)


@dataclass
class Found:
    """Step 2: every option ranked (meeting the SLO first, by cost), the chosen one, the simulator used."""

    ranked: list[Option]
    chosen: Option | None
    sim: Simulator


@dataclass
class Checked:
    """Step 3: ``--validate``'s points (:func:`.validate.validate`'s document) and where they were stored (None:
    no point was measured, nothing stored or replaced)."""

    doc: dict[str, Any]
    store: Path | None

    @property
    def wrong(self) -> bool:
        """Some figure was outside its widened interval."""
        s = self.doc["summary"]
        return bool(s["points"]) and s["right"] < s["points"]


def option_key(o: Option, fingerprint: str) -> str:
    """The validation store key of ``o`` on the machine ``fingerprint``."""
    return key(fingerprint, o.candidate.example.model.sha256, serve_settings(o))


def gather(model: str, out_dir: Path, from_paths: list[str] | None, measure_ladder: dict[str, Any] | None,
           shapes: dict[str, list[int]] | None, command: list[str] | None, progress: Progress) -> Inputs:
    """Step 1: read ``--from``, measure the ladder in its rounds, build the candidates and the server's own time.

    Raises:
        UsageError: nothing to plan from, a mix of workloads, ``shapes`` matching nothing.
    """
    skipped: list[str] = []
    results = read_results(from_paths, skipped) if from_paths else []
    if measure_ladder:
        rounds = int(measure_ladder.get("rounds", 1))
        cfgs = ladder_configs(measure_ladder["batch_sizes"], measure_ladder["instances"], measure_ladder["cpus"],
                              measure_ladder["duration_s"], base=measure_ladder.get("base"),
                              pin=measure_ladder.get("pin"), rounds=rounds)
        results += measure(model, cfgs, out_dir / "measured", command=command, progress=progress, rounds=rounds)
    if not results:
        raise UsageError("nothing to plan from: pass --from DIR (bench/sweep Results) or --measure")
    return Inputs(results, candidates(results, model, shapes, _file_sha256(model)), overhead(results, model), skipped)


def _file_sha256(model: str) -> str | None:
    """The sha256 of ``model`` when it names a file (a zoo name matches its Results by name)."""
    if model.startswith("zoo:") or not Path(model).is_file():
        return None
    from ..measure.facts import model_sha256

    return model_sha256(model)


def _measure_overhead(model: str, first: Option, out_dir: Path, command: list[str] | None,
                      progress: Progress) -> Overhead | None:
    """``--validate`` without a serve Result: measure the server's own time on ``first`` served for real (saved as
    ``measured/serve-overhead.json``, which a later ``--from`` reads), so the prediction includes it."""
    from .validate import measure_overhead

    if progress:
        progress("measure the server's own time per request (one served run, closed loop, one stream)")
    r = measure_overhead(model, first, command=command)
    if r is None:
        return None
    path = save(r, out_dir / "measured" / "serve-overhead.json")
    return overhead([(path, r)], model)


def _calibrate(model: str, inputs: Inputs, opts: PlanOptions, out_dir: Path, settings: dict[str, Any],
               command: list[str] | None, progress: Progress) -> tuple[Overhead | None, dict[str, Any] | None]:
    """``--calibrate``: the first candidate's replica served for real at two loads, batching off and (when the
    plan has batching-on options) on (:func:`.calibrate.calibrate_arms`), saved as ``measured/calibration.json``;
    returns the calibrated loop (:func:`.calibrate.calibrated_overhead`: per request, and per model call when
    both arms ran) and the calibration document.

    Raises:
        UsageError: no CPU left for the load beside the replica's (before measuring).
    """
    import json

    from ..analysis.fleet import Simulator
    from .calibrate import batching_arm, calibrate_arms, calibrated_overhead
    from .validate import replica_cpus

    arms = options_for(inputs.candidates[:1], opts)
    first = arms[0]  # batching off
    replica_cpus(first, sorted(os.sched_getaffinity(0)), flag="--calibrate")
    cal = calibrate_arms(model, first, batching_arm(arms),
                         lambda o, ov: Simulator(opts, ov or inputs.overhead).replica_capacity_per_s(o),
                         step_s=settings.get("step_s", 5.0), command=command, progress=progress,
                         pilot=inputs.overhead is None)
    path = out_dir / "measured" / "calibration.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**cal, "label": first.label}, indent=1, default=str))
    return calibrated_overhead(cal, str(path)), {**cal, "label": first.label, "file": str(path)}


def check(model: str, found: Found, over: Overhead | None, fp: str, out_dir: Path, settings: dict[str, Any],
          command: list[str] | None, progress: Progress) -> Checked:
    """Step 3: run the chosen option for real (:func:`.validate.validate`) and store its points under this
    machine's fingerprint (not when no point was measured).

    Raises:
        UsageError: the machine cannot give the replica its CPUs and the load one more (before measuring).
    """
    from .validate import replica_cpus, validate

    assert found.chosen is not None
    replica_cpus(found.chosen, sorted(os.sched_getaffinity(0)))
    doc = validate(model, found.chosen, found.sim, over.mean_ms if over is not None else None,
                   rounds=settings.get("rounds", 3), step_s=settings.get("step_s", 5.0), command=command,
                   progress=progress)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    store = remember(option_key(found.chosen, fp), {"measured_at": when, "summary": doc["summary"],
                                                     "label": found.chosen.label, "plan": str(out_dir / "plan.json")})
    doc["store"] = str(store) if store is not None else None
    return Checked(doc, store)


def judge(inputs: Inputs, chosen: Option | None, stored: dict[str, Any] | None) -> Validity:
    """Step 4: INVALID (reasons in the order the headline gives them) when the chosen candidate's pooled runs
    disagree beyond :data:`~inferperf.analysis.candidates.ROUND_SPREAD_LIMIT` at some batch size, or when the
    chosen configuration's last validation on this machine (``stored``) found the prediction wrong."""
    reasons = []
    if wrong(stored):
        reasons.append(f"the prediction was found wrong by validation ({stored['summary']['right']} of "  # type: ignore[index]
                       f"{stored['summary']['points']} points right): {misses_text(stored['summary'])}")  # type: ignore[index]
    cand = chosen.candidate if chosen is not None else (inputs.candidates[0] if inputs.candidates else None)
    if cand is not None:
        bad = {b: v for b, v in cand.spread().items() if not v["agree"]}
        if bad:
            reasons.append(f"the measured runs disagree beyond {ROUND_SPREAD_LIMIT * 100:.0f} %: "
                           + ", ".join(f"batch {b} p50 {min(v['p50_ms']):.3g}-{max(v['p50_ms']):.3g} ms over "
                                       f"{v['runs']} runs ({v['spread'] * 100:.1f} %)" for b, v in bad.items())
                           + ": the machine's load changed while measuring; quiet it and measure again")
    return Validity(valid=not reasons, reasons=reasons)


def write_plan(model: str, opts: PlanOptions, out_dir: Path, inputs: Inputs, found: Found,
               checked: Checked | None, fp: str, system: SystemInfo, command: list[str] | None,
               calibration: dict[str, Any] | None = None) -> PlanOutcome:
    """Step 5: the plan Result (``out_dir/plan.json``) and the chosen configuration's deployable files."""
    ranked, chosen, sim = found.ranked, found.chosen, found.sim
    said = {id(o): describe(last(option_key(o, fp))) for o in ranked}
    stored = last(option_key(chosen, fp)) if chosen is not None else None
    head = said[id(chosen)] if chosen is not None else NOT_VALIDATED
    validity = judge(inputs, chosen, stored)
    notes = plan_notes(ranked, inputs.candidates, inputs.overhead, sim, head)
    if inputs.skipped:
        notes.append(f"{len(inputs.skipped)} JSON file(s) in --from are not Results (skipped): "
                     + ", ".join(inputs.skipped[:5]) + (" ..." if len(inputs.skipped) > 5 else ""))
    name = inputs.candidates[0].model if inputs.candidates else model
    inputs_doc = {"model": model, "target_rate_per_s": opts.target_rate_per_s, "burst": opts.burst,
                  "planned_rate_per_s": opts.planned_rate_per_s, "slo_p99_ms": opts.slo_p99_ms,
                  "price_per_core_hour": opts.price_per_core_hour, "balancer": opts.balancer, "arrival": opts.arrival,
                  "sim_requests": opts.requests, "sim_duration_s": opts.duration_s, "rounds": opts.rounds,
                  "seed": opts.seed, "method": sim.method, "max_replicas": opts.max_replicas,
                  "workload": inputs.candidates[0].workload if inputs.candidates else None,
                  "ranked_by": "cost" if opts.price_per_core_hour is not None else "cores"}
    doc = {"inputs": inputs_doc, "chosen": 0 if chosen is not None else None, "validation": head,
           "valid": validity.valid, "invalid_reasons": validity.reasons,
           "options": [{**option_doc(o, inputs.overhead, opts.price_per_core_hour), "validation": said[id(o)]}
                       for o in ranked]}
    if checked is not None:
        doc["validation_points"] = checked.doc
    if calibration is not None:
        doc["calibration"] = calibration
    share = client_share(calibration, checked)
    if share is not None:
        doc["client_share"] = share
        for o in doc["options"]:
            lat = (o.get("at_planned_rate") or {}).get("latency_ms")
            if lat:
                o["at_planned_rate"]["latency_ms_client"] = {k: lat[k] + share["ms"] for k in ("p50", "p99")}
    doc = json_safe(doc)
    files: dict[str, Path] = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    if chosen is not None:
        header = (f"inferperf plan: {chosen.label}, {chosen.replicas} replica(s) for {opts.planned_rate_per_s:g} "
                  f"req/s at p99 <= {opts.slo_p99_ms:g} ms ({head})")
        files, more = write(chosen, out_dir, name, header)
        notes += more
        doc["deploy"] = {k: str(v) for k, v in files.items()}
    ex = (chosen.candidate if chosen is not None else inputs.candidates[0]).example
    result = new_result(
        kind="plan", model_sha256=ex.model.sha256,
        key_doc={"plan": inputs_doc, "candidates": [c.label for c in inputs.candidates]},
        command=command, system=system, model=ex.model, config=ex.config,
        metrics=Metrics(latency_ms=LatencySummary.empty(),
                        throughput=Throughput(queries_per_s=0.0, samples_per_s=0.0, duration_s=0.0), plan=doc),
        samples=Samples(), validity=validity, notes=notes)
    path = out_dir / "plan.json"
    save(result, path)
    return PlanOutcome(result, ranked, chosen, {"result": path, **files}, notes,
                       validation_wrong=bool(checked is not None and checked.wrong))


def plan(model: str, opts: PlanOptions, out_dir: Path, from_paths: list[str] | None = None,
         measure_ladder: dict[str, Any] | None = None, command: list[str] | None = None,
         progress: Progress = None, validate: dict[str, Any] | None = None,
         shapes: dict[str, list[int]] | None = None, calibrate: dict[str, Any] | None = None) -> PlanOutcome:
    """Plan ``model``'s fleet for ``opts`` and write ``out_dir/plan.json`` plus the chosen configuration.

    Args:
        model: zoo:NAME or ONNX file (selects the Results and the measured model).
        opts: rate, SLO, burst, price, balancer, arrivals, simulation size.
        out_dir: where the plan Result, ``serve-config.yaml``, ``triton/`` (and ``measured/``) go.
        from_paths: folders/files of Results to plan from.
        measure_ladder: ``{"batch_sizes": [...], "instances": [...], "cpus": N, "duration_s": s, "rounds": R,
            "base": BenchConfig | None, "pin": [cpu ids] | None}`` to measure now in R interleaved rounds (each run
            in a fresh process, saved under ``out_dir/measured``; ``base``: backend, shapes, dims every run starts
            from; ``pin``: CPU ids every run is pinned to).
        validate: ``{"rounds": n, "step_s": s}`` to run the chosen configuration for real at 50/70/85 % of one
            replica's predicted capacity (:func:`.validate.validate`) and store the points.
        shapes: plan only Results of these input shapes (``--shape``; the leading dim is the rows), when
            ``--from`` holds several workloads.
        calibrate: ``{"step_s": s}`` to measure the served replica's own cost under load first (:func:`_calibrate`)
            and simulate the options as the replica runs (:mod:`inferperf.analysis.replica_sim`).

    Raises:
        UsageError: bad options, ``out_dir`` an existing file, nothing to plan from, a mix of workloads, no
            candidate, or (``validate``) no CPU left for the load beside the replica's (before measuring it).
        the measuring worker's error (``--measure``).
    """
    opts.check()
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--output {out_dir}: a file of that name exists; plan writes a folder: pass a new folder name")
    system = collect_system()  # the unpinned machine: the validation pins this process to the load's CPUs
    fp = machine_fingerprint(system)
    if validate and len(os.sched_getaffinity(0)) < 2:
        raise UsageError(f"--validate serves the replica on its own CPUs and drives the load from another: this process "
                         f"has {len(os.sched_getaffinity(0))} CPU (affinity or cgroup): run it where 2 or more are free")
    if calibrate and len(os.sched_getaffinity(0)) < 2:
        raise UsageError(f"--calibrate serves the replica on its own CPUs and drives the load from another: this "
                         f"process has {len(os.sched_getaffinity(0))} CPU: run it where 2 or more are free")
    inputs = gather(model, out_dir, from_paths, measure_ladder, shapes, command, progress)
    over, calibration = inputs.overhead, None
    if calibrate and inputs.candidates:
        over, calibration = _calibrate(model, inputs, opts, out_dir, calibrate, command, progress)
        inputs.overhead = over
    if validate and over is None and inputs.candidates:
        from .validate import replica_cpus

        ranked, _ = search(inputs.candidates, opts, None, detail=0)  # refuse an option it cannot serve before measuring
        if ranked and ranked[0].replicas is not None:
            replica_cpus(ranked[0], sorted(os.sched_getaffinity(0)))
        first = options_for(inputs.candidates[:1], opts)[0]
        replica_cpus(first, sorted(os.sched_getaffinity(0)))
        over = inputs.overhead = _measure_overhead(model, first, out_dir, command, progress)
    ranked, sim = search(inputs.candidates, opts, over, progress=progress)
    found = Found(ranked, ranked[0] if ranked and ranked[0].replicas is not None else None, sim)
    checked = None
    if validate and found.chosen is not None:
        checked = check(model, found, over, fp, out_dir, validate, command, progress)
    return write_plan(model, opts, out_dir, inputs, found, checked, fp, system, command, calibration)


__all__ = ["NOT_VALIDATED", "Checked", "Found", "Inputs", "PlanOutcome", "check", "gather", "judge", "option_key",
           "plan", "write_plan"]
