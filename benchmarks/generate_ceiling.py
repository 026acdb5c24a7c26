"""Token-stream generator ceiling (issue 30 item 6): requests/s and output tokens/s per client CPU-second of
``inferperf load --api openai-chat``, NVIDIA AIPerf and GuideLLM against a zero-delay mock
(``inferperf serve --mock-generate`` with every latency constant 0), in interleaved rounds.

The mock is pinned to the last CPU, each client to CPU 0 (``taskset``; AIPerf's and GuideLLM's worker
processes inherit it), closed loop at ``--concurrency`` (16), ``--max-tokens`` (32) one-word events per
answer, 16-word prompts. Every client is a child process: its CPU is ``getrusage(RUSAGE_CHILDREN)`` around it
(user + sys, whole process tree), and the requests and tokens it got are counted by the mock (its
``--mock-log`` records written during the run: requests not cut short, content events sent), so every tool
is counted the same way. Whole-process figures charge each tool its start-up (AIPerf starts a dozen service
processes, GuideLLM imports torch), so every client also makes a short run (``--short-s``, 4) in the same
round, and the steady-state figure is the marginal one, (count_long - count_short) / (cpu_long - cpu_short),
which cancels every fixed cost alike (benchmarks/load_ceiling.py's method). The order of the clients rotates
each round. inferperf's Result also records its CPU over the measured window alone
(``metrics.client.client_cpu_percent``), printed beside as a check.

    python benchmarks/generate_ceiling.py [--rounds 3] [--duration-s 12] [--short-s 4] [--concurrency 16]
        [--max-tokens 32] [--clients inferperf,aiperf,guidellm]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_peers import make_tokenizer, read_log, run_arm, start_mock, stop_mock  # noqa: E402

ZERO = "prefill_base_ms: 0\nprefill_per_token_ms: 0\ndecode_base_ms: 0\ndecode_per_seq_ms: 0\nmax_active: 256\n"


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run(client: str, url: str, log: Path, tmp: Path, tok: Path, dur: float, args: argparse.Namespace) -> dict:
    before, cpu0 = len(read_log(log)), _cpu_s()
    out = tmp / f"{client}-{dur}" if client == "aiperf" else tmp / f"{client}-{dur}.json"
    fig = run_arm(client, url, "concurrency", args.concurrency, float(dur), out, tok, pin=["taskset", "-c", "0"],
                  tokens=(16, args.max_tokens))  # fmt: skip
    cpu = _cpu_s() - cpu0
    recs = [r for r in read_log(log)[before:] if len(r["send_ns"]) == r["output_tokens"] and not r["aborted"]]
    row = {"cpu": cpu, "req": len(recs), "tok": sum(len(r["send_ns"]) for r in recs)}
    if client == "inferperf":
        r = json.loads(out.read_text())
        g, c = r["metrics"]["generation"], r["metrics"]["client"]["client_cpu_percent"] / 100
        row["window_req_per_cpu_s"] = g["requests_per_s"] / c
    return row


def main() -> None:
    """Measure each client's marginal requests per client CPU-second over rotated rounds and print the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration-s", type=float, default=12.0)
    ap.add_argument("--short-s", type=float, default=4.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--clients", default="inferperf,aiperf,guidellm")
    args = ap.parse_args()
    clients = args.clients.split(",")
    cpus = sorted(os.sched_getaffinity(0))
    marg: dict[str, list[dict[str, float]]] = {c: [] for c in clients}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        tok = make_tokenizer(tmp / "tok")
        proc, url, log = start_mock(tmp, ZERO, cpus[-1])
        try:
            for k in range(args.rounds):
                for j in range(len(clients)):
                    c = clients[(j + k) % len(clients)]
                    short = _run(c, url, log, tmp, tok, args.short_s, args)
                    long = _run(c, url, log, tmp, tok, args.duration_s, args)
                    dc = long["cpu"] - short["cpu"]
                    m = {"req_per_cpu_s": (long["req"] - short["req"]) / dc, "tok_per_cpu_s": (long["tok"] - short["tok"]) / dc,
                         "whole_req_per_cpu_s": long["req"] / long["cpu"], "req_per_s": long["req"] / args.duration_s,
                         "cpu_long": long["cpu"], "cpu_short": short["cpu"]}  # fmt: skip
                    if "window_req_per_cpu_s" in long:
                        m["window_req_per_cpu_s"] = long["window_req_per_cpu_s"]
                    marg[c].append(m)
                    print(f"round {k} {c}: short {short} long {long} -> {m}", file=sys.stderr)
        finally:
            stop_mock(proc)
    print(f"load average {os.getloadavg()}")
    cols = (("req_per_cpu_s", "requests per client CPU-s (marginal)"), ("tok_per_cpu_s", "output tokens per client"
            " CPU-s (marginal)"), ("whole_req_per_cpu_s", "requests per CPU-s (whole process, long run)"),
            ("req_per_s", "requests/s (long run, approx.)"), ("cpu_long", "client CPU-s (long run)"),
            ("window_req_per_cpu_s", "requests per CPU-s (measured window, own Result)"))  # fmt: skip
    print("| client | " + " | ".join(t for _, t in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    med = {}
    for c, rows in marg.items():
        cells = []
        for key, _ in cols:
            v = [r[key] for r in rows if key in r]
            cells.append(f"{np.median(v):,.0f} [{min(v):,.0f}, {max(v):,.0f}]" if v else "")
        med[c] = float(np.median([r["req_per_cpu_s"] for r in rows]))
        print(f"| {c} | " + " | ".join(cells) + " |")
    peers = [c for c in med if c != "inferperf"]
    if "inferperf" in med and peers:
        best = max(peers, key=lambda c: med[c])
        ratio = med["inferperf"] / med[best]
        print(f"inferperf / {best} (the better peer), requests per CPU-s: {ratio:.2f}x"
              f" ({'met' if ratio >= 1.5 else 'NOT met'}: target >= 1.5x)")


if __name__ == "__main__":
    main()
