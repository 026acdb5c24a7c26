"""Capacity plans at fleet scale: how long ``inferperf plan`` takes, and what the balancer is worth.

``fleet``: measures (null backend, seeded MLP: the replayed latencies are the service times) a batch-1 and a
batch-2 ladder, then times ``inferperf plan --from`` in one process pinned to one CPU:

- random routing, 1,000 replicas' worth of rate (``--rate``, default 100,000 req/s) with 60 s of virtual time
  per simulated point (one replica stands for all: a Poisson stream split at random stays Poisson);
- random, least-outstanding and power-of-two at ``--joint-rate`` (default 10,000 req/s, about 100 replicas),
  the last two by joint simulation of the fleet; prints each plan's replicas, p99 and wall time.

``validate``: issue 27's validation matrix, through the library ``plan --validate`` runs
(:func:`inferperf.plan.validate.validate`): per model of ``--models`` (``NAME`` or ``NAME@x:1x3x640x640``), one
ladder measured on the server's share of the CPUs in ``--measure-rounds`` interleaved rounds (batch 1 and ``--batch``,
1 and 2 instances side by side; the spread of each batch size is printed with plan's verdict on it), the
server's own time measured once (one served closed-loop stream), then each of batching off / on (up to
``--batch`` rows, ``--delay-us``; ``--batching`` picks the arms) x 1 / 2 instances in one server, served for real
(server and load on disjoint CPUs) at 50/70/85 % of that replica's predicted capacity, ``--rounds`` x ``--step-s``. Prints a Markdown table:
predicted vs measured throughput, p50, p99 (median [min, max] over the rounds), |pred/meas - 1| and the verdict
(met: the range widened by the target holds the prediction). ``--json FILE`` keeps every point. ``--ceiling-s S``:
each arm's replica also served into one closed-loop saturation run of S seconds, its throughput against each
model's predicted ceiling (issue 39: within 10 %); ``--rounds 0`` runs only those.

    python benchmarks/plan.py fleet [--rate 100000] [--joint-rate 10000] [--service-ms 8]
    python benchmarks/plan.py validate [--models zoo:tiny-cnn,zoo:squeezenet] [--rounds 3] [--step-s 3]
        [--model before,after] [--instances 1] [--batching off]

``--model``: ``before`` validates issue 27's model (the server's one-stream time, judged as the server's
latency); ``after`` issue 39's (the replica calibrated under load, ``plan --calibrate``; latencies as the client
sees them: the server's prediction + the client's share measured before the rounds). Both run in one
invocation on the same ladder, each arm validated on its own rounds (their predicted capacities differ, so do
their rates).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(cmd: list[str], cpu: int | None = None) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``cmd`` (pinned to ``cpu``); (process, wall s, CPU s of the child: user + system)."""
    pre = ["taskset", "-c", str(cpu)] if cpu is not None else []
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(pre + cmd, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return p, wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def _ladder(folder: Path, service_ms: float) -> Path:
    """bench Results (null backend replaying service_ms +- 25 % at batch 1, 1.9x that at batch 2)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.models import seeded_mlp_onnx

    model = seeded_mlp_onnx(folder / "mlp.onnx")
    d = folder / "measured"
    for b, f in ((1, 1.0), (2, 1.9)):
        lat = ",".join(f"{service_ms * f * x:.3f}" for x in (0.75, 0.9, 1.0, 1.1, 1.25))
        p, _, _ = _run([sys.executable, "-m", "inferperf", "bench", str(model), "--backend", "null", "--null-latency-ms",
                     lat, "--batch-size", str(b), "--iterations", "200", "--duration-s", "1", "-o",
                     str(d / f"b{b}.json")])
        if p.returncode:
            raise SystemExit(p.stderr)
    return d


def fleet(a: argparse.Namespace) -> None:
    """Time plans at fleet scale (see the module docstring)."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    with tempfile.TemporaryDirectory() as tmp:
        d = _ladder(Path(tmp), a.service_ms)
        runs = [("random", a.rate, ["--sim-duration-s", "60"])]
        runs += [(b, a.joint_rate, ["--sim-requests", str(a.joint_requests)])
                 for b in ("random", "least-outstanding", "power-of-two")]
        print(f"service {a.service_ms:g} ms (0.75-1.25x) at batch 1, 1.9x at batch 2; each plan one process pinned to CPU {cpu}; "
              f"SLO p99 {a.slo_ms:g} ms")
        print(f"{'balancer':<18} {'rate/s':>8} {'replicas':>8} {'p99 ms':>7} {'wall s':>7} {'CPU s':>6}  method")
        for bal, rate, extra in runs:
            cmd = [sys.executable, "-m", "inferperf", "plan", "mlp", "--from", str(d), "--target-rate", str(rate),
                   "--slo-p99-ms", str(a.slo_ms), "--balancer", bal, "--rounds", "3", "--json", "-o",
                   str(Path(tmp) / f"plan-{bal}-{rate:g}"), *extra]
            p, wall, cpu_s = _run(cmd, cpu)
            if p.returncode not in (0, 3):
                raise SystemExit(p.stderr)
            doc = json.loads(p.stdout)
            o = doc["options"][0]
            p99 = (o["at_planned_rate"] or {}).get("latency_ms", {}).get("p99")
            sim = o.get("simulation") or {}
            print(f"{bal:<18} {rate:>8g} {o['replicas'] or '-':>8} {p99 or float('nan'):>7.3g} "
                  f"{wall:>7.1f} {cpu_s:>6.1f}  {sim.get('method')}; {sim.get('engine')}, {sim.get('arrivals')} arrivals/point")


def _spec(m: str) -> tuple[str, dict[str, list[int]]]:
    """``zoo:ppocr-det@x:1x3x640x640`` -> (model, shapes)."""
    model, _, shape = m.partition("@")
    if not shape:
        return model, {}
    name, _, dims = shape.partition(":")
    return model, {name: [int(d) for d in dims.split("x")]}


def _choice(flag: str, text: str, allowed: tuple[str, str]) -> list[str]:
    """``--FLAG a,b`` -> ["a", "b"], each one of ``allowed``; anything else is refused (exit 2)."""
    out = [x.strip() for x in text.split(",") if x.strip()]
    if not out or set(out) - set(allowed):
        a, b = allowed
        print(f"--{flag} takes {a}, {b} or {a},{b} (got {text!r})", file=sys.stderr)
        raise SystemExit(2)
    return out


def _arms(text: str) -> list[str]:
    """``--batching off,on`` -> ["off", "on"]."""
    return _choice("batching", text, ("off", "on"))


def _cell(v: dict, digits: int = 3) -> str:
    """``pred / med [min, max]`` of one verdict."""
    med = sorted(v["measured"])[len(v["measured"]) // 2]
    lo, hi = v["interval"]
    return f"{v['predicted']:.{digits}g} / {med:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def _ceiling(model: str, opt, seconds: float, log) -> float:  # noqa: ANN001
    """What ``opt``'s replica carries when saturated: served as :func:`inferperf.plan.validate.served` serves it
    (its own CPUs, the load on the others), one closed-loop step of ``seconds`` at 2 x instances x max batch
    connections (at least 8: every instance always has a full batch waiting); completed requests / s."""
    from inferperf.loadgen.options import LoadConfig
    from inferperf.loadgen.run import load
    from inferperf.plan.validate import REQUEST_TIMEOUT_MS, _load_shapes, served

    conc = max(8, 2 * opt.candidate.instances * max(1, opt.policy.max_batch_size))
    with served(model, opt) as (url, name, stop, _):
        rs = load(LoadConfig(url=url, model=name, protocol="binary", concurrency=[conc], duration_s=seconds,
                             warmup_s=1.0, shapes=_load_shapes(opt), max_trials=1, timeout_ms=REQUEST_TIMEOUT_MS))
        stop()
    got = float(rs[0].metrics.throughput.queries_per_s) if rs else float("nan")
    log(f"ceiling {opt.label}: closed loop, {conc} connections, {seconds:g} s: {got:.4g} req/s")
    return got


def _matrix_model(m: str, a: argparse.Namespace, ceilings: list[dict]) -> list[dict]:
    """Every (batching, instances) point of one model (see the module docstring); ``--ceiling-s``: each arm's
    closed-loop saturation run appended to ``ceilings``."""
    from inferperf.config import BenchConfig
    from inferperf.analysis.candidates import candidates, overhead
    from inferperf.analysis.fleet import Option, PlanOptions, Simulator, options_for
    from inferperf.plan.ladder import ladder_configs, measure
    from inferperf.plan.calibrate import calibrate_arms, calibrated_overhead
    from inferperf.plan.validate import measure_overhead, replica_capacity_per_s, validate as run_validation
    from inferperf.policy.batching import BatchPolicy
    from inferperf.results.io import save
    from inferperf.serve.child import split_cpus

    model, shapes = _spec(m)
    log = lambda line: print(f"  [{m}] {line}", file=sys.stderr, flush=True)  # noqa: E731
    srv = split_cpus(sorted(os.sched_getaffinity(0)))[1]
    srv_cpus = len(srv)
    base = BenchConfig.model_validate({"workload": {"shapes": shapes}})
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = ladder_configs(sorted({1, a.batch}), [int(i) for i in a.instances.split(",")], srv_cpus, a.measure_s,
                              base=base, pin=srv, rounds=a.measure_rounds)
        results = measure(model, cfgs, Path(tmp) / "measured", progress=log, rounds=a.measure_rounds)
        cands = candidates(results, model)
        spreads = {c.label: c.spread() for c in cands}  # what plan's verdict reads (INVALID beyond 10 %)
        opts = PlanOptions(target_rate_per_s=1.0, slo_p99_ms=1e6, requests=a.sim_requests)
        log("measure the server's own time (one served closed-loop stream)")
        r = measure_overhead(model, options_for(cands[:1], opts)[0])
        over = overhead([(save(r, Path(tmp) / "serve-overhead.json"), r)], model) if r is not None else None
        models = {}
        if "before" in _variants(a.model):  # issue 27's model: the server's one-stream time, the server's latency
            models["before"] = (Simulator(opts, over), over, _without_share)
        if "after" in _variants(a.model):  # issue 39's: the replica as it runs (calibrated), the client's latency
            first = options_for(cands[:1], opts)[0]
            on = Option(cands[0], BatchPolicy(max_batch_size=a.batch, dynamic=True,
                                              max_queue_delay_ns=a.delay_us * 1000)) if "on" in _arms(a.batching) else None
            cal = calibrate_arms(model, first, on, lambda o, ov: Simulator(opts, ov or over).replica_capacity_per_s(o),
                                 step_s=a.calibrate_step_s, progress=log)
            log(f"calibrated: loop {cal['loop']['per_request_ms']:.3g} ms CPU per request + {cal['loop']['per_batch_ms']}"
                f" ms per call ({cal['loop']['method']}), client's share {cal['client_share_ms']} ms")
            cover = calibrated_overhead(cal, "benchmarks/plan.py")
            models["after"] = (Simulator(opts, cover), cover, None)
        for c in sorted(cands, key=lambda c: c.instances):
            for dyn in [arm == "on" for arm in _arms(a.batching)]:
                pol = BatchPolicy(max_batch_size=a.batch, dynamic=True, max_queue_delay_ns=a.delay_us * 1000) if dyn \
                    else BatchPolicy(max_batch_size=a.batch, dynamic=False)
                opt = Option(c, pol)
                if a.ceiling_s > 0:
                    got = _ceiling(model, opt, a.ceiling_s, log)
                    ceilings.append({"model": m, "label": opt.label, "measured_per_s": got, "batching": dyn,
                                     "predicted_per_s": {name: min(sim.replica_capacity_per_s(opt),
                                                                   replica_capacity_per_s(opt, ov.mean_ms if ov else None))
                                                         for name, (sim, ov, _) in models.items()}})
                for name, (sim, ov, runner) in models.items():
                    if a.rounds < 1:
                        continue
                    log(f"validate {opt.label} ({name})")
                    v = run_validation(model, opt, sim, ov.mean_ms if ov else None, rounds=a.rounds, step_s=a.step_s,
                                       progress=log, runner=runner)
                    for p in v["points"]:
                        rows.append({"model": m, "variant": name, "label": opt.label,
                                     "batching": f"on (<= {a.batch}, {a.delay_us} us)" if dyn else "off",
                                     "instances": c.instances, "threads": c.threads,
                                     "service_b1_ms": c.service.mean_ns(1) / 1e6,
                                     "ladder_call_ms": {b: c.service.mean_ns(b) / 1e6 for b in range(1, a.batch + 1)},
                                     "overhead_ms": ov.mean_ms if ov else None, "loop_batch_ms": getattr(ov, "loop_batch_ms", None),
                                     "capacity_per_s": v["capacity_per_s"],
                                     "client_share_ms": v.get("client_share_ms"), "ladder_spread": spreads[c.label],
                                     **p})
    return rows


def _variants(text: str) -> list[str]:
    """``--model before,after`` -> the prediction models to validate."""
    return _choice("model", text, ("before", "after"))


def _without_share(*args, **kw):  # noqa: ANN002, ANN003, ANN202
    """:func:`inferperf.plan.validate.run_rounds` as before issue 39 item 4: the client's share not measured, so
    the latencies are judged as the server's prediction."""
    from inferperf.plan.validate import run_rounds

    measured, placement = run_rounds(*args, **kw)
    return measured, {k: v for k, v in placement.items() if k != "client_share_ms"}


def _print_ceilings(ceilings: list[dict]) -> None:
    """The predicted ceiling of each model against the closed-loop saturation run (issue 39 item 6: within 10 %)."""
    print("| model | option | measured req/s (closed loop) | predicted req/s: error, verdict (10 %) |")
    print("|---|---|---|---|")
    for c in ceilings:
        cells = "; ".join(f"{name} {p:.4g}: {(p / c['measured_per_s'] - 1) * 100:+.0f} %, "
                          + ("**met**" if abs(p / c["measured_per_s"] - 1) <= 0.10 else "not met")
                          for name, p in c["predicted_per_s"].items())
        print(f"| {c['model']} | {c['label']} | {c['measured_per_s']:.4g} | {cells} |")
    print()


def _print_server_side(rows: list[dict]) -> None:
    """What the server did at each point (its statistics over the step) beside what the simulator assumed: rows
    per model call predicted / measured (median over the rounds), and per batch size the runtime's mean call
    measured in the served rounds against the ladder's (the figure the simulator draws calls from)."""
    print("\n| model | model | batching | inst | load | rows per call pred / meas | call ms per batch size: served / ladder |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ch = r.get("checks") or []
        got = sorted(c["server_batch_rows"] for c in ch if c.get("server_batch_rows"))
        if not got:
            continue
        calls: dict[str, list[float]] = {}
        for c in ch:
            for b, ms in (c.get("server_call_ms") or {}).items():
                calls.setdefault(b, []).append(ms)
        cells = ", ".join(f"b{b} {sorted(v)[len(v) // 2]:.3g} / {r['ladder_call_ms'].get(int(b), float('nan')):.3g}"
                          for b, v in sorted(calls.items(), key=lambda kv: int(kv[0])))
        pred = (r.get("predicted_server") or {}).get("batch_rows")
        print(f"| {r['model']} | {r.get('variant', '-')} | {r['batching']} | {r['instances']}x{r['threads']}t "
              f"| {r['load'] * 100:.0f} % | {'-' if pred is None else f'{pred:.2f}'} / {got[len(got) // 2]:.2f} | {cells} |")


def validate(a: argparse.Namespace) -> None:
    """Issue 27's validation matrix (see the module docstring); prints the Markdown table."""
    _arms(a.batching)  # refused before anything is measured
    _variants(a.model)
    rows: list[dict] = []
    ceilings: list[dict] = []
    for m in a.models.split(","):
        rows += _matrix_model(m, a, ceilings)
    if ceilings:
        _print_ceilings(ceilings)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1, default=str))
    print("| model | model | batching | inst | service b1 ms / server ms | client share ms | load | rate/s | throughput pred / meas [min, max] "
          "| p50 ms pred / meas [min, max] | p99 ms pred / meas [min, max] | err thr / p50 / p99 | target p50 / p99 "
          "| rounds INVALID, send lag p99 max |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        mt = r["metrics"]
        err = " / ".join(f"{abs(mt[k]['error']) * 100:.0f} %" for k in ("throughput_per_s", "p50_ms", "p99_ms"))
        ok = " / ".join(("**met**" if mt[k]["right"] else "**not met**") + f" (±{mt[k]['tolerance'] * 100:.0f} %)"
                        for k in ("p50_ms", "p99_ms"))
        ov = f"{r['overhead_ms']:.3g}" if r["overhead_ms"] is not None else "-"
        ch = r.get("checks") or []
        bad = sum(not c["valid"] for c in ch)
        lag = max((c["send_lag_p99_ms"] or 0.0) for c in ch) if ch else float("nan")
        share = f"{r['client_share_ms']:.3g}" if r.get("client_share_ms") is not None else "-"
        print(f"| {r['model']} | {r.get('variant', '-')} | {r['batching']} | {r['instances']}x{r['threads']}t "
              f"| {r['service_b1_ms']:.3g} / {ov} | {share} | {r['load'] * 100:.0f} % | {r['rate_per_s']:.4g} | {_cell(mt['throughput_per_s'], 4)} "
              f"| {_cell(mt['p50_ms'])} | {_cell(mt['p99_ms'])} | {err} | {ok} | {bad} of {len(ch)}, {lag:.3g} ms |")
    _print_server_side(rows)
    seen = set()
    for r in rows:  # the ladder's spread per candidate: plan's INVALID verdict (runs disagreeing beyond 10 %)
        key = (r["model"], r["instances"])
        if key in seen or not r["ladder_spread"]:
            continue
        seen.add(key)
        sp = r["ladder_spread"]
        bad = [b for b, v in sp.items() if not v["agree"]]
        print(f"\nladder {r['model']} {r['instances']}x{r['threads']}t: "
              + ", ".join(f"batch {b} p50 {min(v['p50_ms']):.3g}-{max(v['p50_ms']):.3g} ms over {v['runs']} rounds "
                          f"({v['spread'] * 100:.0f} %)" for b, v in sp.items())
              + (f": plan INVALID (batch {', '.join(map(str, bad))} beyond 10 %)" if bad else ": plan VALID"))
    n = len(rows)
    print(f"\n{sum(r['metrics']['p50_ms']['right'] for r in rows)} of {n} p50, "
          f"{sum(r['metrics']['p99_ms']['right'] for r in rows)} of {n} p99, "
          f"{sum(r['metrics']['throughput_per_s']['right'] for r in rows)} of {n} throughput predictions right")


def main() -> None:
    """CLI."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    f = sub.add_parser("fleet")
    f.add_argument("--rate", type=float, default=100_000)
    f.add_argument("--joint-rate", type=float, default=10_000)
    f.add_argument("--joint-requests", type=int, default=2000, help="simulated arrivals per replica (joint)")
    f.add_argument("--service-ms", type=float, default=7.0)
    f.add_argument("--slo-ms", type=float, default=50.0)
    v = sub.add_parser("validate")
    v.add_argument("--models", default="zoo:tiny-cnn,zoo:squeezenet,zoo:ppocr-det@x:1x3x640x640")
    v.add_argument("--batch", type=int, default=4, help="batching on: up to this many rows")
    v.add_argument("--delay-us", type=int, default=1000, help="batching on: max_queue_delay_us")
    v.add_argument("--instances", default="1,2")
    v.add_argument("--batching", default="off,on", help="arms to run: off, on or off,on (split a long run)")
    v.add_argument("--measure-s", type=float, default=3.0, help="seconds per ladder run")
    v.add_argument("--measure-rounds", type=int, default=3, help="interleaved ladder rounds (plan --measure-rounds)")
    v.add_argument("--sim-requests", type=int, default=20_000, help="simulated arrivals per predicted point")
    v.add_argument("--rounds", type=int, default=3)
    v.add_argument("--step-s", type=float, default=3.0)
    v.add_argument("--ceiling-s", type=float, default=0.0,
                   help="per arm, a closed-loop saturation run this long, against each model's predicted ceiling"
                        " (0: none; --rounds 0: only these)")
    v.add_argument("--json", help="write every point here")
    v.add_argument("--model", default="before,after",
                   help="prediction models: before (one-stream server time, server's latency), after (calibrated "
                        "replica as it runs, client's latency), or both, each validated on its own rounds")
    v.add_argument("--calibrate-step-s", type=float, default=4.0, help="after: seconds per calibration load")
    a = ap.parse_args()
    fleet(a) if a.what == "fleet" else validate(a)


if __name__ == "__main__":
    main()
