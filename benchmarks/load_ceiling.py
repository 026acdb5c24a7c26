"""Load generator ceiling (issue 13 item 1, issue 29): requests per client CPU-second over a steady window,
inferperf load vs wrk, perf_analyzer and Locust FastHttpUser, against one trivial KServe v2 endpoint, in
interleaved rounds.

The endpoint: ``inferperf serve`` of onnxruntime's ``mul_1.onnx`` ([3,2] FP32, no batch dim: a microsecond of
model time, so each request costs the server almost only HTTP) pinned to the last CPU; each client pinned to
the other CPU(s) with ``taskset``, closed loop at ``--concurrency`` (16), binary tensors (Triton's extension)
from 16 distinct pre-built bodies.

Method (issue 29: one method whose rounds separate). Every client runs ``--settle-s + --window-s + 2`` seconds
(default 4 + 8 + 2). The figure is taken over the *window* alone, from ``settle-s`` to ``settle-s + window-s``
after the client's launch, the same way for every tool: client CPU = user + system seconds of the client's
process tree (``psutil``: all threads, and children still alive) read at both edges; requests = the server's
own ``inference_count`` delta (``/v2/models/mul_1/stats``) read at the same two instants. Start-up (a Python
interpreter and imports, perf_analyzer's model reads, inferperf's metadata reads and warm-up) and wind-down
(writing the Result) fall outside the window, so no long-minus-short difference is needed (the marginal method
of the earlier sections subtracted two noisy runs and its rounds overlapped). A client that exits before the
window ends fails the run. Validation: inferperf's Result carries its own CPU over its measured span
(``os.times``, i.e. getrusage of the process, over ``--duration-s``) and its own completed count; that second,
in-process figure is printed beside the external one per round, and the whole-process getrusage figure
(``RUSAGE_CHILDREN`` around the run) is printed too.

Rounds: ``--rounds`` (default 5), each running every client once, order shuffled per round (seed 0). Decision
rule: for each target the *per-round* ratio inferperf / peer (both from the same round) is formed; the target is
**met** when every round's ratio meets it, **not met** when the median misses it, otherwise **inconclusive**
(:func:`verdict`). Targets: ``inferperf / wrk >= 0.5``; perf_analyzer's median inside or below inferperf's
[min, max] (printed, with the per-round ratio inferperf / perf_analyzer).

Clients (each in its own process and venv where its pins need one):
  wrk 1 thread + benchmarks/serve_bodies.lua (Debian's wrk; C, the reference ceiling);
  perf_analyzer (``.venv-triton``: scripts/install_triton_clients.sh), ``--concurrency-range C``;
  Locust FastHttpUser: inferperf.loadgen.locust.KServeUser headless (``.venv-locust``: scripts/install_locust.sh);
  inferperf load URL --model mul_1 --protocol binary --concurrency C.

    python benchmarks/load_ceiling.py [--rounds 5] [--settle-s 4] [--window-s 8] [--concurrency 16]
        [--clients wrk,perf_analyzer,locust,inferperf] [--before-src DIR] [--open-rate R]

``--grpc`` serves gRPC too (``--grpc-port``) and adds ``perf_analyzer grpc`` (``-i grpc``) and ``inferperf load grpc``
(``grpc://``, raw contents), with the target ``inferperf load grpc / perf_analyzer grpc >= 0.5`` (issue 40 item 3).

``--before-src DIR`` adds ``inferperf load @before``: the same command with ``PYTHONPATH=DIR`` (a ``src/`` of
another commit, e.g. ``git archive COMMIT src | tar -x -C /tmp/before``), interleaved in the same rounds, to
measure a change to the generator's cost per request. ``--open-rate R`` adds ``inferperf load open`` (and
its ``@before``): open loop at a constant R requests/s (``--request-rate R --arrival constant``), whose Result's
send-lag p99 is printed with the target "p99 < 1 ms in every round".
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
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from serve_peers.bodies import write_bodies  # noqa: E402

PA = ROOT / ".venv-triton" / "bin" / "perf_analyzer-env"
LOCUST = ROOT / ".venv-locust" / "bin" / "locust"
LUA = ROOT / "benchmarks" / "serve_bodies.lua"
#: seconds each client keeps running after its window ends (so the window never touches its wind-down).
TAIL_S = 2.0


def verdict(ratios: list[float], target: float) -> str:
    """The decision rule on per-round ratios (inferperf / peer, higher is better): ``met`` when every round
    meets ``target``, ``not met`` when the median misses it, ``inconclusive`` otherwise."""
    if min(ratios) >= target:
        return "met"
    return "not met" if float(np.median(ratios)) < target else "inconclusive"


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


def _tree_cpu_s(p: psutil.Process) -> float:
    """User + system CPU seconds of ``p`` and its living descendants (every thread)."""
    total = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            t = q.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def _windowed(cmd: list[str], env: dict | None, base: str, settle_s: float, window_s: float,
              timeout: float = 300) -> dict:  # fmt: skip
    """Run ``cmd``; CPU and server-counted requests over ``[settle_s, settle_s + window_s]`` after launch,
    plus the whole-process getrusage figure. Raises RuntimeError when the client fails or exits too early."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    n0 = _count(base)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    ps = psutil.Process(proc.pid)
    edges = []
    for at in (settle_s, settle_s + window_s):
        time.sleep(max(0.0, t0 + at - time.perf_counter()))
        alive = proc.poll() is None
        edges.append((_tree_cpu_s(ps) if alive else None, _count(base), time.perf_counter()))
        if not alive:
            break
    out, _ = proc.communicate(timeout=timeout)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    n_all = _count(base) - n0
    if proc.returncode not in (0, 1) or len(edges) < 2 or edges[1][0] is None:  # Locust exits 1 on any failure
        raise RuntimeError(f"{cmd[3]} exit {proc.returncode} (or ended before its window closed): {out[-1500:]}")
    (c_a, n_a, t_a), (c_b, n_b, t_b) = edges
    cpu_all = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"requests": n_b - n_a, "cpu_s": c_b - c_a, "req_per_cpu_s": (n_b - n_a) / (c_b - c_a),
            "req_per_s": (n_b - n_a) / (t_b - t_a), "cpu_percent": 100 * (c_b - c_a) / (t_b - t_a),
            "whole_req_per_cpu_s": n_all / cpu_all}


