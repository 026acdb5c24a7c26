"""gRPC beside HTTP, side by side (issue 40 item 4), in interleaved rounds; grpcio and protobuf versions printed.

1. **squeezenet at saturation, gRPC raw vs HTTP binary, same server**: ``inferperf serve zoo:squeezenet`` (batching
   off, 1 instance, intra-op 1) pinned to the last CPU; perf_analyzer (C++, ``.venv-triton``) pinned to the others
   at concurrency ``--concurrency`` (4: the instance always busy) over ``-i http`` (binary tensors, its default)
   and ``-i grpc`` (raw contents). Target: gRPC / HTTP throughput >= 0.9 in every round (met), median under it
   (not met), else inconclusive.
2. **Added latency at concurrency 1**: the same pair at concurrency 1: p50 of each, and perf_analyzer's own split
   of the client's time (its "Avg HTTP time" / "Avg gRPC time": send, receive, (un)marshal) and the server's
   ("Server: Avg request latency": overhead + queue + compute), so the difference is read from both sides.
3. **PP-OCR cls at concurrency 16, inferperf serve vs MLServer, both over gRPC**: zoo:ppocr-cls (1x3x48x192)
   served by ``inferperf serve`` (batching off, intra-op 1) and by MLServer (``.venv-mlserver``, the ONNX Runtime
   runtime of serve_peers/mlserver/, intra-op 1, no adaptive batching), each pinned to the last CPU, one at a
   time; the client is ``inferperf load grpc://`` (the same for both; MLServer serves no ModelConfig, which
   perf_analyzer needs) pinned to the others, ``--shape x:1x3x48x192``. Target: inferperf / MLServer throughput
   >= 1.5 in every round.

    python benchmarks/grpc_speed.py [--rounds 3] [--seconds 4] [--parts 1,2,3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from serve_peers.arms import free_port  # noqa: E402

PA = ROOT / ".venv-triton" / "bin" / "perf_analyzer-env"
MLSERVER = ROOT / ".venv-mlserver" / "bin" / "mlserver"


def _wait(url: str, proc: subprocess.Popen, deadline_s: float = 180.0) -> None:
    end = time.monotonic() + deadline_s
    while True:
        assert proc.poll() is None, f"server exited {proc.returncode}"
        assert time.monotonic() < end, f"{url} not ready within {deadline_s} s"
        try:
            if urllib.request.urlopen(url, timeout=2).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _serve(model: str, shape: str, srv_cpu: str) -> tuple[subprocess.Popen, int, int]:
    http, grpc = free_port(), free_port()
    proc = subprocess.Popen(["taskset", "-c", srv_cpu, sys.executable, "-m", "inferperf", "serve", model, "--port",
                             str(http), "--grpc-port", str(grpc), "--intra-op-num-threads", "1", "--shape", shape],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    _wait(f"http://127.0.0.1:{http}/v2/health/ready", proc)
    return proc, http, grpc


def _perf_analyzer(protocol: str, port: int, model: str, shape: str, c: int, seconds: float, cli: str) -> dict:
    cmd = ["taskset", "-c", cli, str(PA), "-m", model, "-u", f"127.0.0.1:{port}", "-i", protocol,
           "--concurrency-range", str(c), "--measurement-interval", str(int(seconds * 1000)),
           "--stability-percentage", "9999", "--max-trials", "3", "--shape", shape]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    text = out.stdout
    get = lambda pat: float(re.search(pat, text).group(1))  # noqa: E731
    client = re.search(r"Avg (?:HTTP|gRPC) time: (\d+) usec \((.*)\)$", text, re.MULTILINE)
    server = re.search(r"Avg request latency: (\d+) usec \((.*)\)$", text, re.MULTILINE)
    return {"req_s": get(r"Throughput: ([\d.]+) infer/sec"), "p50_ms": get(r"p50 latency: (\d+) usec") / 1000,
            "client_us": int(client.group(1)) if client else None, "client_split": client.group(2) if client else "",
            "server_us": int(server.group(1)) if server else None, "server_split": server.group(2) if server else ""}


def _mm(xs: list[float], fmt: str = ",.1f") -> str:
    return f"{np.median(xs):{fmt}} [{min(xs):{fmt}}, {max(xs):{fmt}}]"


def _verdict(ratios: list[float], target: float) -> str:
    if min(ratios) >= target:
        return "met"
    return "not met" if float(np.median(ratios)) < target else "inconclusive"


def part_squeezenet(a: argparse.Namespace, srv: str, cli: str) -> None:
    """Parts 1 and 2: perf_analyzer -i http vs -i grpc on one squeezenet server."""
    proc, http, grpc = _serve("zoo:squeezenet", "data_0:1x3x224x224", srv)  # fixed dims: max_batch_size 0
    shape = "data_0:1:3:224:224"
    rows: dict[tuple[str, int], list[dict]] = {}
    rng = random.Random(0)
    try:
        for r in range(a.rounds):
            order = [(p, c) for p in ("http", "grpc") for c in (1, a.concurrency)]
            rng.shuffle(order)
            for p, c in order:
                row = _perf_analyzer(p, http if p == "http" else grpc, "squeezenet", shape, c, a.seconds, cli)
                rows.setdefault((p, c), []).append(row)
                print(f"  round {r + 1} squeezenet {p} c={c}: {row['req_s']:.1f} req/s, p50 {row['p50_ms']:.2f} ms",
                      flush=True)
    finally:
        _stop(proc)
    print("\n| protocol | concurrency | req/s median [min, max] | p50 ms | client time (perf_analyzer) | server time |")
    print("|---|---:|---:|---:|---|---|")
    for (p, c), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        last = v[-1]
        print(f"| {p} | {c} | {_mm([x['req_s'] for x in v])} | {_mm([x['p50_ms'] for x in v], '.3f')} | "
              f"{last['client_us']} us ({last['client_split']}) | {last['server_us']} us ({last['server_split']}) |")
    sat = [g["req_s"] / h["req_s"] for g, h in zip(rows[("grpc", a.concurrency)], rows[("http", a.concurrency)],
                                                    strict=True)]
    print(f"\nsaturation (c={a.concurrency}) gRPC / HTTP per round: {', '.join(f'{x:.3f}' for x in sat)}; target >= 0.9:"
          f" **{_verdict(sat, 0.9)}**")
    add = [g["p50_ms"] - h["p50_ms"] for g, h in zip(rows[("grpc", 1)], rows[("http", 1)], strict=True)]
    print(f"added p50 at c=1, gRPC - HTTP per round (ms): {', '.join(f'{x:+.3f}' for x in add)}")


def _mlserver(model: Path, srv: str, work: Path) -> tuple[subprocess.Popen, int]:
    repo = work / "mlserver-repo"
    (repo / "cls").mkdir(parents=True, exist_ok=True)
    http, grpc, metrics = free_port(), free_port(), free_port()
    (repo / "settings.json").write_text(json.dumps({"http_port": http, "grpc_port": grpc, "metrics_port": metrics,
                                                    "host": "127.0.0.1", "parallel_workers": 0, "debug": False,
                                                    "load_models_at_startup": True}))
    (repo / "cls" / "model-settings.json").write_text(json.dumps({
        "name": "cls", "implementation": "onnx_runtime.OnnxRuntime", "parameters": {"uri": str(model)}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "benchmarks" / "serve_peers" / "mlserver")}
    proc = subprocess.Popen(["taskset", "-c", srv, str(MLSERVER), "start", str(repo)], env=env, cwd=repo,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(f"http://127.0.0.1:{http}/v2/models/cls/ready", proc)
    return proc, grpc


def _load_grpc(port: int, model: str, c: int, seconds: float, cli: str, out: Path) -> dict:
    cmd = ["taskset", "-c", cli, sys.executable, "-m", "inferperf", "load", f"grpc://127.0.0.1:{port}", "--model",
           model, "--shape", "x:1x3x48x192", "--concurrency", str(c), "--duration-s", f"{seconds:g}", "--warmup-s",
           "1", "-o", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (doc,) = [json.loads(p.read_text()) for p in out.glob("*.json")]
    m = doc["metrics"]
    assert m["errors"]["count"] == 0, m["errors"]
    return {"req_s": m["throughput"]["queries_per_s"], "p50_ms": m["latency_ms"]["p50"]}


def part_mlserver(a: argparse.Namespace, srv: str, cli: str) -> None:
    """Part 3: PP-OCR cls at concurrency 16 over gRPC, inferperf serve vs MLServer, one server at a time."""
    from inferperf import zoo

    model = zoo.resolve("zoo:ppocr-cls")
    work = Path(tempfile.mkdtemp(prefix="grpc-speed-"))
    rows: dict[str, list[dict]] = {"inferperf serve": [], "MLServer": []}
    rng = random.Random(1)
    for r in range(a.rounds):
        order = list(rows)
        rng.shuffle(order)
        for name in order:
            out = work / f"{name.split()[0]}-{r}"
            out.mkdir()
            if name == "MLServer":
                proc, port = _mlserver(model, srv, work)
                served = "cls"
            else:
                proc, _, port = _serve(str(model), "x:1x3x48x192", srv)
                served = model.stem
            try:
                row = _load_grpc(port, served, 16, a.seconds, cli, out)
            finally:
                _stop(proc)
            rows[name].append(row)
            print(f"  round {r + 1} {name}: {row['req_s']:.1f} req/s, p50 {row['p50_ms']:.2f} ms", flush=True)
    print("\n| server (gRPC, PP-OCR cls, c=16) | req/s median [min, max] | p50 ms |\n|---|---:|---:|")
    for name, v in rows.items():
        print(f"| {name} | {_mm([x['req_s'] for x in v])} | {_mm([x['p50_ms'] for x in v], '.2f')} |")
    ratios = [i["req_s"] / m["req_s"] for i, m in zip(rows["inferperf serve"], rows["MLServer"], strict=True)]
    print(f"\ninferperf / MLServer per round: {', '.join(f'{x:.2f}' for x in ratios)}; target >= 1.5: "
          f"**{_verdict(ratios, 1.5)}**")


def main() -> None:
    import google.protobuf
    import grpc

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0, help="perf_analyzer window / load duration, s")
    ap.add_argument("--concurrency", type=int, default=4, help="part 1's saturating concurrency")
    ap.add_argument("--parts", default="1,2,3")
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    srv, cli = str(cpus[-1]), ",".join(map(str, cpus[:-1] or cpus))
    print(f"grpcio {grpc.__version__}, protobuf {google.protobuf.__version__}; server CPU {srv}, client CPU(s) {cli}; "
          f"{a.rounds} rounds", flush=True)
    parts = {p.strip() for p in a.parts.split(",")}
    if parts & {"1", "2"}:
        part_squeezenet(a, srv, cli)
    if "3" in parts:
        part_mlserver(a, srv, cli)


if __name__ == "__main__":
    main()
