"""Serving stack and metrics cost (issue 12, items 4 and 7): uvicorn's loop x HTTP parser, and metrics on/off.

Run: ``python benchmarks/serve_stack.py [--rounds 5] [--seconds 4]`` (needs Debian's ``wrk``:
``bash scripts/install_mlserver.sh`` installs it).

Arms, each ``inferperf serve`` batching off, intra-op 1, pinned to CPU ``--server-cpu`` (default 0):
uvicorn on uvloop + httptools (inferperf's default when installed), asyncio + httptools, uvloop + h11,
asyncio + h11 (``--loop`` / ``--http``), and the default stack with ``--no-metrics``. The one client is
Debian's ``wrk`` (1 thread) pinned to CPU ``--client-cpu`` (default 1), cycling ``--bodies`` distinct
binary-extension bodies (benchmarks/serve_bodies.lua) on 127.0.0.1. Models: onnxruntime's ``mul_1``
([3,2] FP32: the model costs ~5 us, so the stack is nearly all of a request) and zoo:squeezenet at
1x3x224x224 (~7 ms a run: the realistic case). Every arm runs all the time; each round visits every
(model, arm, concurrency) point once in a seeded shuffled order, waiting for the previous server to go
idle, so drift falls on all arms alike. Figures: medians over rounds with [min, max] of requests/s and
wrk's p50; ratios are per round against the default arm of the same round, then the median.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import _probes, load_models, run_wrk  # noqa: E402
from serve_peers.arms import InferperfArm, Model  # noqa: E402
from serve_peers.bodies import tensors, write_bodies  # noqa: E402

#: (key, label, extra flags)
ARMS = [
    ("uvloop+httptools", "uvloop + httptools (default)", ["--loop", "uvloop", "--http", "httptools"]),
    ("asyncio+httptools", "asyncio + httptools", ["--loop", "asyncio", "--http", "httptools"]),
    ("uvloop+h11", "uvloop + h11", ["--loop", "uvloop", "--http", "h11"]),
    ("asyncio+h11", "asyncio + h11", ["--loop", "asyncio", "--http", "h11"]),
    ("no-metrics", "uvloop + httptools, --no-metrics", ["--loop", "uvloop", "--http", "httptools", "--no-metrics"]),
]
DEFAULT = "uvloop+httptools"


def tiny_model() -> Model:
    """onnxruntime's bundled mul_1.onnx: X [3,2] FP32, no batch dim."""
    import onnxruntime as ort

    path = Path(ort.__file__).parent / "datasets" / "mul_1.onnx"
    return Model("mul_1 [3,2]", "mul_1", str(path), path, "X", (3, 2), [], 0)


def summarize(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Median [min, max] of req/s and p50 over rounds; errors summed."""
    rps = [p["rps"] for p in points]
    p50 = [p["p50_ms"] for p in points]
    return {"rps": (statistics.median(rps), min(rps), max(rps)), "p50": (statistics.median(p50), min(p50), max(p50)),
            "errors": sum(p["errors"] for p in points)}


def main() -> None:
    """Run the benchmark described in the module docstring and print its tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--bodies", type=int, default=64)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="raw figures as JSON")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    concs = [int(c) for c in args.concurrency.split(",")]
    models = [tiny_model(), *load_models(["zoo:squeezenet"], 1)]
    started = datetime_now()
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="inferperf-serve-stack-"))
    raw: dict[str, dict[str, dict[int, list[dict[str, Any]]]]] = {}
    for model in models:
        mdir = work / model.name
        mdir.mkdir()
        xs = tensors(model.shape, args.bodies)
        bodies = write_bodies(mdir / "binary", model.input, xs, "binary")
        probe = _probes(model.input, xs[0])
        arms = [InferperfArm(key, label, ("binary",), args.server_cpu, extra=extra) for key, label, extra in ARMS]
        raw[model.label] = {a.key: {c: [] for c in concs} for a in arms}
        try:
            for a in arms:
                a.start(model, mdir, probe)
            rng = random.Random(args.seed)
            for r in range(args.rounds):
                order = [(a, c) for a in arms for c in concs]
                rng.shuffle(order)
                for a, c in order:
                    waited = a.wait_idle()
                    point = run_wrk(f"http://127.0.0.1:{a.port}", bodies, f"/v2/models/{model.name}/infer", c,
                                    args.seconds, args.client_cpu)
                    raw[model.label][a.key][c].append(point)
                    print(f"round {r + 1} {model.label} {a.key} c={c}: {point['rps']:.0f} req/s p50 "
                          f"{point['p50_ms']:.3f} ms errors {point['errors']} (idle wait {waited:.1f} s)", file=sys.stderr, flush=True)
        finally:
            for a in arms:
                a.stop()
    meta = {"started": started, "finished": datetime_now(), "load_before": load_before, "load_after": os.getloadavg(),
            "rounds": args.rounds, "seconds": args.seconds, "server_cpu": args.server_cpu,
            "client_cpu": args.client_cpu, "bodies": args.bodies}
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "raw": raw}, indent=1, default=str))
    print(markdown(raw, meta, concs))


def datetime_now() -> str:
    """Now, UTC, ISO 8601 to the second."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _fmt(t: tuple[float, float, float], digits: int) -> str:
    return f"{t[0]:.{digits}f} [{t[1]:.{digits}f}, {t[2]:.{digits}f}]"


def markdown(raw: dict[str, Any], meta: dict[str, Any], concs: list[int]) -> str:
    """The BENCHMARKS.md section: one table per model, ratios to the default arm paired by round."""
    lines = [f"Command: `python benchmarks/serve_stack.py --rounds {meta['rounds']} --seconds {meta['seconds']:g}`"
             f" ({meta['started']} to {meta['finished']}, load average {meta['load_before'][0]:.2f} before,"
             f" {meta['load_after'][0]:.2f} after; servers on CPU {meta['server_cpu']}, wrk on CPU"
             f" {meta['client_cpu']}; {meta['bodies']} distinct binary bodies; batching off, intra-op 1).", ""]
    for label, arms in raw.items():
        lines += [f"#### {label}", "", "| arm | conc. | req/s | p50 ms | req/s / default (paired) | errors |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for key, by_conc in arms.items():
            for c in concs:
                s = summarize(by_conc[c])
                base = arms[DEFAULT][c]
                ratios = [p["rps"] / b["rps"] for p, b in zip(by_conc[c], base, strict=True) if b["rps"] > 0]
                ratio = (statistics.median(ratios), min(ratios), max(ratios)) if ratios else (0.0, 0.0, 0.0)
                name = next(lbl for k, lbl, _ in ARMS if k == key)
                lines.append(f"| {name} | {c} | {_fmt(s['rps'], 1)} | {_fmt(s['p50'], 3)} | {_fmt(ratio, 3)} |"
                             f" {s['errors']} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
