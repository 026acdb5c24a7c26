"""Profiling overhead on PP-OCRv4 det and the ORT probe's peaks (issue 16; BENCHMARKS.md "Operator profiling").

Interleaved rounds: an unprofiled and a profiling session (same settings) alternate, R rounds of N runs each;
medians per side, ratio with the per-round spread. Then the probe's peak FLOP/s and bytes/s (fresh, not cached).

    python benchmarks/profile.py [--shape 640] [--threads 2] [--rounds 6] [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import tempfile
import time

import numpy as np
import onnxruntime as ort

from inferperf.analysis.profile import op_profile
from inferperf.backends.ort_probe import probe_peaks
from inferperf.zoo import resolve


def _sess(model: str, threads: int, prof: str | None) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 4
    if prof:
        so.enable_profiling = True
        so.profile_file_prefix = prof
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def main() -> None:
    """Run the benchmark described in the module docstring and print its tables."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, default=640)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    model = str(resolve("zoo:ppocr-det"))
    x = {"x": np.random.default_rng(0).random((1, 3, a.shape, a.shape), dtype=np.float32)}
    tmp = tempfile.mkdtemp()
    plain, prof = _sess(model, a.threads, None), _sess(model, a.threads, f"{tmp}/p")
    for s in (plain, prof):
        for _ in range(3):
            s.run(None, x)
    ratios, p_ms, u_ms = [], [], []
    for r in range(a.rounds):
        order = (plain, prof) if r % 2 == 0 else (prof, plain)  # ABBA-like alternation
        med = {}
        for s in order:
            ts = []
            for _ in range(a.runs):
                t0 = time.perf_counter_ns()
                s.run(None, x)
                ts.append((time.perf_counter_ns() - t0) / 1e6)
            med[id(s)] = float(np.median(ts))
        u_ms.append(med[id(plain)])
        p_ms.append(med[id(prof)])
        ratios.append(med[id(prof)] / med[id(plain)])
    p = op_profile(json.loads(pathlib.Path(prof.end_profiling()).read_text()), skip_runs=3)
    peaks = probe_peaks(a.threads, refresh=True)
    print(json.dumps({
        "shape": a.shape, "threads": a.threads, "rounds": a.rounds, "runs_per_round": a.runs,
        "unprofiled_ms_median": float(np.median(u_ms)), "profiled_ms_median": float(np.median(p_ms)),
        "ratio_median": float(np.median(ratios)), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "outside_kernels_percent": p["outside_kernels_percent"],
        "families_percent_of_kernels": {k: round(v, 1) for k, v in list(p["families_percent_of_kernels"].items())[:6]},
        "peak_gflops_per_s": peaks["peak_flops_per_s"] / 1e9, "peak_gbytes_per_s": peaks["peak_bytes_per_s"] / 1e9,
    }, indent=1))


if __name__ == "__main__":
    main()
