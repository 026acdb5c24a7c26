"""The memory allocator as a sweep axis (issue 31 item 3): system malloc vs jemalloc vs tcmalloc, LD_PRELOAD-ed
into each worker. One ``inferperf sweep --allocator system,jemalloc,tcmalloc --repeat R`` (each case once per
round, rounds shuffled, a fresh worker per run), then per allocator: queries/s (mean over runs, Student's t 95 %
CI), its ratio to system malloc paired by round (t CI over rounds), p50 / p99 over the pooled samples, and the
peak RSS of the highest run (resource sampler). ``--from DIR`` only reads a sweep folder already written.

    python benchmarks/allocator.py zoo:squeezenet --repeat 3 --seconds 3
    python benchmarks/allocator.py zoo:ppocr-det --shape x:1x3x640x640 --repeat 2 --seconds 4
    python benchmarks/allocator.py --from DIR
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from inferperf.results.io import load
from inferperf.stats import mean_ci


def _sweep(model: str, repeat: int, seconds: float, threads: int, shape: list[str], out: Path) -> None:
    subprocess.run([sys.executable, "-m", "inferperf", "sweep", model, "--intra-op-num-threads", str(threads),
                    *[x for s in shape for x in ("--shape", s)],
                    "--allocator", "system,jemalloc,tcmalloc", "--repeat", str(repeat), "--duration-s",
                    str(seconds), "--warmup", "5", "-o", str(out)], check=True)


def table(folder: Path) -> str:
    """The Markdown table of a sweep folder's pooled cases (``cases/*.json``), one row per allocator."""
    cases = {r.config.allocator: r for r in (load(p) for p in sorted((folder / "cases").glob("*.json")))}
    by_round = {name: {run["repeat_index"]: q for run, q in zip(r.run["runs"], r.metrics.throughput.per_run,
                                                                 strict=True)}
                for name, r in cases.items()}
    rows = ["| allocator | loaded | queries/s (mean, 95 % CI) | ratio vs system (paired by round, 95 % CI) |"
            " p50 ms | p99 ms | peak RSS MiB | runs |", "|---|---|---|---|---|---|---|---|"]
    for name in ("system", "jemalloc", "tcmalloc"):
        r = cases.get(name)
        if r is None:
            continue
        t = r.metrics.throughput
        ci = t.queries_per_s_ci95 or [float("nan")] * 2
        ratios = [q / by_round["system"][k] for k, q in by_round[name].items() if k in by_round.get("system", {})]
        rlo, rhi = mean_ci(ratios) if len(ratios) > 1 else (float("nan"), float("nan"))
        loaded = ",".join(sorted({run.get("allocator", "?") for run in r.run["runs"]}))
        invalid = len({why.split(":")[0] for why in r.validity.reasons if why.startswith("run ")})
        rss = (r.metrics.resources.rss_peak_bytes or 0) / 2**20 if r.metrics.resources else float("nan")
        rows.append(f"| {name} | {loaded} | {t.queries_per_s:.1f} [{ci[0]:.1f}, {ci[1]:.1f}] |"
                    f" {sum(ratios) / len(ratios):.3f} [{rlo:.3f}, {rhi:.3f}] | {r.metrics.latency_ms.p50:.2f} |"
                    f" {r.metrics.latency_ms.p99:.2f} | {rss:.1f} | {len(r.run['runs'])} runs,"
                    f" {invalid} INVALID |")
    return "\n".join(rows)


def main() -> None:
    """Run (or read) the sweep and print its table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="zoo:squeezenet")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shape", action="append", default=[], help="NAME:AxB (e.g. x:1x3x640x640 for zoo:ppocr-det)")
    ap.add_argument("--from", dest="folder", type=Path)
    a = ap.parse_args()
    folder = a.folder
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="inferperf-allocator-"))
        _sweep(a.model, a.repeat, a.seconds, a.threads, a.shape, folder)
    print(table(folder))


if __name__ == "__main__":
    main()
