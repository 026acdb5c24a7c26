"""Serving benchmark (issue 12): `inferperf serve` against its peers and the in-process ceiling.

Run: ``python benchmarks/serve.py [--rounds 2] [--seconds 5] [--quick]``; peers and client come from
``bash scripts/install_mlserver.sh`` (MLServer venv, wrk, py-spy).

Setup, for each model (zoo:squeezenet at 1x3x224x224; PP-OCR mobile cls at 1x3x48x192, a ~0.8 ms/row model
whose 560 KB JSON body makes the JSON path dominate (issue 29); PP-OCRv4 det at 1x3x640x640): every server is a
subprocess pinned to CPU ``--server-cpu`` (default 0) with one intra-op thread; the one neutral client,
Debian's ``wrk`` (1 thread, ``--latency``), is pinned to CPU ``--client-cpu`` (default 1) and cycles
``--bodies`` (>= 64) distinct pre-built request bodies through benchmarks/serve_bodies.lua, on 127.0.0.1.
Arms (benchmarks/serve_peers/arms.py): inferperf serve with dynamic batching off; on (``--max-batch-size
8 --dynamic-batching --max-queue-delay-us 2000`` unless ``--batch-flags``); a minimal per-request
``session.run`` app (Starlette + uvicorn, stdlib json); MLServer with a custom ONNX Runtime runtime and
adaptive batching (max_batch_size 8, max_batch_time 2 ms; JSON only: its REST server has no binary
extension). Each arm is measured with binary-extension bodies and JSON bodies where it accepts them, at
each ``--concurrency``. The ceiling is ``inferperf bench`` in-process, intra-op 1, pinned to the same CPU,
at batch 1 and at the max batch size; the JSON floor is a bare simdjson parse of the same bodies on the same
CPU (:func:`run_parse`). Every point (arm x encoding x concurrency, and the ceilings) runs
once per round in a seeded shuffled order, so the machine's drift falls on all arms alike; figures are
medians over rounds (throughput in requests/s = rows/s here, p50/p99 from wrk's histogram).

Then: added latency at concurrency 1 with batching off (wrk p50 minus in-process bench p50 at batch 1)
for a tiny tensor (onnxruntime's mul_1, [3,2]) and for squeezenet's 224x224 binary tensor; JSON throughput
against the stdlib-json app; the cost of metrics when `inferperf serve` has a switch for them. Raw
numbers go to ``--out`` (JSON); the Markdown tables are printed at the end for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_peers.arms import Arm, InferperfArm, Model, available_arms, post  # noqa: E402
from serve_peers.bodies import binary_body, decode_response, json_body, tensors, write_bodies  # noqa: E402
from serve_peers.report import markdown  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LUA = ROOT / "benchmarks" / "serve_bodies.lua"


def load_models(names: list[str], max_batch: int) -> list[Model]:
    """Resolve the benchmark's models (zoo names or ``zoo:NAME@1x3xHxW``) to batchable files."""
    import onnxruntime as ort

    from inferperf import zoo
    from inferperf.config import SessionOptions
    from inferperf.measure.batching import make_batchable, needs_batching
    from inferperf.workload.signature import file_sha256

    models = []
    for spec in names:
        zname, _, shape_s = spec.partition("@")
        path = zoo.resolve(zname)
        if needs_batching(path, max_batch):
            path, _ = make_batchable(path, file_sha256(path), max_batch, "onnxruntime", SessionOptions())
        inp = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_inputs()[0]
        shape = tuple(int(d) for d in shape_s.split("x")) if shape_s else tuple(
            d if isinstance(d, int) else 1 for d in inp.shape)
        flags = ["--shape", f"{inp.name}:{shape_s}"] if shape_s else []
        short = zname.removeprefix("zoo:")
        label = f"{short} {shape[-1]}"
        models.append(Model(label, short.replace("-", "_"), zname, Path(path), inp.name, shape, flags, max_batch))
    return models


def run_wrk(url: str, bodies: Path, path: str, conc: int, seconds: float, cpu: int) -> dict[str, Any]:
    """One wrk point: requests/s of 2xx answers, p50/p99 ms, error counts (from the Lua done() line)."""
    cmd = ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{conc}", f"-d{seconds:g}s", "--timeout", "60s", "--latency",
           "-s", str(LUA), url, "--", str(bodies), path]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    m = re.search(r"^WRK_JSON (\{.*\})$", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stdout[-800:]} {proc.stderr[-800:]}")
    w = json.loads(m.group(1))
    errors = w["connect_errors"] + w["read_errors"] + w["write_errors"] + w["status_errors"] + w["timeouts"]
    ok = w["requests"] - w["status_errors"]
    return {"rps": ok / (w["duration_us"] / 1e6), "p50_ms": w["p50_us"] / 1e3, "p99_ms": w["p99_us"] / 1e3,
            "requests": w["requests"], "errors": errors, "raw": w}


