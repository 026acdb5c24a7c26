"""Token-stream agreement with the referee (issue 30 item 5, inferperf's side): ``inferperf load --api
openai-chat`` against ``inferperf serve --mock-generate``, whose log holds the true send time of every event,
at concurrency 1, 8, 32 and one open-loop rate.

Each step sends ``--requests`` N (warm-up 0), so step k is exactly the mock's requests k*N .. k*N+N-1 in
arrival order. Compared: TTFT p50 (client: first content event - scheduled send; mock: first content send -
arrival), ITL p50 (gaps between content events, both sides) and output tokens/s (client: the Result's; mock:
its tokens over its own span of those requests). The profile's inter-token gaps are >= 20 ms, so 5 % is above
the timing jitter of a loaded 2-core machine.

    python benchmarks/generate_agreement.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROFILE = ("prefill_base_ms: 40\nprefill_per_token_ms: 0.02\ndecode_base_ms: 20\ndecode_per_seq_ms: 0.25\n"
           "max_active: 16\n")  # fmt: skip
STEPS = [("--concurrency", "1", 16), ("--concurrency", "8", 32), ("--concurrency", "32", 64), ("--request-rate", "20", 60)]


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "p.yaml").write_text(PROFILE)
        log = tmp / "mock.jsonl"
        proc = subprocess.Popen([sys.executable, "-m", "inferperf", "serve", "--mock-generate", "--port", "0",
                                 "--mock-profile", str(tmp / "p.yaml"), "--mock-log", str(log)],
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout is not None
        end, url = time.monotonic() + 60, None
        while url is None and time.monotonic() < end:
            line = proc.stdout.readline()
            if line.startswith("MOCK token server"):
                url = re.search(r"http://[0-9.]+:[0-9]+", line).group()  # type: ignore[union-attr]
        try:
            results = []
            for k, (flag, value, n) in enumerate(STEPS):
                out = tmp / f"s{k}.json"
                subprocess.run([sys.executable, "-m", "inferperf", "load", str(url), "--api", "openai-chat", flag, value,
                                "--requests", str(n), "--warmup-s", "0", "--max-tokens", "16", "--input-tokens", "64",
                                "-o", str(out)], check=True, capture_output=True, timeout=600)  # fmt: skip
                results.append(json.loads(out.read_text()))
        finally:
            proc.terminate()
            proc.wait(30)
        true = [json.loads(x) for x in log.read_text().splitlines()]
    print(f"load average {os.getloadavg()}")
    print("| step | requests | TTFT p50 client / mock (ms) | diff | ITL p50 client / mock (ms) | diff |"
          " output tok/s client / mock | diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    first = 0
    for (flag, value, n), r in zip(STEPS, results):
        g, t = r["metrics"]["generation"], true[first : first + n]
        first += n
        mt = float(np.median([x["ttft_ms"] for x in t]))
        mi = float(np.median([y for x in t for y in x["itl_ms"]]))
        span = (max(x["done_ns"] for x in t) - min(x["arrived_ns"] for x in t)) / 1e9
        mr = sum(x["output_tokens"] for x in t) / span
        ct, ci, cr = g["ttft_ms"]["p50"], g["itl_ms"]["p50"], g["output_tokens_per_s"]
        print(f"| {flag[2:]} {value} | {n} | {ct:.2f} / {mt:.2f} | {100 * (ct / mt - 1):+.1f} % | {ci:.2f} / {mi:.2f} |"
              f" {100 * (ci / mi - 1):+.1f} % | {cr:.1f} / {mr:.1f} | {100 * (cr / mr - 1):+.1f} % |")


if __name__ == "__main__":
    main()
