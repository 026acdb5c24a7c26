"""``inferperf plan``: the cheapest fleet meeting a p99 SLO at a rate, predicted from measured service times."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..errors import GateFailed, UsageError
from . import app
from .options import Backend, Dim, Shape, build_config
from .axes import ints

Opt = typer.Option


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _pm(v: dict[str, Any]) -> str:
    lo, hi = v["interval"]
    mark = "ok" if v["right"] else "MISS"
    err = "-" if v["error"] is None else f"{v['error'] * 100:+.0f} %"  # None: nothing measured (JSON has no inf)
    if v.get("simulated"):  # p99: the rounds against the simulated range of runs of their length
        a, b = v["simulated"]
        return (f"{_ms(v['predicted'])} / {_ms(lo)}-{_ms(hi)} ({err}; every round within simulated {_ms(a)}-{_ms(b)} "
                f"for {v['requests']} requests +-{v['tolerance'] * 100:.0f} % {mark})")
    return f"{_ms(v['predicted'])} / {_ms(lo)}-{_ms(hi)} ({err}, +-{v['tolerance'] * 100:.0f} % {mark})"


def _unmet(pr: dict[str, Any]) -> str:
    """Why a p99's precision missed its target: the longest run allowed, or the arrivals budget, was reached."""
    why = "at the longest run" if pr.get("stopped") == "longest run" else "within the precision's arrivals budget"
    return f"; not within +-{pr['target'] * 100:.0f} % and settled {why}"


def print_validation(v: dict[str, Any]) -> None:
    """The ``--validate`` table: per load, predicted / measured range over the rounds, error and verdict."""
    pl = v["placement"]
    print(f"validation: one replica served for real (server CPUs {pl['server_cpus']}, load CPUs "
          f"{pl['generator_cpus']}{'' if pl['disjoint'] else ', shared'}), open-loop {v.get('arrival', 'poisson')} "
          f"arrivals, {v['rounds']} round(s) of {v['step_s']:g} s per load; predicted capacity "
          f"{v['capacity_per_s']:.4g} req/s")
    share = v.get("client_share_ms")
    print("  predicted / measured range over the rounds (error vs their median, target, verdict)"
          + (f"; latencies as the client sees them: the server's predicted + {share:.3g} ms client's share "
             "(measured at one stream before the rounds)" if share is not None else
             "; latencies as the server sees them (the client's share was not measured)"))
    for p in v["points"]:
        m = p["metrics"]
        print(f"  {p['load'] * 100:.0f} % ({p['rate_per_s']:.4g} req/s): throughput {_pm(m['throughput_per_s'])}/s; "
              f"p50 {_pm(m['p50_ms'])} ms; p99 {_pm(m['p99_ms'])} ms")
    s = v["summary"]
    where = f"stored in {v['store']}" if v.get("store") else "nothing measured: not stored, the last validation kept"
    print(f"  {s['right']} of {s['points']} loads right (every figure within its widened interval); {where}")


def print_calibration(c: dict[str, Any]) -> None:
    """``--calibrate``'s figures: per load, the replica's threads' CPU per request and per call, and their waits."""
    print(f"calibration: {c['label']} served on {c['server_cpus']} CPU(s); event loop {c['loop']['per_request_ms']:.3g} "
          f"ms CPU per request ({c['loop']['method']}); server decode {_ms(c.get('decode_ms'))} ms, encode "
          f"{_ms(c.get('encode_ms'))} ms")
    if c.get("pilot"):
        pl = c["pilot"]
        print(f"  pilot {pl['rate_per_s']:.4g} req/s (no serve overhead known): loop "
              f"{_ms(pl['loop_cpu_ms_per_request'])} ms CPU per request bounds the capacity the steps run at")
    for st in c["steps"]:
        print(f"  {st['rate_per_s']:.4g} req/s offered, {st['throughput_per_s']:.4g} served: loop "
              f"{_ms(st['loop_cpu_ms_per_request'])} ms CPU + {_ms(st['loop_wait_ms_per_request'])} ms run-queue wait "
              f"+ {st.get('loop_wakeups_per_request') or 0:.2g} wake-ups per request; instances "
              f"{_ms(st['call_cpu_ms'])} ms CPU + {_ms(st['call_wait_ms'])} ms wait per call; "
              f"replica CPU {st['replica_utilisation'] * 100:.0f} %"
              + (f"; client's share {st['client_share_ms']:.3g} ms" if st.get("client_share_ms") is not None else ""))


