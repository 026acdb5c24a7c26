"""Is B faster than A? Throughput over interleaved runs, decided by the one interval rule, paired by round.

Used by the runtime comparison (``bench --backend a,b``) and by ``optimize``'s verdicts.

* A difference is called only when the Student's t 95 % intervals of the run-level throughputs
  separate (:func:`inferperf.stats.intervals_separate`).
* With fewer than :data:`MIN_RUNS` runs a t interval is too wide to decide (t(0.975, 1) = 12.7:
  from 2 runs the interval is about 9 standard deviations either side of the mean), so when the
  intervals do not separate the verdict is "too few runs", not "within noise", and it says how the
  rounds went: the rounds are interleaved, so run *i* of A is paired with run *i* of B
  ("slower in 2 of 2 rounds").
* Intervals are printed as computed (never clipped at 0); one whose lower bound falls below 0 (no
  rate lies there) is printed as "interval too wide (n=2)".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..results.model import Result
from ..stats import intervals_separate, mean_ci

#: runs per candidate below which an undecided comparison says "too few runs" (and suggests --repeat)
MIN_RUNS = 3


def raw_ci(per_run: Sequence[float]) -> list[float]:
    """Student's t 95 % interval of the mean of ``per_run`` (any unit), not clipped; ``[]`` for < 2 runs."""
    if len(per_run) < 2:
        return []
    lo, hi = mean_ci(list(per_run))
    return [lo, hi]


def format_ci(per_run: Sequence[float], digits: int = 4) -> str:
    """``[96.2, 104.1]`` (``digits`` significant digits), ``interval too wide (n=2)`` when the raw interval
    reaches below 0, or ``""`` with fewer than 2 runs (no interval exists)."""
    ci = raw_ci(per_run)
    if not ci:
        return ""
    if ci[0] < 0:
        return f"interval too wide (n={len(per_run)})"
    return f"[{sig(ci[0], digits)}, {sig(ci[1], digits)}]"


def sig(x: float | None, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits without exponent noise for ordinary magnitudes
    (``1.1492520570755005e-06`` -> ``1.149e-06``, ``1234.5678`` -> ``1235``, ``39431.2`` -> ``39431``, not
    ``3.943e+04``; ``0.0`` -> ``0``); ``-`` for None."""
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 10 ** digits:  # a whole number needs no exponent: keep every integer digit
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def compare_throughput(ref_runs: Sequence[float], var_runs: Sequence[float]) -> dict[str, Any]:
    """Throughput of a candidate against a reference, from their run-level figures in round order.

    Args:
        ref_runs, var_runs: queries/s of each run (``Throughput.per_run``), run *i* of each from round *i*.

    Returns:
        ``{"ratio", "significant", "direction", "runs", "slower_rounds", "faster_rounds", "too_few_runs",
        "ref_ci95", "var_ci95", "basis"}``: ``ratio`` = mean(var) / mean(ref) (> 1 = faster; NaN when the
        reference is 0); ``significant`` when the raw intervals separate; ``direction`` ``faster`` /
        ``slower`` only then; ``runs`` = rounds paired (the shorter list); ``too_few_runs`` when not
        significant with fewer than :data:`MIN_RUNS` runs of either.
    """
    ref, var = [float(x) for x in ref_runs], [float(x) for x in var_runs]
    mr = sum(ref) / len(ref) if ref else float("nan")
    mv = sum(var) / len(var) if var else float("nan")
    ratio = mv / mr if mr > 0 else float("nan")
    n = min(len(ref), len(var))
    slower = sum(1 for a, b in zip(ref, var) if b < a)
    faster = sum(1 for a, b in zip(ref, var) if b > a)
    rci, vci = raw_ci(ref), raw_ci(var)
    significant = intervals_separate(rci, vci)
    direction = ("faster" if mv > mr else "slower") if significant else None
    too_few = not significant and n < MIN_RUNS
    if n < 2:
        basis = f"{n} run per candidate: no interval (use --repeat >= {MIN_RUNS})"
    else:
        basis = f"throughput 95% CI over {n} runs"
    return {"ratio": ratio, "significant": significant, "direction": direction, "runs": n,
            "slower_rounds": slower, "faster_rounds": faster, "too_few_runs": too_few,
            "ref_ci95": rci, "var_ci95": vci, "basis": basis}


def rounds_text(s: dict[str, Any]) -> str:
    """``slower in 2 of 2 rounds`` (the majority side; ``faster``/``slower`` tie says both)."""
    n, sl, fa = s.get("runs", 0), s.get("slower_rounds", 0), s.get("faster_rounds", 0)
    if not n:
        return ""
    if sl > fa:
        return f"slower in {sl} of {n} round{'s' if n != 1 else ''}"
    if fa > sl:
        return f"faster in {fa} of {n} round{'s' if n != 1 else ''}"
    return f"faster in {fa}, slower in {sl} of {n} rounds"


def describe(s: dict[str, Any]) -> str:
    """One cell for a comparison from :func:`compare_throughput`.

    ``1.42x faster``, ``0.66x slower``, ``0.98x (within noise; slower in 2 of 3 rounds)``,
    ``0.16x (too few runs to decide: slower in 2 of 2 rounds; use --repeat >= 3)``,
    ``0.98x (1 run: no interval; use --repeat >= 3)``, ``-`` for no ratio.
    """
    r = s.get("ratio")
    if r is None or r != r:
        return "-"
    head = f"{r:.2f}x"
    if s.get("significant"):
        return f"{head} {s.get('direction') or ('faster' if r > 1 else 'slower')}"
    if "runs" not in s:  # a speed-up stored before runs were counted (older Result files)
        return f"{head} (within noise)"
    n = s["runs"]
    if n < 2:
        return f"{head} ({n} run: no interval; use --repeat >= {MIN_RUNS})"
    if s.get("too_few_runs"):
        return f"{head} (too few runs to decide: {rounds_text(s)}; use --repeat >= {MIN_RUNS})"
    return f"{head} (within noise; {rounds_text(s)})"


def speedup_of(ref: Result, r: Result) -> dict[str, Any]:
    """:func:`compare_throughput` of two pooled Results from the same interleaved rounds
    (``metrics.throughput.per_run`` in round order; a Result without ``per_run`` counts as one run)."""
    def runs(x: Result) -> list[float]:
        return list(x.metrics.throughput.per_run) or [x.metrics.throughput.queries_per_s]

    return compare_throughput(runs(ref), runs(r))
