"""Token-stream agreement (issue 30 item 5): ``inferperf load --api openai-chat``, NVIDIA AIPerf and GuideLLM
against the same ``inferperf serve --mock-generate``, whose log holds the true send time of every event, at
concurrency 1, 8, 32 and one open-loop rate (constant arrivals).

Each arm sends exactly ``n`` requests (no warm-up) of 64 input and 16 output tokens (one word, one token,
one event each; ``ignore_eos``); the arms of a step run one after the other, in a rotated order per step, and
the mock's records written during an arm are that arm's truth. Figures and their definitions, per client, are
mapped in benchmarks/gen_peers.py: TTFT p50, ITL p50 (per gap), TPOT p50 (per request, (last - first) /
(n - 1): what AIPerf and GuideLLM call "inter token latency"), output tokens/s. The profile's inter-token gaps
are >= 20 ms, so 5 % is above the timing jitter of a loaded 2-core machine. Needs the venvs of
scripts/install_aiperf.sh and scripts/install_guidellm.sh (``--peers`` to choose).

    python benchmarks/generate_agreement.py [--peers inferperf,aiperf,guidellm] [--scale 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_peers import make_tokenizer, read_log, run_arm, start_mock, stop_mock, truth  # noqa: E402

PROFILE = ("prefill_base_ms: 40\nprefill_per_token_ms: 0.02\ndecode_base_ms: 20\ndecode_per_seq_ms: 0.25\n"
           "max_active: 16\n")  # fmt: skip
STEPS = [("concurrency", 1, 16), ("concurrency", 8, 32), ("concurrency", 32, 64), ("rate", 20, 60)]
FIGS = (("ttft", "TTFT p50 ms"), ("itl", "ITL p50 ms"), ("tpot", "TPOT p50 ms"), ("tok_s", "output tok/s"))


def _pct(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None else f"{100 * (a / b - 1):+.1f} %"


def main() -> None:
    """Run every client against one mock at each step, rotating their order, and print the agreement table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="inferperf,aiperf,guidellm")
    ap.add_argument("--scale", type=float, default=1.0, help="requests per step x this (a short trial run)")
    args = ap.parse_args()
    peers = args.peers.split(",")
    rows: list[tuple[str, str, dict, dict, int]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        tok = make_tokenizer(tmp / "tok")
        proc, url, log = start_mock(tmp, PROFILE)
        try:
            for k, (mode, value, n0) in enumerate(STEPS):
                n = max(4, int(n0 * args.scale))
                for j in range(len(peers)):
                    peer = peers[(j + k) % len(peers)]
                    before = len(read_log(log))
                    out = tmp / f"{peer}-{k}" if peer == "aiperf" else tmp / f"{peer}-{k}.json"
                    fig = run_arm(peer, url, mode, value, n, out, tok)
                    recs = read_log(log)[before:]
                    rows.append((f"{mode} {value}", peer, fig, truth(recs), len(recs)))
                    print(f"{mode} {value} {peer}: {fig} truth {rows[-1][3]} ({len(recs)} requests)", file=sys.stderr)
        finally:
            stop_mock(proc)
    print(f"load average {os.getloadavg()}")
    print("| step | client | requests | " + " | ".join(f"{t} client / mock | diff" for _, t in FIGS)
          + " | vs inferperf (TTFT, ITL, TPOT, tok/s) |")  # fmt: skip
    print("|---|---|---:|" + "---:|---:|" * len(FIGS) + "---|")
    ours = {step: fig for step, peer, fig, _, _ in rows if peer == "inferperf"}
    worst: dict[str, float] = {}
    for step, peer, fig, tr, n in rows:
        cells = []
        for key, _ in FIGS:
            c, t = fig[key], tr[key]
            cells.append("n/a | " if c is None else f"{c:.2f} / {t:.2f} | {_pct(c, t)}")
            if c is not None:
                worst[peer] = max(worst.get(peer, 0.0), abs(c / t - 1))
        ref = ours.get(step)
        vs = ", ".join(_pct(fig[k], ref[k]) or "n/a" for k, _ in FIGS) if ref and peer != "inferperf" else ""
        print(f"| {step} | {peer} | {n} | " + " | ".join(cells) + f" | {vs} |")
    for step, peer, fig, tr, _ in rows:
        if "ttft_np" in fig:
            print(f"{step} {peer}: numpy median of its per-request TTFTs {fig['ttft_np']:.2f} ms"
                  f" ({_pct(fig['ttft_np'], tr['ttft'])} from the mock's)")
    for peer, w in worst.items():
        print(f"{peer}: largest difference from the mock's truth {100 * w:.1f} % ({'met' if w <= 0.05 else 'NOT met'})")


if __name__ == "__main__":
    main()