def print_plan(doc: dict[str, Any], notes: list[str], files: dict[str, Path]) -> None:
    """The plan as text: inputs, the chosen option and why, the runner-ups, the notes, the files written."""
    i = doc["inputs"]
    if doc.get("valid") is False:  # the reasons first: a plan the user must not act on as it stands
        print("INVALID: " + "; ".join(doc.get("invalid_reasons") or []))
    print(f"plan for {i['model']}: {i['planned_rate_per_s']:g} req/s (target {i['target_rate_per_s']:g} x burst "
          f"{i['burst']:g}), p99 <= {i['slo_p99_ms']:g} ms, {i['arrival']} arrivals, {i['balancer']} routing; "
          f"ranked by {i['ranked_by']}  [predicted, {doc['validation']}]")
    opts = doc["options"]
    meeting = [o for o in opts if o["meets_slo"]]
    if not meeting:
        print("no option meets the SLO:")
    for k, o in enumerate(meeting[:4] or opts[:4]):
        head = "chosen:    " if k == 0 and meeting else "runner-up: " if meeting else "closest:   "
        p = o["at_planned_rate"] or {}
        lat = p.get("latency_ms", {})
        cost = (f", cost {o['cost_per_hour']:.4g} per hour (cores x {i['price_per_core_hour']:g} per core-hour)"
                if o["cost_per_hour"] is not None else "")
        fleet = f"{o['replicas']} replica(s) x {o['cores_per_replica']} core(s) = {o['cores']} cores{cost}" \
            if o["meets_slo"] else (o["why_not"] or "does not meet the SLO")
        print(f"{head}{o['label']}: {fleet}")
        if lat:
            iv = o.get("intervals_95") or {}
            p99_iv = f" (95 % {_ms(iv['p99_ms'][0])}-{_ms(iv['p99_ms'][1])})" if iv else ""
            print(f"           p50 {_ms(lat['p50'])} ms, p99 {_ms(lat['p99'])} ms{p99_iv}, utilisation "
                  f"{p['utilisation'] * 100:.0f} %, mean batch {p['mean_batch_rows']:.2f} rows; p99 dominated by "
                  f"{o['dominant'].replace('_', ' ')}")
            if p.get("latency_ms_client"):
                c = p["latency_ms_client"]
                print(f"           as a client on the replica's machine sees it: p50 {_ms(c['p50'])} ms, p99 "
                      f"{_ms(c['p99'])} ms (+{doc['client_share']['ms']:.3g} ms client's share, measured by the "
                      f"{doc['client_share']['source']})")
        pr = o.get("p99_precision")
        if pr:
            print(f"           p99 over {pr['runs']} longer runs {_ms(pr['p99_ms'])} ms +-{pr['half_width'] * 100:.1f} % (95 %: "
                  f"{_ms(pr['interval'][0])}-{_ms(pr['interval'][1])} ms; {pr['arrivals']:,} arrivals each, "
                  f"the simulation's own precision{'' if pr['met'] else _unmet(pr)})"
                  + ("" if pr["meets_slo"] else f"; its upper end is over the SLO: this fleet is at its edge"))
        sim = o.get("simulation")
        if sim:
            print(f"           simulated: {sim['method']}; {sim['engine']} engine, {sim['arrivals']} arrivals "
                  f"({sim['virtual_s']:.3g} s of virtual time) per point")
        if o["limit_rate_per_s"] is not None:
            print(f"           stops meeting the SLO at about {o['limit_rate_per_s']:.4g} req/s")
        if k == 0:  # the Results behind the answer; a runner-up's are in plan.json
            print("           from " + "; ".join(f"batch {b}: {', '.join(v)}" for b, v in o["measured_from"].items()))
        print(f"           [{o['validation']}]")
    if doc.get("calibration"):
        print_calibration(doc["calibration"])
    if doc.get("validation_points"):
        print_validation(doc["validation_points"])
    for n in notes:
        print(f"note: {n}")
    for k, f in files.items():
        print(f"{k.replace('_', ' ')}: {f}")


