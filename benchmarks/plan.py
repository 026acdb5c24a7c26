"""Capacity plans at fleet scale: how long ``inferperf plan`` takes, and what the balancer is worth.

``fleet``: measures (null backend, seeded MLP: the replayed latencies are the service times) a batch-1 and a
batch-2 ladder, then times ``inferperf plan --from`` in one process pinned to one CPU:

- random routing, 1,000 replicas' worth of rate (``--rate``, default 100,000 req/s) with 60 s of virtual time
  per simulated point (one replica stands for all: a Poisson stream split at random stays Poisson);
- random, least-outstanding and power-of-two at ``--joint-rate`` (default 10,000 req/s, about 100 replicas),
  the last two by joint simulation of the fleet; prints each plan's replicas, p99 and wall time.

``validate``: ``inferperf plan MODEL --validate`` for each model of ``--models`` (see docs/plan.md).

    python benchmarks/plan.py fleet [--rate 100000] [--joint-rate 10000] [--service-ms 8]
    python benchmarks/plan.py validate [--models zoo:tiny-cnn] [--rounds 3] [--step-s 3]
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


def validate(a: argparse.Namespace) -> None:
    """``plan --validate`` per model; prints each plan's validation table."""
    for m in a.models.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "inferperf", "plan", m, "--target-rate", str(a.target_rate), "--slo-p99-ms",
                   str(a.slo_ms), "--batch-sizes", a.batch_sizes, "--instances", a.instances, "--measure-duration-s",
                   str(a.measure_s), "--validate", "--validate-rounds", str(a.rounds), "--validate-step-s",
                   str(a.step_s), "-o", str(Path(tmp) / "plan")]
            p, wall, _ = _run(cmd)
            print(f"== {m} ({wall:.0f} s, exit {p.returncode})")
            print(p.stdout)
            if p.returncode not in (0, 3):
                print(p.stderr[-2000:])


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
    v.add_argument("--models", default="zoo:tiny-cnn")
    v.add_argument("--target-rate", type=float, default=100)
    v.add_argument("--slo-ms", type=float, default=50.0)
    v.add_argument("--batch-sizes", default="1,4")
    v.add_argument("--instances", default="1")
    v.add_argument("--measure-s", type=float, default=2.0)
    v.add_argument("--rounds", type=int, default=3)
    v.add_argument("--step-s", type=float, default=3.0)
    a = ap.parse_args()
    fleet(a) if a.what == "fleet" else validate(a)


if __name__ == "__main__":
    main()
