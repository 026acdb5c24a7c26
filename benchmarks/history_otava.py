"""Issue 28 item 6: inferperf's change points against Apache Otava's on the same series, scored against the
planted truth, and the history gate's catch and false-alarm rates.

(a) Synthetic series (seeded): 100-500 points, a planted shift every 60-120 points (size 5, 10 or 20 %, up or
    down) at 3 or 5 % noise between points; and stationary A/A series of 200 points. A planted change is found
    when a detected change lies within 5 points of it; every other detected change is false.
(b) Real series: ``examples/history/results`` (real ``inferperf bench`` runs of the null backend, a planted
    change at run 11), each metric's per-point medians in time order (INVALID points left out, as history does).

Both detectors get the same medians and their defaults (window 50, p 0.001, no minimum effect); Otava runs in
its own venv (scripts/install_otava.sh) through benchmarks/otava_cp.py.

    python benchmarks/history_otava.py [--series 20] [--venv .venv-otava]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inferperf.analysis.changepoints import change_points  # noqa: E402


def planted(rng: np.random.Generator, size: float, noise: float) -> tuple[list[float], list[int]]:
    """A series of 100-500 points with a shift of ``size`` (up or down) every 60-120 points, and its truth."""
    n = int(rng.integers(100, 501))
    level, x, truth, i = 100.0, [], [], 0
    nxt = int(rng.integers(60, 121))
    while i < n:
        if i == nxt:
            level *= 1 + size * (1 if rng.random() < 0.5 else -1)
            truth.append(i)
            nxt += int(rng.integers(60, 121))
        x.append(level * (1 + noise * rng.standard_normal()))
        i += 1
    return x, truth


def score(found: list[int], truth: list[int], tol: int = 5) -> tuple[int, int, int]:
    """(planted changes found within ``tol`` points, false changes, planted changes)."""
    hit = sum(any(abs(f - t) <= tol for f in found) for t in truth)
    false = sum(not any(abs(f - t) <= tol for t in truth) for f in found)
    return hit, false, len(truth)


def otava(series: list[list[float]], venv: Path) -> tuple[list[list[int]], str]:
    doc = json.dumps({"series": series})
    p = subprocess.run([str(venv / "bin" / "python"), str(ROOT / "benchmarks" / "otava_cp.py")], input=doc,
                       capture_output=True, text=True, timeout=600, check=True)
    out = json.loads(p.stdout)
    return out["change_points"], out["version"]


def ours(series: list[list[float]]) -> list[list[int]]:
    return [[c.index for c in change_points(x)] for x in series]


def real_series() -> list[tuple[str, list[float], list[int]]]:
    """Each metric of examples/history/results: its medians in time order and the planted change's index."""
    from inferperf.history.series import drafts
    from inferperf.results.io import load

    files = sorted((ROOT / "examples" / "history" / "results").glob("*.json"))
    by_metric: dict[str, list[tuple[int, float]]] = {}
    for k, f in enumerate(files):
        r = load(f)
        if r.validity.verdict == "INVALID":
            continue
        for d in drafts(r):
            by_metric.setdefault(d.metric, []).append((k, d.median))
    out = []
    for metric, pts in by_metric.items():
        ks = [k for k, _ in pts]
        out.append((metric, [v for _, v in pts], [next(i for i, k in enumerate(ks) if k >= 10)]))
    return out


def gate_rates(n: int, rng: np.random.Generator) -> list[tuple[float, float, float]]:
    """(noise, share of 10 % slowdowns caught on the first point after them, false-alarm share) over ``n``
    series of 20 stationary points + 1, each point the median of 5 runs at that between-run noise."""
    import datetime as dt

    from inferperf.history.gate import judge
    from inferperf.history.query import Point, Series

    s = Series(1, "k", "s", "p50_ms", "lower", "m", {})
    t0 = dt.datetime(2026, 1, 1)

    def pts(levels, noise):
        out = []
        for i, lv in enumerate(levels):
            v = lv * (1 + noise * rng.standard_normal(5))
            out.append(Point(i, t0 + dt.timedelta(hours=i), None, None, v.tolist(), float(np.median(v)), None, None,
                             "r 1", "m|r 1", "VALID", None))
        return out

    rows = []
    for noise in (0.03, 0.04, 0.05):
        caught = alarms = 0
        for _ in range(n):
            lv = np.full(21, 100.0)
            alarms += judge(s, pts(lv, noise)).verdict == "regression"
            lv[-1] = 110.0
            caught += judge(s, pts(lv, noise)).verdict == "regression"
        rows.append((noise, caught / n, alarms / n))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=20, help="series per (size, noise)")
    ap.add_argument("--venv", type=Path, default=ROOT / ".venv-otava")
    a = ap.parse_args()
    rng = np.random.default_rng(28)
    rows = []
    version = "?"
    for noise in (0.03, 0.05):
        for size in (0.05, 0.10, 0.20, 0.0):
            if size:
                made = [planted(rng, size, noise) for _ in range(a.series)]
            else:
                made = [([100 * (1 + noise * rng.standard_normal()) for _ in range(200)], []) for _ in range(a.series)]
            xs = [x for x, _ in made]
            t0 = time.perf_counter()
            mine = ours(xs)
            t_ours = time.perf_counter() - t0
            t0 = time.perf_counter()
            theirs, version = otava(xs, a.venv)
            t_otava = time.perf_counter() - t0
            n_points = sum(map(len, xs))
            for name, found, secs in (("inferperf", mine, t_ours), ("otava", theirs, t_otava)):
                s = np.array([score(f, t) for f, (_, t) in zip(found, made)]).sum(axis=0)
                rows.append((noise, size, name, int(s[0]), int(s[2]), int(s[1]), n_points, secs))
    print(f"apache-otava {version}; {a.series} series per row; found = planted changes within 5 points")
    print("| noise | shift | detector | found / planted | false changes | false per 100 points | s |")
    print("|---|---|---|---|---|---|---|")
    for noise, size, name, hit, total, false, n, secs in rows:
        shift = f"{size * 100:.0f} %" if size else "none (A/A)"
        found = f"{hit} / {total} ({100 * hit / total:.0f} %)" if total else "-"
        print(f"| {noise * 100:.0f} % | {shift} | {name} | {found} | {false} | {100 * false / n:.2f} | {secs:.2f} |")
    print("\nhistory check, newest point (20 stationary points + 1; 5 runs per point; 200 series per row):")
    print("| between-run noise | 10 % slowdown caught on its first point | false alarms |")
    print("|---|---|---|")
    for noise, caught, alarms in gate_rates(200, rng):
        print(f"| {noise * 100:.0f} % | {caught * 100:.1f} % | {alarms * 100:.1f} % |")
    real = real_series()
    if real:
        theirs, _ = otava([x for _, x, _ in real], a.venv)
        print("\nexamples/history/results (real null-backend bench runs, planted change at run 11):")
        print("| metric | points | planted at | inferperf | otava |")
        print("|---|---|---|---|---|")
        for (metric, x, truth), o in zip(real, theirs):
            print(f"| {metric} | {len(x)} | {truth[0]} | {[c.index for c in change_points(x)]} | {o} |")


if __name__ == "__main__":
    main()
