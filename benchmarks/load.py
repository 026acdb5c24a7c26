"""inferperf load vs perf_analyzer agreement (issue 13, Performance item 2).

One ``inferperf serve zoo:squeezenet`` pinned to the last CPU; for each concurrency (1, 4, 16), in
interleaved rounds (the two tools' order shuffled per concurrency, seed 0), ``inferperf load URL --model squeezenet --concurrency C`` and ``perf_analyzer
--concurrency-range C`` (JSON inputs, from the venv of scripts/install_triton_clients.sh), both pinned to the
other CPUs. Reported per concurrency and tool: throughput (req/s) and p50 (ms), the range over rounds, and the
ratio inferperf / perf_analyzer of the round means; the load average before and after.

Performance item 1, the generator ceiling vs wrk / perf_analyzer / Locust, is benchmarks/load_ceiling.py.

Run: python benchmarks/load.py [--rounds 2] [--duration-s 3]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PA = ROOT / ".venv-triton" / "bin" / "perf_analyzer-env"  # wrapper that sets its library path


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _inferperf(url: str, conc: int, dur: float, cpus: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.json"
        p = subprocess.run(["taskset", "-c", cpus, sys.executable, "-m", "inferperf", "load", url, "--model", "squeezenet",
                        "--concurrency", str(conc), "--duration-s", str(dur), "--warmup-s", "1", "--protocol", "binary",
                            "-o", str(out)],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        if p.returncode != 0:
            raise RuntimeError(f"inferperf load exit {p.returncode}: {p.stderr[-1500:]}")
        doc = json.loads(out.read_text())
    return doc["metrics"]["throughput"]["queries_per_s"], doc["metrics"]["latency_ms"]["p50"]


def _perf_analyzer(host: str, conc: int, dur: float, cpus: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "pa.csv"
        p = subprocess.run(["taskset", "-c", cpus, str(PA), "-m", "squeezenet", "-u", host, "--concurrency-range",
                            str(conc), "--measurement-interval", str(int(dur * 1000)), "--stability-percentage", "50",
                            "--max-trials", "6", "-f", str(f)],
                           capture_output=True, text=True, timeout=180)  # fmt: skip
        if p.returncode != 0:
            raise RuntimeError(f"perf_analyzer exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]}")
        row = next(csv.DictReader(io.StringIO(f.read_text())))
    return float(row["Inferences/Second"]), float(row["p50 latency"]) / 1000.0


def main() -> None:
    """Run the rounds and print one JSON document."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration-s", type=float, default=3.0)
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    srv_cpu, gen = str(cpus[-1]), ",".join(map(str, cpus[:-1] or cpus))
    port = _port()
    proc = subprocess.Popen(["taskset", "-c", srv_cpu, sys.executable, "-m", "inferperf", "serve", "zoo:squeezenet",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    load_before = os.getloadavg()
    res: dict[str, dict[str, list[tuple[float, float]]]] = {}
    try:
        deadline = time.monotonic() + 180
        while not _ready(f"http://127.0.0.1:{port}/v2/health/ready"):
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.3)
        rng = random.Random(0)
        for _ in range(a.rounds):
            for c in (1, 4, 16):
                r = res.setdefault(str(c), {"inferperf": [], "perf_analyzer": []})
                tools = ["inferperf", "perf_analyzer"]
                rng.shuffle(tools)  # neither tool always goes first after the other's load
                for tool in tools:
                    if tool == "inferperf":
                        r[tool].append(_inferperf(f"http://127.0.0.1:{port}", c, a.duration_s, gen))
                    else:
                        r[tool].append(_perf_analyzer(f"127.0.0.1:{port}", c, a.duration_s, gen))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    summary = {}
    for c, r in res.items():
        m = {k: [sum(x[i] for x in v) / len(v) for i in (0, 1)] for k, v in r.items()}
        summary[c] = {"rounds": r, "throughput_ratio": m["inferperf"][0] / m["perf_analyzer"][0],
                      "p50_ratio": m["inferperf"][1] / m["perf_analyzer"][1]}  # fmt: skip
    print(json.dumps({"date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "loadavg_before": load_before,
                      "loadavg_after": os.getloadavg(), "server_cpu": srv_cpu, "generator_cpus": gen,
                      "results": summary}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
