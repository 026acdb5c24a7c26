"""Token-stream generator ceiling (issue 30 item 6): requests/s and output tokens/s per client CPU-second of
``inferperf load --api openai-chat`` against a zero-delay mock (``inferperf serve --mock-generate`` with every
latency constant 0), in rounds.

The mock is pinned to the last CPU, the client to CPU 0 (``taskset``), closed loop at ``--concurrency`` (16),
``--max-tokens`` (32) one-word events per answer, for ``--duration-s`` (8) after a 1 s warm-up. The figures come
from inferperf's own Result: ``metrics.generation.requests_per_s`` and ``output_tokens_per_s`` over the
measured window, divided by the client's CPU over that window (``metrics.client.client_cpu_percent`` / 100).
The mock's own log (``--mock-log``) gives its count of events sent in the run, printed beside as a check.
AIPerf and GuideLLM are not measured here (their venvs are not installed on this machine): the peer columns
of the target ">= 1.5x the better peer" remain to be filled.

    python benchmarks/generate_ceiling.py [--rounds 3] [--duration-s 8] [--concurrency 16] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ZERO = "prefill_base_ms: 0\nprefill_per_token_ms: 0\ndecode_base_ms: 0\ndecode_per_seq_ms: 0\nmax_active: 256\n"


def _start_mock(tmp: Path, cpu: int) -> tuple[subprocess.Popen, str, Path]:
    (tmp / "zero.yaml").write_text(ZERO)
    log = tmp / "mock.jsonl"
    proc = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-m", "inferperf", "serve", "--mock-generate",
                             "--port", "0", "--mock-profile", str(tmp / "zero.yaml"), "--mock-log", str(log)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    end = time.monotonic() + 60
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if line.startswith("MOCK token server"):
            return proc, re.search(r"http://[0-9.]+:[0-9]+", line).group(), log  # type: ignore[union-attr]
    proc.kill()
    raise SystemExit("the mock did not start")


def _round(url: str, out: Path, args: argparse.Namespace) -> dict[str, float]:
    subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "inferperf", "load", url, "--api", "openai-chat",
                    "--concurrency", str(args.concurrency), "--duration-s", str(args.duration_s), "--warmup-s", "1",
                    "--max-tokens", str(args.max_tokens), "--input-tokens", "16", "-o", str(out)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    r = json.loads(out.read_text())
    g, cpu = r["metrics"]["generation"], r["metrics"]["client"]["client_cpu_percent"] / 100
    return {"req_per_s": g["requests_per_s"], "tok_per_s": g["output_tokens_per_s"], "cpu": cpu,
            "req_per_cpu_s": g["requests_per_s"] / cpu, "tok_per_cpu_s": g["output_tokens_per_s"] / cpu}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration-s", type=float, default=8.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        proc, url, log = _start_mock(tmp, cpus[-1])
        try:
            rows = [_round(url, tmp / f"r{k}.json", args) for k in range(args.rounds)]
        finally:
            proc.terminate()
            proc.wait(30)
        events = sum(rec["output_tokens"] for rec in map(json.loads, log.read_text().splitlines()))
    print(f"load average {os.getloadavg()}; mock sent {events} content events over all rounds (warm-up included)")
    for key, label in (("req_per_cpu_s", "requests per client CPU-second"), ("tok_per_cpu_s", "output tokens per"
                       " client CPU-second"), ("req_per_s", "requests/s"), ("tok_per_s", "output tokens/s"),
                       ("cpu", "client CPU (cores)")):  # fmt: skip
        v = [r[key] for r in rows]
        print(f"| inferperf load --api openai-chat | {label} | {np.median(v):,.2f} [{min(v):,.2f}, {max(v):,.2f}] |")


if __name__ == "__main__":
    main()