def main() -> None:
    """Serve mul_1, run every client in shuffled rounds, print the requests-per-CPU-second table and verdicts."""
    import onnxruntime as ort

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--settle-s", type=float, default=4.0, help="seconds after launch before the window opens")
    ap.add_argument("--window-s", type=float, default=8.0, help="the measured window, s")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--clients", default="wrk,perf_analyzer,locust,inferperf", help="comma-separated subset")
    ap.add_argument("--before-src", type=Path, help="also run inferperf load from this src/ (PYTHONPATH)")
    ap.add_argument("--open-rate", type=float, help="also run inferperf load open loop at this constant rate")
    ap.add_argument("--grpc", action="store_true", help="also run perf_analyzer -i grpc and inferperf load grpc:// "
                                                         "against the same server's gRPC port (issue 40)")
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    srv_cpu, cli_cpus = str(cpus[-1]), ",".join(map(str, cpus[:-1] or cpus))
    model = Path(ort.__file__).parent / "datasets" / "mul_1.onnx"
    port = _port()
    a.grpc_port = _port() if a.grpc else None
    base = f"http://127.0.0.1:{port}"
    work = Path(tempfile.mkdtemp(prefix="inferperf-ceiling-"))
    xs = [np.random.default_rng(i).standard_normal((3, 2)).astype(np.float32) for i in range(16)]
    bodies = write_bodies(work / "bodies", "X", xs, "binary")
    every = _clients(a, a.settle_s + a.window_s + TAIL_S, base, port, bodies, cli_cpus, work)
    keep = {k.strip().lower() for k in a.clients.split(",")}
    clients = {k: v for k, v in every.items()
               if k.split()[0].lower() in keep or k.endswith(("@before", "open")) or k.endswith("grpc")}
    proc = _serve(model, port, srv_cpu, a.grpc_port)
    rows, load_before = _rounds(a, base, clients, work, proc)
    _report(a, rows, load_before, srv_cpu, cli_cpus)


def _out(work: Path, name: str) -> Path:
    """Where the client ``name`` (an ``inferperf load`` variant) writes its Result."""
    return work / (name.replace(" ", "_").replace("@", "") + ".json")


def _inferperf(c: int, d: float, base: str, cli_cpus: str, out: Path, rate: float | None = None) -> list[str]:
    """``inferperf load``: 1 s warm-up, then ``d - 1`` s measured (its start-up comes on top)."""
    load = ["--concurrency", str(c)] if rate is None else ["--request-rate", f"{rate:g}", "--arrival", "constant"]
    return ["taskset", "-c", cli_cpus, sys.executable, "-m", "inferperf", "load", base, "--model", "mul_1",
            "--protocol", "binary", *load, "--duration-s", f"{d - 1:g}", "--warmup-s", "1", "-o",
            str(out)]  # fmt: skip


