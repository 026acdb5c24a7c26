"""Load generator ceiling (issue 13, Performance item 1): requests per client CPU-second, inferperf load vs
wrk, perf_analyzer and Locust FastHttpUser, against one trivial KServe v2 endpoint, in interleaved rounds.

The endpoint: ``inferperf serve`` of onnxruntime's ``mul_1.onnx`` ([3,2] FP32, no batch dim: a microsecond of
model time, so each request costs the server almost only HTTP) pinned to the last CPU; each client pinned to
the other CPU(s) with ``taskset``, closed loop at ``--concurrency`` (16) for ``--duration-s`` (10), binary
tensors (Triton's extension) from 16 distinct pre-built bodies. Every client is a child process: its CPU time
is ``getrusage(RUSAGE_CHILDREN)`` around it (user + sys, whole process: interpreter start and imports
included for inferperf and Locust), and the requests it made are the server's own ``inference_count`` delta
(``/v2/models/mul_1/stats``), so every tool is counted the same way. inferperf's Result also records its CPU
over the measured window alone (``metrics.client.client_cpu_percent`` x the window); that figure is printed beside it.

Whole-process figures charge each tool its start-up (a Python interpreter and imports for inferperf and Locust,
perf_analyzer's model reads): so every client also runs a short run (``--short-s``, 4) in the same round, and
the steady-state figure is the marginal one, (requests_long - requests_short) / (cpu_long - cpu_short), which
cancels every fixed cost alike.

Clients (each in its own process and venv where its pins need one):
  wrk 1 thread + benchmarks/serve_bodies.lua (Debian's wrk; C, the reference ceiling);
  perf_analyzer (``.venv-triton``: scripts/install_triton_clients.sh), ``--concurrency-range C``;
  Locust FastHttpUser: inferperf.loadgen.locust.KServeUser headless (``.venv-locust``: scripts/install_locust.sh);
  inferperf load URL --model mul_1 --protocol binary --concurrency C.

    python benchmarks/load_ceiling.py [--rounds 3] [--duration-s 10] [--concurrency 16]
        [--clients wrk,perf_analyzer,locust,inferperf] [--before-src DIR]

``--before-src DIR`` adds ``inferperf load @before``: the same command with ``PYTHONPATH=DIR`` (a ``src/`` of
another commit, e.g. ``git archive COMMIT src | tar -x -C /tmp/before``), interleaved in the same rounds, to
measure a change to the generator's cost per request.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
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
from serve_peers.bodies import write_bodies  # noqa: E402

PA = ROOT / ".venv-triton" / "bin" / "perf_analyzer-env"
LOCUST = ROOT / ".venv-locust" / "bin" / "locust"
LUA = ROOT / "benchmarks" / "serve_bodies.lua"


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _count(base: str) -> int:
    return int(_get(f"{base}/v2/models/mul_1/stats")["model_stats"][0]["inference_count"])


def _timed(cmd: list[str], env: dict | None = None, timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``cmd``; (result, child CPU seconds user+sys)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return p, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> None:
    """Serve mul_1, run every client long and short in shuffled rounds, print the requests-per-CPU-second table."""
    import onnxruntime as ort

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--short-s", type=float, default=4.0, help="the short run of each pair (marginal rate)")
    ap.add_argument("--clients", default="wrk,perf_analyzer,locust,inferperf", help="comma-separated subset")
    ap.add_argument("--before-src", type=Path, help="also run inferperf load from this src/ (PYTHONPATH)")
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    srv_cpu, cli_cpus = str(cpus[-1]), ",".join(map(str, cpus[:-1] or cpus))
    model = Path(ort.__file__).parent / "datasets" / "mul_1.onnx"
    port = _port()
    base = f"http://127.0.0.1:{port}"
    work = Path(tempfile.mkdtemp(prefix="inferperf-ceiling-"))
    xs = [np.random.default_rng(i).standard_normal((3, 2)).astype(np.float32) for i in range(16)]
    bodies = write_bodies(work / "bodies", "X", xs, "binary")
    c = a.concurrency
    short_s = a.short_s

    def clients_for(d: float) -> dict[str, tuple[list[str], dict | None]]:
        every = _clients(c, d, base, port, bodies, cli_cpus, work, a.before_src)
        keep = {k.strip().lower() for k in a.clients.split(",")}
        return {k: v for k, v in every.items() if k.split()[0].lower() in keep or k.endswith("@before")}

    long_clients, short_clients = clients_for(a.duration_s), clients_for(short_s)
    proc = _serve(model, port, srv_cpu)
    rows, marginal, load_before = _rounds(a, base, long_clients, short_clients, work, proc)
    _report(a, rows, marginal, load_before, srv_cpu, cli_cpus, c)


def _out(work: Path, name: str) -> Path:
    """Where the client ``name`` (an ``inferperf load`` variant) writes its Result."""
    return work / (name.replace(" ", "_").replace("@", "") + ".json")


def _inferperf(c: int, d: float, base: str, cli_cpus: str, out: Path) -> list[str]:
    return ["taskset", "-c", cli_cpus, sys.executable, "-m", "inferperf", "load", base, "--model", "mul_1",
            "--protocol", "binary", "--concurrency", str(c), "--duration-s", f"{d:g}", "--warmup-s", "1", "-o",
            str(out)]  # fmt: skip


def _clients(c: int, d: float, base: str, port: int, bodies: Path, cli_cpus: str,
             work: Path, before_src: Path | None = None) -> dict[str, tuple[list[str], dict | None]]:
    clients = {
        "wrk": (["taskset", "-c", cli_cpus, "wrk", "-t1", f"-c{c}", f"-d{d:g}s", "-s", str(LUA), base, "--",
                 str(bodies), "/v2/models/mul_1/infer"], None),
        "inferperf load": (_inferperf(c, d, base, cli_cpus, _out(work, "inferperf load")), None),
    }
    if before_src is not None:
        env = {**os.environ, "PYTHONPATH": str(before_src.resolve())}
        clients["inferperf load @before"] = (_inferperf(c, d, base, cli_cpus, _out(work, "inferperf load @before")),
                                             env)  # fmt: skip
    if PA.exists():
        clients["perf_analyzer"] = (["taskset", "-c", cli_cpus, str(PA), "-m", "mul_1", "-u", f"127.0.0.1:{port}",
                                     "--concurrency-range", str(c), "--measurement-interval", str(int(d * 1000 / 3)),
                                     "--stability-percentage", "9999", "--max-trials", "3"], None)  # 3 windows = d
    if LOCUST.exists():
        env = {**os.environ, "INFERPERF_LOCUST_MODEL": "mul_1", "INFERPERF_LOCUST_PROTOCOL": "binary"}
        clients["Locust FastHttpUser"] = (["taskset", "-c", cli_cpus, str(LOCUST), "-f",
                                           str(ROOT / "src/inferperf/loadgen/locust.py"), "--headless", "-u", str(c),
                                           "-r", str(c), "-t", f"{d:g}s", "--host", base, "--only-summary"], env)
    return clients


def _serve(model: Path, port: int, srv_cpu: str) -> subprocess.Popen:
    return subprocess.Popen(["taskset", "-c", srv_cpu, sys.executable, "-m", "inferperf", "serve", str(model),
                             "--port", str(port), "--max-batch-size", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def _one(name: str, cmd: list[str], env: dict | None, base: str, work: Path) -> dict:
    before = _count(base)
    t0 = time.perf_counter()
    p, cpu_s = _timed(cmd, env)
    wall = time.perf_counter() - t0
    n = _count(base) - before
    if p.returncode not in (0, 1) or n == 0:  # Locust exits 1 when any request failed
        raise RuntimeError(f"{name} exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]}")
    row = {"requests": n, "cpu_s": cpu_s, "wall_s": wall, "req_per_cpu_s": n / cpu_s if cpu_s else None}
    if name.startswith("inferperf load"):
        doc = json.loads(_out(work, name).read_text())
        window_cpu_s = doc["metrics"]["client"]["client_cpu_percent"] / 100 * doc["metrics"]["throughput"]["duration_s"]
        row["window_req_per_cpu_s"] = doc["metrics"]["latency_ms"]["count"] / window_cpu_s
    return row


def _rounds(a: argparse.Namespace, base: str, long_clients: dict, short_clients: dict, work: Path,
            proc: subprocess.Popen) -> tuple[dict, dict, tuple]:
    rng = random.Random(0)
    rows: dict[str, list[dict]] = {k: [] for k in long_clients}
    marginal: dict[str, list[float]] = {k: [] for k in long_clients}
    load_before = os.getloadavg()
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if urllib.request.urlopen(f"{base}/v2/health/ready", timeout=2).status == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.3)
        for _ in range(a.rounds):
            slots = [(k, long) for k in long_clients for long in (True, False)]
            rng.shuffle(slots)
            got: dict[tuple[str, bool], dict] = {}
            for name, long in slots:
                cmd, env = (long_clients if long else short_clients)[name]
                got[(name, long)] = row = _one(name, cmd, env, base, work)
                print(f"  {name} ({'long' if long else 'short'}): {row['requests']} requests, "
                      f"{row['cpu_s']:.2f} client CPU-s, {row['req_per_cpu_s']:.0f} req/CPU-s", flush=True)
            for name in long_clients:
                lo, sh = got[(name, True)], got[(name, False)]
                rows[name].append(lo)
                marginal[name].append((lo["requests"] - sh["requests"]) / (lo["cpu_s"] - sh["cpu_s"]))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return rows, marginal, load_before


def _report(a: argparse.Namespace, rows: dict, marginal: dict, load_before: tuple, srv_cpu: str, cli_cpus: str,
            c: int) -> None:
    print(f"\nload average before {load_before}, after {os.getloadavg()}; server CPU {srv_cpu}, clients {cli_cpus}; "
          f"concurrency {c}; runs of {a.duration_s:g} s and {a.short_s:g} s per client, {a.rounds} rounds (shuffled)\n")
    print("| client | steady-state requests per client CPU-second (marginal): median [min, max] | x Locust | "
          f"whole process, {a.duration_s:g} s run: median [min, max] | x Locust | req/s (median) |")
    print("|---|---:|---:|---:|---:|---:|")
    med = {k: float(np.median(v)) for k, v in marginal.items()}
    whole = {k: float(np.median([r["req_per_cpu_s"] for r in v])) for k, v in rows.items()}
    loc, loc_w = med.get("Locust FastHttpUser"), whole.get("Locust FastHttpUser")
    for k, v in rows.items():
        x, w = marginal[k], [r["req_per_cpu_s"] for r in v]
        rate = float(np.median([r["requests"] / r["wall_s"] for r in v]))
        print(f"| {k} | {med[k]:,.0f} [{min(x):,.0f}, {max(x):,.0f}] | {med[k] / loc:.2f} | "
              f"{whole[k]:,.0f} [{min(w):,.0f}, {max(w):,.0f}] | {whole[k] / loc_w:.2f} | {rate:,.0f} |"
              if loc and loc_w else f"| {k} | {med[k]:,.0f} | - | {whole[k]:,.0f} | - | {rate:,.0f} |")
    for name in (k for k in rows if k.startswith("inferperf load")):
        w = [r["window_req_per_cpu_s"] for r in rows[name]]
        print(f"\n{name} over its measured window only (the Result's client CPU): median {np.median(w):,.0f} "
              f"[{min(w):,.0f}, {max(w):,.0f}] requests per client CPU-second; per round: "
              + ", ".join(f"{x:,.0f}" for x in w))

if __name__ == "__main__":
    main()
