"""Which HTTP client should ``inferperf load`` use? Requests per client CPU-second, measured.

A trivial ASGI endpoint (uvicorn, httptools, answers ``ok``) runs in its own
process pinned to one CPU; each client runs in a fresh process pinned to
another CPU and keeps CONCURRENCY keep-alive requests in flight for DURATION_S.
Reported: requests/s and requests per client CPU-second (user + system), per
client, in interleaved rounds (this machine is noisy).

Clients: raw asyncio streams (inferperf.loadgen.transport.HttpTransport),
aiohttp (ClientSession, TCPConnector(limit=CONCURRENCY)), httpx (AsyncClient,
Limits(max_connections=CONCURRENCY)).

Run: python benchmarks/load_client.py [--rounds 2] [--duration-s 3] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time

SERVER = """
import os, sys, uvicorn
os.sched_setaffinity(0, [int(sys.argv[2])])
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False, http="httptools")
"""


async def _raw(url: str, conc: int, until: float) -> int:
    from inferperf.loadgen.transport import Endpoint, HttpTransport, build_request

    t = HttpTransport(url)
    req = build_request(Endpoint.parse(url), "GET", "/")
    n = 0

    async def one() -> None:
        nonlocal n
        c = await t.connect()
        while time.perf_counter() < until:
            await c.send(req)
            n += 1
        c.close()

    await asyncio.gather(*(one() for _ in range(conc)))
    return n


async def _aiohttp(url: str, conc: int, until: float) -> int:
    import aiohttp

    n = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as s:

        async def one() -> None:
            nonlocal n
            while time.perf_counter() < until:
                async with s.get(url) as r:
                    await r.read()
                n += 1

        await asyncio.gather(*(one() for _ in range(conc)))
    return n


async def _httpx(url: str, conc: int, until: float) -> int:
    import httpx

    n = 0
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=conc)) as c:

        async def one() -> None:
            nonlocal n
            while time.perf_counter() < until:
                r = await c.get(url)
                r.read()
                n += 1

        await asyncio.gather(*(one() for _ in range(conc)))
    return n


CLIENTS = {"asyncio-streams": _raw, "aiohttp": _aiohttp, "httpx": _httpx}


def client_main(name: str, url: str, conc: int, duration_s: float, cpu: int) -> None:
    os.sched_setaffinity(0, [cpu])
    t0, c0 = time.perf_counter(), os.times()
    n = asyncio.run(CLIENTS[name](url, conc, time.perf_counter() + duration_s))
    wall, c1 = time.perf_counter() - t0, os.times()
    cpu_s = (c1.user - c0.user) + (c1.system - c0.system)
    print(json.dumps({"client": name, "requests": n, "wall_s": wall, "cpu_s": cpu_s}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration-s", type=float, default=3.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--client", nargs=4)  # internal: name url conc duration
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if a.client:
        client_main(a.client[0], a.client[1], int(a.client[2]), float(a.client[3]), cpus[0])
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(cpus[-1])])
    url = f"http://127.0.0.1:{port}/"
    try:
        time.sleep(2.0)
        rows: dict[str, list[dict]] = {k: [] for k in CLIENTS}
        for _ in range(a.rounds):
            for name in CLIENTS:
                out = subprocess.run([sys.executable, __file__, "--client", name, url, str(a.concurrency),
                                      str(a.duration_s)], capture_output=True, text=True, check=True)  # fmt: skip
                rows[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        srv.terminate()
        srv.wait(10)
    print(f"{'client':<16} {'req/s':>9} {'req/CPU-s':>10}  (per round)")
    for name, rs in rows.items():
        rps = [r["requests"] / r["wall_s"] for r in rs]
        per_cpu = [r["requests"] / max(r["cpu_s"], 1e-9) for r in rs]
        print(f"{name:<16} {sum(rps) / len(rps):>9.0f} {sum(per_cpu) / len(per_cpu):>10.0f}  "
              f"{[round(x) for x in per_cpu]}")  # fmt: skip


if __name__ == "__main__":
    main()
