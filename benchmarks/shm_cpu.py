"""System shared memory vs tensors on the wire: client and server CPU per request (issue 41 item 1), in interleaved
rounds.

One ``inferperf serve zoo:squeezenet --allow-client-shm`` (1x3x224x224 FP32, 602 kB per request; batching off,
intra-op 1, HTTP and gRPC) pinned to the last CPU; ``inferperf load`` pinned to the others at ``--concurrency``
(4: the instance always busy) in four arms: HTTP binary tensors, HTTP with ``--shared-memory system``, gRPC raw
contents, gRPC with ``--shared-memory system``. Each run lasts ``--settle-s + --window-s + 2`` s; over the window
alone (one-window method of benchmarks/load_ceiling.py) the client's CPU (its process tree) and the server's CPU
(its process: every thread) are read with psutil at both edges, and the requests are the server's own
``inference_count`` delta at the same instants. Figures: CPU microseconds per request on each side, and req/s.

Published gains of shared memory over the wire on Triton: 3-12 % of the client's CPU and 3-4 % of the server's
(the issue's figures). Rounds: ``--rounds`` (3), every arm once per round, order shuffled (seed 0); per round the
ratio shm / wire on each side; the medians are printed (no pass/fail target: a measurement).

    python benchmarks/shm_cpu.py [--rounds 3] [--settle-s 3] [--window-s 6] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_ceiling import _tree_cpu_s  # noqa: E402 - the same CPU reading as the ceiling benchmark

SHAPE = "data_0:1x3x224x224"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _count(base: str) -> int:
    with urllib.request.urlopen(f"{base}/v2/models/squeezenet/stats", timeout=5) as r:
        return int(json.loads(r.read())["model_stats"][0]["inference_count"])


def _window(cmd: list[str], server: psutil.Process, base: str, settle_s: float, window_s: float) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = psutil.Process(proc.pid)
    edges = []
    for at in (settle_s, settle_s + window_s):
        time.sleep(max(0.0, t0 + at - time.perf_counter()))
        if proc.poll() is not None:
            break
        edges.append((_tree_cpu_s(client), _tree_cpu_s(server), _count(base), time.perf_counter()))
    out, _ = proc.communicate(timeout=300)
    if proc.returncode != 0 or len(edges) < 2:
        raise RuntimeError(f"client exit {proc.returncode} before its window closed: {out[-1500:]}")
    (c0, s0, n0, t_0), (c1, s1, n1, t_1) = edges
    n = n1 - n0
    return {"client_us": 1e6 * (c1 - c0) / n, "server_us": 1e6 * (s1 - s0) / n, "req_s": n / (t_1 - t_0)}


def main() -> None:
    """Serve squeezenet, run the four arms in shuffled rounds, print CPU per request and the shm / wire ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settle-s", type=float, default=3.0)
    ap.add_argument("--window-s", type=float, default=6.0)
    ap.add_argument("--concurrency", type=int, default=4)
    a = ap.parse_args()
    cpus = sorted(psutil.Process().cpu_affinity())
    srv_cpu, cli_cpus = str(cpus[-1]), ",".join(map(str, cpus[:-1] or cpus))
    port, gport = _port(), _port()
    base = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen(["taskset", "-c", srv_cpu, sys.executable, "-m", "inferperf", "serve", "zoo:squeezenet",
                            "--port", str(port), "--grpc-port", str(gport), "--intra-op-num-threads", "1",
                            "--allow-client-shm", "--shape", SHAPE],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        end = time.monotonic() + 180
        while True:
            assert srv.poll() is None and time.monotonic() < end, "server did not start"
            try:
                _count(base)
                break
            except OSError:
                time.sleep(0.5)
        d = a.settle_s + a.window_s + 2
        with tempfile.TemporaryDirectory() as tmp:
            def cmd(url: str, *extra: str) -> list[str]:
                return ["taskset", "-c", cli_cpus, sys.executable, "-m", "inferperf", "load", url, "--model",
                        "squeezenet", "--shape", SHAPE, "--concurrency", str(a.concurrency), "--warmup-s", "0.5",
                        "--duration-s", str(d), "-o", str(Path(tmp) / "r"), *extra]

            arms = {"HTTP binary": cmd(base, "--protocol", "binary"),
                    "HTTP shm": cmd(base, "--shared-memory", "system"),
                    "gRPC raw": cmd(f"grpc://127.0.0.1:{gport}"),
                    "gRPC shm": cmd(f"grpc://127.0.0.1:{gport}", "--shared-memory", "system")}
            rows: dict[str, list[dict]] = {k: [] for k in arms}
            rng = random.Random(0)
            server = psutil.Process(srv.pid)
            for rnd in range(a.rounds):
                order = list(arms)
                rng.shuffle(order)
                for name in order:
                    r = _window(arms[name], server, base, a.settle_s, a.window_s)
                    rows[name].append(r)
                    print(f"  round {rnd + 1} {name}: {r['req_s']:.1f} req/s, client {r['client_us']:.0f} us/req, "
                          f"server {r['server_us']:.0f} us/req", flush=True)
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(60)
    _report(rows, a, srv_cpu, cli_cpus)


def _mm(xs: list[float], fmt: str) -> str:
    return f"{format(float(np.median(xs)), fmt)} [{format(min(xs), fmt)}, {format(max(xs), fmt)}]"


def _report(rows: dict[str, list[dict]], a: argparse.Namespace, srv_cpu: str, cli_cpus: str) -> None:
    import google.protobuf
    import grpc

    print(f"\nsqueezenet 1x3x224x224, concurrency {a.concurrency}, server CPU {srv_cpu}, client CPU(s) {cli_cpus}, "
          f"{a.rounds} rounds; grpcio {grpc.__version__}, protobuf {google.protobuf.__version__}\n")
    print("| arm | req/s median [min, max] | client CPU us/request | server CPU us/request |")
    print("|---|---:|---:|---:|")
    for name, rs in rows.items():
        print(f"| {name} | {_mm([r['req_s'] for r in rs], ',.1f')} | {_mm([r['client_us'] for r in rs], ',.0f')} | "
              f"{_mm([r['server_us'] for r in rs], ',.0f')} |")
    for wire, shm in (("HTTP binary", "HTTP shm"), ("gRPC raw", "gRPC shm")):
        for side in ("client", "server"):
            ratios = [s[f"{side}_us"] / w[f"{side}_us"] for w, s in zip(rows[wire], rows[shm], strict=True)]
            print(f"{shm} / {wire}, {side} CPU per request, per round: {', '.join(f'{x:.3f}' for x in ratios)} "
                  f"(median {float(np.median(ratios)):.3f}: {100 * (1 - float(np.median(ratios))):+.1f} % saved)")


if __name__ == "__main__":
    main()