def _clients(a: argparse.Namespace, d: float, base: str, port: int, bodies: Path, cli_cpus: str,
             work: Path) -> dict[str, tuple[list[str], dict | None]]:  # fmt: skip
    c = a.concurrency
    clients = {
        "wrk": (["taskset", "-c", cli_cpus, "wrk", "-t1", f"-c{c}", f"-d{d:g}s", "-s", str(LUA), base, "--",
                 str(bodies), "/v2/models/mul_1/infer"], None),
        "inferperf load": (_inferperf(c, d, base, cli_cpus, _out(work, "inferperf load")), None),
    }
    if a.before_src is not None:
        env = {**os.environ, "PYTHONPATH": str(a.before_src.resolve())}
        clients["inferperf load @before"] = (_inferperf(c, d, base, cli_cpus, _out(work, "inferperf load @before")),
                                             env)  # fmt: skip
    if a.open_rate:
        clients["inferperf load open"] = (_inferperf(c, d, base, cli_cpus, _out(work, "inferperf load open"),
                                                     a.open_rate), None)  # fmt: skip
        if a.before_src is not None:
            name = "inferperf load open @before"
            clients[name] = (_inferperf(c, d, base, cli_cpus, _out(work, name), a.open_rate),
                             clients["inferperf load @before"][1])  # fmt: skip
    if PA.exists():
        clients["perf_analyzer"] = (["taskset", "-c", cli_cpus, str(PA), "-m", "mul_1", "-u", f"127.0.0.1:{port}",
                                     "--concurrency-range", str(c), "--measurement-interval", str(int(d * 1000 / 3)),
                                     "--stability-percentage", "9999", "--max-trials", "3"], None)  # 3 windows = d
    if a.grpc_port is not None:
        gp = a.grpc_port
        grpc_load = _inferperf(c, d, f"grpc://127.0.0.1:{gp}", cli_cpus, _out(work, "inferperf load grpc"))
        clients["inferperf load grpc"] = ([x for x in grpc_load if x not in ("--protocol", "binary")], None)
        if PA.exists():
            clients["perf_analyzer grpc"] = (["taskset", "-c", cli_cpus, str(PA), "-m", "mul_1", "-u", f"127.0.0.1:{gp}",
                                              "-i", "grpc", "--concurrency-range", str(c), "--measurement-interval",
                                              str(int(d * 1000 / 3)), "--stability-percentage", "9999",
                                              "--max-trials", "3"], None)  # fmt: skip
    if LOCUST.exists():
        env = {**os.environ, "INFERPERF_LOCUST_MODEL": "mul_1", "INFERPERF_LOCUST_PROTOCOL": "binary"}
        clients["Locust FastHttpUser"] = (["taskset", "-c", cli_cpus, str(LOCUST), "-f",
                                           str(ROOT / "src/inferperf/loadgen/locust.py"), "--headless", "-u", str(c),
                                           "-r", str(c), "-t", f"{d:g}s", "--host", base, "--only-summary"], env)
    return clients