def run_bench(model: Model, batch: int, seconds: float, cpu: int, workdir: Path) -> dict[str, Any]:
    """In-process `inferperf bench` at ``batch``, intra-op 1, pinned to ``cpu``: rows/s and p50 ms."""
    out = workdir / f"bench-{model.name}-{batch}.json"
    # --shape NAME:1x... becomes NAME:{batch}x... (bench refuses a batch size that contradicts the shape)
    shape = [re.sub(r":1x", f":{batch}x", f, count=1) if f.startswith(f"{model.input}:") else f for f in model.shape_flags]
    cmd = ["taskset", "-c", str(cpu), sys.executable, "-m", "inferperf", "bench", model.spec, *shape,
           "--batch-size", str(batch), "--intra-op-num-threads", "1", "--duration-s", f"{seconds:g}",
           "--max-duration-s", f"{seconds * 3:g}", "--iterations", "10", "--output", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 3 + 180)
    if proc.returncode != 0:
        raise RuntimeError(f"bench failed ({proc.returncode}): {proc.stderr[-1500:]}")
    m = json.loads(out.read_text())["metrics"]
    return {"rps": m["throughput"]["samples_per_s"], "p50_ms": m["latency_ms"]["p50"],
            "p99_ms": m["latency_ms"]["p99"], "batch": batch}


def run_parse(folder: Path, cpu: int, reps: int = 20) -> dict[str, Any]:
    """The floor of a JSON request's cost: a bare simdjson parse of each JSON body of ``folder``, pinned to ``cpu``.

    Times ``simdjson.Parser().parse(body)`` alone (``parse_ms``) and with the tensor exported as numpy
    (``Array.as_buffer`` of ``inputs[0].data``, ``export_ms``), ``reps`` passes over the bodies; the median
    per body over passes, in ms. Nothing of the server runs: this is what any simdjson-based server pays.
    """
    import simdjson

    bodies = [(folder / line.split()[0]).read_bytes() for line in (folder / "index.txt").read_text().split("\n") if line]
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        parse, export = [], []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            for b in bodies:
                simdjson.Parser().parse(b)
            t1 = time.perf_counter_ns()
            for b in bodies:
                np.frombuffer(simdjson.Parser().parse(b)["inputs"][0]["data"].as_buffer(of_type="d"), np.float64)
            t2 = time.perf_counter_ns()
            parse.append((t1 - t0) / len(bodies) / 1e6)
            export.append((t2 - t1) / len(bodies) / 1e6)
    finally:
        os.sched_setaffinity(0, old)
    return {"parse_ms": statistics.median(parse), "export_ms": statistics.median(export),
            "body_bytes": statistics.median(len(b) for b in bodies)}


def batch_stats(text: str) -> tuple[float, float]:
    """(sum, count) of the batch-size histogram in a /metrics scrape (0, 0 when absent)."""
    s = c = 0.0
    for line in text.splitlines():
        m = re.match(r"^(\w*batch_size\w*)_(sum|count)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", line)
        if m:
            if m.group(2) == "sum":
                s += float(m.group(3))
            else:
                c += float(m.group(3))
    return s, c


def _probes(name: str, x: np.ndarray) -> dict[str, tuple[bytes, dict[str, str]]]:
    """One request for ``x`` in each encoding: {"binary"|"json": (body, headers)}."""
    body, hlen = binary_body(name, x)
    return {"binary": (body, {"Inference-Header-Content-Length": str(hlen), "Content-Type": "application/octet-stream"}),
            "json": (json_body(name, x), {"Content-Type": "application/json"})}


def check_outputs(arms: list[Arm], model: Model, x: np.ndarray) -> dict[str, float]:
    """Max abs difference of each arm's answer for ``x`` against a direct ONNX Runtime run."""
    import onnxruntime as ort

    ref = ort.InferenceSession(str(model.path), providers=["CPUExecutionProvider"]).run(None, {model.input: x})[0]
    probes = _probes(model.input, x)
    diffs = {}
    for arm in arms:
        for enc in arm.encodings:
            st, out, h = post(arm.infer_url(model), *probes[enc])
            if st != 200:
                raise RuntimeError(f"{arm.label} {enc}: HTTP {st}: {out[:300]!r}")
            got = decode_response(out, h.get("inference-header-content-length"))
            diffs[f"{arm.key}/{enc}"] = float(np.max(np.abs(got - ref.ravel())))
    return diffs