@app.command("plan")
def plan_command(
    model: Annotated[str, typer.Argument(help="ONNX file or zoo:NAME")],
    target_rate: Annotated[float, Opt(help="requests per s the fleet must carry")] = 0.0,
    slo_p99_ms: Annotated[float, Opt(help="p99 latency to meet at target x burst, ms")] = 0.0,
    burst: Annotated[float, Opt(help="plan for target x burst (e.g. 1.3)")] = 1.0,
    price_per_core_hour: Annotated[Optional[float], Opt(help="cost of a core per hour: rank by cost")] = None,
    from_dir: Annotated[Optional[list[Path]], Opt("--from", help="Results to plan from (bench/sweep; serve for "
                                                                 "the server's own time); repeatable")] = None,
    measure: Annotated[bool, Opt("--measure", help="measure a batch-size ladder first (each run a fresh "
                                                   "process, saved in OUTPUT/measured); the default without --from")] = False,
    batch_sizes: Annotated[str, Opt(help="--measure: batch sizes")] = "1,2,4,8",
    instances: Annotated[str, Opt(help="--measure: instances side by side (threads = CPUs / instances)")] = "1,2",
    measure_duration_s: Annotated[float, Opt(help="--measure: seconds per run")] = 3.0,
    measure_rounds: Annotated[int, Opt(help="--measure: interleaved rounds of the ladder (their spread decides "
                                            "validity)")] = 3,
    backend: Backend = None,
    shape: Shape = None,
    dim: Dim = None,
    balancer: Annotated[str, Opt(help="random | round-robin | least-outstanding | power-of-two")] = "random",
    arrival: Annotated[str, Opt(help="poisson | constant | mmpp (bursty)")] = "poisson",
    sim_requests: Annotated[int, Opt(help="simulated arrivals per point")] = 20_000,
    sim_duration_s: Annotated[Optional[float], Opt(help="virtual seconds per point instead of --sim-requests "
                                                       "(arrivals = rate x duration)")] = None,
    rounds: Annotated[int, Opt(help="resampling rounds of the chosen option's interval")] = 10,
    max_replicas: Annotated[int, Opt(help="the largest fleet the search simulates")] = 100_000,
    seed: Annotated[int, Opt(help="seed of every simulation")] = 0,
    json_out: Annotated[bool, Opt("--json", help="print the plan block as JSON")] = False,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="folder (default ./inferperf-plan-MODEL)")] = None,
    validate: Annotated[bool, Opt("--validate", help="serve the chosen configuration for real and drive Poisson load "
                                                     "at 50/70/85 % of one replica's predicted capacity: predicted "
                                                     "vs measured")] = False,
    validate_rounds: Annotated[int, Opt(help="--validate: rounds (each runs every load)")] = 3,
    validate_step_s: Annotated[float, Opt(help="--validate: measured seconds per load and round")] = 5.0,
    calibrate: Annotated[bool, Opt("--calibrate", help="serve one replica for real at two loads first and measure its "
                                                       "own cost (event loop and instance CPU per request, from "
                                                       "/proc); options are then simulated as the replica runs "
                                                       "(loop, batcher and instances sharing its cores)")] = False,
    calibrate_step_s: Annotated[float, Opt(help="--calibrate: seconds per load")] = 5.0,
    fail_on_invalid: Annotated[bool, Opt("--fail-on-invalid", help="exit 3 when the plan is INVALID (its measured "
                                                                   "runs disagree, or validation found it wrong)")] = False,
) -> int:
    """Predict the cheapest configuration (replicas x threads x instances x batching) whose p99 meets the SLO at
    target x burst, by simulating the server's own batching over measured service times. Writes the plan Result,
    a serve --config file and a Triton config.pbtxt. Exit 3 when no option meets the SLO, when --validate finds the
    prediction wrong, or (--fail-on-invalid) when the plan is INVALID."""
    from ..plan import PlanOptions
    from ..plan.spec import LadderSpec, PlanSpec, ValidateSpec, gate_message, run_spec

    if target_rate <= 0 or slo_p99_ms <= 0:
        raise UsageError("plan needs --target-rate R (req/s) and --slo-p99-ms S, e.g. --target-rate 500 --slo-p99-ms 50")
    base = build_config({"backend": backend, "workload.shapes": shape, "workload.dims": dim})
    spec = PlanSpec(
        model, PlanOptions(target_rate, slo_p99_ms, burst, price_per_core_hour, balancer, arrival, sim_requests, rounds,
                           seed, duration_s=sim_duration_s, max_replicas=max_replicas),
        out_dir=output, from_paths=[str(p) for p in from_dir or []], shapes=dict(base.workload.shapes) or None,
        ladder=LadderSpec(ints(batch_sizes, "--batch-sizes"), ints(instances, "--instances"), measure_duration_s,
                          measure_rounds, base) if measure or not from_dir else None,
        validate=ValidateSpec(validate_rounds, validate_step_s) if validate else None, fail_on_invalid=fail_on_invalid,
        calibrate_step_s=calibrate_step_s if calibrate else None)
    outcome = run_spec(spec, command=["inferperf", *sys.argv[1:]],
                       progress=lambda line: print(line, file=sys.stderr, flush=True))
    doc = outcome.result.metrics.plan or {}
    if json_out:
        print(json.dumps(doc, indent=1, allow_nan=False, default=str))
    else:
        print_plan(doc, outcome.notes, outcome.files)
    gate = gate_message(spec, outcome)
    if gate:
        raise GateFailed(gate)
    return 0