def _serve(model: Path, port: int, srv_cpu: str, grpc_port: int | None = None) -> subprocess.Popen:
    grpc = ["--grpc-port", str(grpc_port)] if grpc_port is not None else ["--no-grpc"]
    return subprocess.Popen(["taskset", "-c", srv_cpu, sys.executable, "-m", "inferperf", "serve", str(model),
                             "--port", str(port), "--max-batch-size", "0", *grpc],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def _one(a: argparse.Namespace, name: str, cmd: list[str], env: dict | None, base: str, work: Path) -> dict:
    row = _windowed(cmd, env, base, a.settle_s, a.window_s)
    if name.startswith("inferperf load"):
        doc = json.loads(_out(work, name).read_text())
        m = doc["metrics"]
        window_cpu_s = m["client"]["client_cpu_percent"] / 100 * m["throughput"]["duration_s"]
        row["self_req_per_cpu_s"] = m["latency_ms"]["count"] / window_cpu_s
        lag = m["client"].get("send_lag_ms") or {}
        row["lag_p99_ms"], row["lag_max_ms"] = lag.get("p99"), lag.get("max")
        row["achieved_rate"] = m["client"].get("achieved_rate")
    return row


def _rounds(a: argparse.Namespace, base: str, clients: dict, work: Path,
            proc: subprocess.Popen) -> tuple[dict, tuple]:  # fmt: skip
    rng = random.Random(0)
    rows: dict[str, list[dict]] = {k: [] for k in clients}
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
        for k in range(a.rounds):
            order = list(clients)
            rng.shuffle(order)
            for name in order:
                cmd, env = clients[name]
                rows[name].append(row := _one(a, name, cmd, env, base, work))
                print(f"  round {k + 1} {name}: {row['requests']} requests, {row['cpu_s']:.3f} client CPU-s in the "
                      f"window, {row['req_per_cpu_s']:,.0f} req/CPU-s, {row['req_per_s']:,.0f} req/s", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return rows, load_before


def _mm(xs: list[float], fmt: str = ",.0f") -> str:
    return f"{np.median(xs):{fmt}} [{min(xs):{fmt}}, {max(xs):{fmt}}]"


def _report(a: argparse.Namespace, rows: dict, load_before: tuple, srv_cpu: str, cli_cpus: str) -> None:
    print(f"\nload average before {tuple(round(x, 2) for x in load_before)}, after "
          f"{tuple(round(x, 2) for x in os.getloadavg())}; server CPU {srv_cpu}, clients {cli_cpus}; concurrency "
          f"{a.concurrency}; window {a.settle_s:g}-{a.settle_s + a.window_s:g} s after launch; {a.rounds} rounds "
          "(order shuffled)\n")
    print("| client | requests per client CPU-second, window: median [min, max] | per round | client CPU % | "
          "req/s | whole process (getrusage): median |")
    print("|---|---:|---|---:|---:|---:|")
    for k, v in rows.items():
        x = [r["req_per_cpu_s"] for r in v]
        print(f"| {k} | {_mm(x)} | {', '.join(f'{y:,.0f}' for y in x)} | "
              f"{np.median([r['cpu_percent'] for r in v]):.1f} | {np.median([r['req_per_s'] for r in v]):,.0f} | "
              f"{np.median([r['whole_req_per_cpu_s'] for r in v]):,.0f} |")
    for name in (k for k in rows if k.startswith("inferperf load")):
        v = rows[name]
        print(f"\n{name}, in-process check (its Result's CPU over its own measured span): "
              f"{_mm([r['self_req_per_cpu_s'] for r in v])}; external / in-process per round: "
              + ", ".join(f"{r['req_per_cpu_s'] / r['self_req_per_cpu_s']:.3f}" for r in v))
        if "open" in name:
            print(f"  open loop at {a.open_rate:g} req/s: achieved {_mm([r['achieved_rate'] for r in v])} req/s; "
                  f"send lag p99 {_mm([r['lag_p99_ms'] for r in v], '.3f')} ms, max "
                  f"{_mm([r['lag_max_ms'] for r in v], '.3f')} ms; target p99 < 1 ms: "
                  f"{'met' if max(r['lag_p99_ms'] for r in v) < 1 else 'not met'} (every round)")
    grpc, pa_grpc = rows.get("inferperf load grpc"), rows.get("perf_analyzer grpc")
    if grpc and pa_grpc:
        ratios = [m["req_per_cpu_s"] / p["req_per_cpu_s"] for m, p in zip(grpc, pa_grpc, strict=True)]
        print(f"\ninferperf load grpc / perf_analyzer grpc per round: {_mm(ratios, '.3f')} "
              f"({', '.join(f'{r:.3f}' for r in ratios)}); target >= 0.5: **{verdict(ratios, 0.5)}**")
    me = rows.get("inferperf load")
    if not me:
        return
    for peer, target in (("wrk", 0.5), ("perf_analyzer", None), ("inferperf load @before", None)):
        if peer not in rows:
            continue
        ratios = [m["req_per_cpu_s"] / p["req_per_cpu_s"] for m, p in zip(me, rows[peer], strict=True)]
        line = f"\ninferperf load / {peer} per round: {_mm(ratios, '.3f')} ({', '.join(f'{r:.3f}' for r in ratios)})"
        if target is not None:
            line += f"; target >= {target}: **{verdict(ratios, target)}**"
        elif peer == "perf_analyzer":
            pa = float(np.median([r["req_per_cpu_s"] for r in rows[peer]]))
            top = max(r["req_per_cpu_s"] for r in me)
            line += (f"; perf_analyzer's median {pa:,.0f} inside or below inferperf's interval (max {top:,.0f}): "
                     f"**{'met' if pa <= top else 'not met'}**")
        print(line)


if __name__ == "__main__":
    main()