def measure_model(model: Model, arms: list[Arm], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """All rounds for one model: points[arm/enc/conc] and ceiling[batch] lists, plus batch means."""
    xs = tensors(model.shape, args.bodies)
    bodies = {enc: write_bodies(work / model.name / enc, model.input, xs, enc) for enc in ("binary", "json")}
    probes = _probes(model.input, xs[0])
    started: list[Arm] = []
    res: dict[str, Any] = {"points": {}, "ceiling": {}, "batch_mean": {}, "errors": {}}
    try:
        for arm in arms:
            arm.start(model, work / model.name, probes)
            started.append(arm)
        res["output_check_max_abs_diff"] = check_outputs(arms, model, xs[1])
        short = model.spec.removeprefix("zoo:")
        items: list[tuple[Any, ...]] = [("wrk", a, e, c) for a in arms for e in a.encodings
                                        if e in args.encodings and f"{short}:{a.key}/{e}" not in args.skip
                                        for c in args.concurrency]
        seconds = args.model_seconds.get(short, args.seconds)
        items += [("bench", b) for b in sorted({1, model.max_batch_size})]
        if "json" in args.encodings:
            items.append(("parse",))
        rng = random.Random(args.seed)
        for r in range(args.rounds):
            rng.shuffle(items)
            for it in items:
                if it[0] == "parse":
                    res.setdefault("parse", []).append(run_parse(bodies["json"], args.server_cpu))
                    continue
                if it[0] == "bench":
                    res["ceiling"].setdefault(str(it[1]), []).append(
                        run_bench(model, it[1], seconds, args.server_cpu, work))
                    continue
                _, arm, enc, conc = it
                if f"{short}:{arm.key}/{enc}/{conc}" in args.skip:
                    continue
                before = arm.metrics() if isinstance(arm, InferperfArm) else ""
                pt = run_wrk(f"http://127.0.0.1:{arm.port}", bodies[enc], f"/v2/models/{model.name}/infer", conc,
                             seconds, args.client_cpu)
                key = f"{arm.key}/{enc}/{conc}"
                if before:
                    (s0, c0), (s1, c1) = batch_stats(before), batch_stats(arm.metrics())
                    if c1 > c0:
                        pt["batch_mean"] = (s1 - s0) / (c1 - c0)
                pt["drain_s"] = arm.wait_idle()
                res["points"].setdefault(key, []).append(pt)
                print(f"  [{model.label} r{r}] {key}: {pt['rps']:.1f} req/s p50 {pt['p50_ms']:.2f} ms "
                      f"p99 {pt['p99_ms']:.2f} ms errors {pt['errors']}"
                      + (f" batch {pt['batch_mean']:.2f}" if "batch_mean" in pt else ""), flush=True)
    finally:
        for arm in started:
            arm.stop()
    return res


def tiny_latency(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Added latency at concurrency 1, batching off, for onnxruntime's mul_1 ([3,2] FP32, no batch dim)."""
    import onnxruntime as ort

    path = Path(ort.__file__).parent / "datasets" / "mul_1.onnx"
    model = Model("mul_1 [3,2]", "mul_1", str(path), path, "X", (3, 2), [], 0)
    xs = tensors(model.shape, args.bodies)
    bodies = {enc: write_bodies(work / "mul_1" / enc, "X", xs, enc) for enc in ("binary", "json")}
    arm = InferperfArm("off", "inferperf serve, batching off", ("binary", "json"), args.server_cpu)
    arm.start(model, work / "mul_1", _probes("X", xs[0]))
    out: dict[str, list[dict[str, Any]]] = {"binary": [], "json": [], "bench": []}
    try:
        for _ in range(args.rounds):
            for enc in ("binary", "json"):
                out[enc].append(run_wrk(f"http://127.0.0.1:{arm.port}", bodies[enc], "/v2/models/mul_1/infer", 1,
                                        args.seconds, args.client_cpu))
            out["bench"].append(run_bench(model, 1, args.seconds, args.server_cpu, work))
    finally:
        arm.stop()
    return out


def metrics_cost(cpu: int, n: int = 200_000, rounds: int = 5) -> dict[str, Any]:
    """Cost of the metrics hooks one request triggers, in us (in-process estimate; `--no-metrics` allows the interleaved on/off wrk measurement).

    One request with batching off calls ServerMetrics' request_started, decoded, request_queued,
    request_dequeued, batch_executed (one row), encoded and request_finished; they run ``n`` times pinned
    to ``cpu``; the median over ``rounds`` of the per-request time is returned, with one /metrics
    exposition's time (a scrape, every 15 s with Prometheus' default).
    """
    from inferperf.serve.metrics import ServerMetrics

    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        per_req, scrape = [], []
        for _ in range(rounds):
            m = ServerMetrics()
            t0 = time.perf_counter_ns()
            for _ in range(n):
                t = m.request_started("m")
                m.decoded("m", 20_000)
                m.request_queued("m")
                m.request_dequeued("m")
                m.batch_executed("m", 1, 1, [50_000], 2_000_000, False)
                m.encoded("m", 10_000)
                m.request_finished("m", 200, t)
            per_req.append((time.perf_counter_ns() - t0) / n / 1e3)
            t1 = time.perf_counter_ns()
            m.exposition()
            scrape.append((time.perf_counter_ns() - t1) / 1e6)
    finally:
        os.sched_setaffinity(0, old)
    return {"per_request_us": statistics.median(per_req), "per_request_us_all": per_req,
            "scrape_ms": statistics.median(scrape)}


def _pairs(text: str) -> dict[str, float]:
    """'a=1,b=2' -> {'a': 1.0, 'b': 2.0}."""
    return {k: float(v) for k, v in (p.split("=") for p in text.split(",") if p)}


def main() -> None:
    """Run the benchmark described in the module docstring and print its tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="zoo:squeezenet,zoo:ppocr-cls@1x3x48x192,zoo:ppocr-det@1x3x640x640")
    ap.add_argument("--concurrency", default="1,4,16,64", type=lambda s: [int(c) for c in s.split(",")])
    ap.add_argument("--encodings", default="binary,json", type=lambda s: s.split(","))
    ap.add_argument("--arms", default="off,on,minimal,mlserver", type=lambda s: s.split(","))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=5.0, help="per point (wrk duration, bench min duration)")
    ap.add_argument("--model-seconds", default="ppocr-det=8", type=_pairs,
                    help="per-model point duration, e.g. ppocr-det=8 (zoo name without zoo:)")
    ap.add_argument("--skip", type=lambda s: set(s.split(",")),
                    default="ppocr-det:off/json,ppocr-det:minimal/json,ppocr-det:on/json/64,ppocr-det:mlserver/json/64",
                    help="MODEL:ARM/ENCODING[/CONC] points left out (det 640 JSON bodies are ~8 MB: only batching on and"
                         " MLServer, which has no binary extension, get them, up to concurrency 16)")
    ap.add_argument("--bodies", type=int, default=64, help="distinct pre-built request bodies per model (>= 64)")
    ap.add_argument("--batch-flags", default="--dynamic-batching --max-queue-delay-us 2000")
    ap.add_argument("--max-batch-size", type=int, default=8)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--no-tiny", action="store_true", help="skip the mul_1 added-latency part")
    ap.add_argument("--quick", action="store_true", help="debug: 1 round, 2 s points, concurrency 1,16")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "serve-bench.json")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.concurrency = 1, 2.0, [1, 16]
        args.model_seconds = {k: min(v, 4.0) for k, v in args.model_seconds.items()}
    cmd = "python benchmarks/serve.py " + shlex.join(sys.argv[1:])
    started = dt.datetime.now(dt.timezone.utc)
    meta = {"command": cmd, "started": started.isoformat(timespec="seconds"), "load_before": os.getloadavg(),
            "server_cpu": args.server_cpu, "client_cpu": args.client_cpu, "rounds": args.rounds,
            "seconds": args.seconds, "model_seconds": args.model_seconds, "bodies": args.bodies, "batch_flags": args.batch_flags,
            "max_batch_size": args.max_batch_size, "nproc": os.cpu_count()}
    results: dict[str, Any] = {"meta": meta, "models": {}}
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        work = Path(tmp)
        for model in load_models(args.models.split(","), args.max_batch_size):
            arms = [a for a in available_arms(args.server_cpu, shlex.split(args.batch_flags)) if a.key in args.arms]
            print(f"{model.label}: arms {[a.key for a in arms]}", flush=True)
            results["models"][model.label] = measure_model(model, arms, args, work)
        if not args.no_tiny:
            results["tiny"] = tiny_latency(args, work)
        results["metrics_cost"] = metrics_cost(args.server_cpu)
    meta["load_after"] = os.getloadavg()
    meta["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str))
    print(f"raw results: {args.out}")
    print(markdown(results))


if __name__ == "__main__":
    main()
