"""Regression verdicts between two sets of Results: the CI performance gate behind ``inferperf compare``.

Per matched case and metric (throughput, p50, p99, cold start, peak RSS): baseline, current,
change in %, a 95 % confidence interval of the change (from the variation between runs, see
:mod:`inferperf.analysis.compare.stats`) and a verdict against the metric's threshold, in the
metric's direction (throughput down is bad; latency, cold start and memory up are bad):

* ``regressed``: the interval lies past the threshold on the bad side, and the one-sided test of
  "not past the threshold" still rejects after the multiple-testing correction over every
  case x metric tested (Holm's, controlling the family-wise false-alarm rate, by default; or
  Benjamini-Hochberg's false-discovery rate) at the one-sided level 0.025 of a 95 % interval;
* ``improved``: the same on the good side (its own family);
* ``unchanged``: the interval lies inside both thresholds (significant or not);
* ``inconclusive``: anything else: the interval straddles a threshold, or too few runs to tell.

The gate fails (exit 3) on any ``regressed``; with ``strict`` also on an ``inconclusive`` whose
interval reaches past the regression threshold (or that had too few runs to tell).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ...errors import UsageError
from ...significance import adjust
from ...stats import UNBOUNDED_TEXT, bounded
from ..points import case_label, point
from .checks import not_comparable
from .data import Case, MatchMode, config_key, load_side, match_cases
from .stats import Change, block_change, run_change

Verdict = Literal["regressed", "improved", "unchanged", "inconclusive"]
Correction = Literal["holm", "bh"]
#: One-sided level of each test: that of a two-sided 95 % interval.
ONE_SIDED_ALPHA = 0.025


@dataclass(frozen=True)
class Metric:
    """A compared figure: its name, unit, direction, gate flag and default threshold (a fraction)."""

    name: str
    label: str
    unit: str
    higher_is_better: bool
    flag: str
    default: float
    scale: float = 1.0  # display unit per stored unit
    window: int | None = None  # column of the window rows (qps, p50, p99) for one-run blocks
    percentile: bool = False  # a latency percentile: its per-run mean is labelled, the pooled one shown beside


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("throughput", "throughput", "queries/s", True, "max-throughput-drop", 0.05, window=0),
    Metric("p50", "p50 latency", "ms", False, "max-p50-increase", 0.05, window=1, percentile=True),
    Metric("p99", "p99 latency", "ms", False, "max-p99-increase", 0.10, window=2, percentile=True),
    Metric("cold_start", "cold start", "ms", False, "max-cold-start-increase", 0.20),
    Metric("rss_peak", "peak RSS", "MiB", False, "max-rss-increase", 0.10, scale=1 / 2**20),
    # token streams (load --api openai-*: metrics.generation); compared when named in --metrics
    Metric("ttft_p50", "TTFT p50", "ms", False, "max-ttft-increase", 0.05),
    Metric("itl_p50", "ITL p50", "ms", False, "max-itl-increase", 0.05),
    Metric("output_tokens_per_s", "output tokens/s", "tokens/s", True, "max-tokens-per-s-drop", 0.05),
)}
#: the metrics compared unless ``--metrics`` names others (the token-stream ones are asked for by name).
DEFAULT_METRICS = ("throughput", "p50", "p99", "cold_start", "rss_peak")


@dataclass
class Gate:
    """What fails the gate.

    Attributes:
        thresholds: metric name -> largest tolerated change in the bad direction, as a fraction
            (0.05 = 5 %); metrics not named get :attr:`Metric.default`.
        metrics: the metrics compared (default: :data:`DEFAULT_METRICS`; the token-stream ones of
            :data:`METRICS`, ``ttft_p50``, ``itl_p50`` and ``output_tokens_per_s``, by name).
        strict: fail on ``inconclusive`` results that may be regressions, too.
        correction: ``holm`` (family-wise error) or ``bh`` (false-discovery rate).
    """

    thresholds: dict[str, float] = field(default_factory=dict)
    metrics: tuple[str, ...] = DEFAULT_METRICS
    strict: bool = False
    correction: Correction = "holm"

    def threshold(self, metric: str) -> float:
        """The fraction tolerated for ``metric``."""
        return self.thresholds.get(metric, METRICS[metric].default)

    def check(self) -> None:
        """Raises UsageError on an unknown metric, a threshold outside [0, 1) or an unknown correction."""
        for m in (*self.metrics, *self.thresholds):
            if m not in METRICS:
                raise UsageError(f"unknown metric {m!r} in the gate: use {', '.join(METRICS)}")
        for m, t in self.thresholds.items():
            if not 0.0 <= t < 1.0:
                raise UsageError(f"--{METRICS[m].flag} {t * 100:g}% is outside 0-100 %: give e.g. 5%")
        if self.correction not in ("holm", "bh"):
            raise UsageError(f"unknown correction {self.correction!r}: use holm or bh")


@dataclass
class Row:
    """One case x metric. Values in the metric's display unit; ``baseline``/``current``: the mean of the
    per-run figures (for p50/p99 the mean of per-run percentiles, named in ``figure``; ``pooled``: the pooled
    percentile of each side when a side is one Result, else ``None``); ``change``/``low``/``high`` in % (``None``
    when not estimable); ``p_regressed``: the corrected one-sided p-value of a regression (``None``: untested)."""

    case: str
    metric: str
    unit: str
    direction: str
    threshold_pct: float
    baseline: float | None
    current: float | None
    n: tuple[int, int]
    change: float | None = None
    low: float | None = None
    high: float | None = None
    verdict: Verdict = "inconclusive"
    method: str = ""
    why: str = ""
    p_regressed: float | None = None
    may_regress: bool = True
    figure: str = ""
    pooled: tuple[float | None, float | None] | None = None

    @property
    def bounded(self) -> bool:
        """True when the interval has two finite ends (Fieller's set is the whole line, or two rays, when the
        baseline's mean is not significantly above 0: no claim then)."""
        return bounded([self.low, self.high])

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``--format json`` (``change_pct``, ``ci95_pct`` ...)."""
        return {"case": self.case, "metric": self.metric, "unit": self.unit, "direction": self.direction,
                "threshold_pct": self.threshold_pct, "baseline": self.baseline, "current": self.current,
                "change_pct": self.change, "ci95_pct": [self.low, self.high] if self.bounded else None,
                "verdict": self.verdict, "method": self.method, "why": self.why, "runs": list(self.n),
                "p_regressed_adjusted": self.p_regressed, "figure": self.figure,
                "pooled": None if self.pooled is None else list(self.pooled)}


@dataclass
class Comparison:
    """Everything ``compare`` found. ``cases``: one dict per matched pair (label, keys, model hashes, config);
    ``unmatched``: labels per side; ``warnings``: not-comparable findings; ``notes``: how it was judged."""

    match: str
    gate: Gate
    cases: list[dict[str, Any]]
    rows: list[Row]
    unmatched: dict[str, list[str]]
    warnings: list[str]
    notes: list[str]

    @property
    def failures(self) -> list[Row]:
        """The rows that fail the gate."""
        return [r for r in self.rows if r.verdict == "regressed"
                or (self.gate.strict and r.verdict == "inconclusive" and r.may_regress)]

    @property
    def exit_code(self) -> int:
        """0 when nothing fails the gate, 3 when something does."""
        return 3 if self.failures else 0

    def counts(self) -> dict[str, int]:
        """Rows per verdict."""
        out = {v: 0 for v in ("regressed", "improved", "unchanged", "inconclusive")}
        for r in self.rows:
            out[r.verdict] += 1
        return out


def _values(case: Case, metric: Metric) -> list[float]:
    return [run.figures[metric.name] for run in case.runs if metric.name in run.figures]


def _blocks(case: Case, metric: Metric) -> list[float]:
    if metric.window is None:
        return []
    return [w[metric.window] for run in case.runs for w in run.windows]


def _change(base: Case, cur: Case, metric: Metric) -> tuple[Change | None, str]:
    """The interval of the change, and why there is none."""
    b, c = _values(base, metric), _values(cur, metric)
    if len(b) >= 2 and len(c) >= 2:
        return run_change(b, c), "baseline mean not above zero"
    imported = sorted({str(r.run.get("imported")) for r in (*base.results, *cur.results) if r.run.get("imported")})
    if imported:  # a summary-only import (Locust's CSV): its history rows are Locust's own rolling figures, not
        # independent blocks of raw samples, so no within-run interval is made from them
        return None, (f"summary-only Results imported from {', '.join(imported)} hold no raw samples: compare "
                      f"several imported runs a side (one CSV per run) for an interval ({len(b)} vs {len(c)} here)")
    bb, cb = _blocks(base, metric), _blocks(cur, metric)
    if bb and cb and b and c and np.mean(b) > 0:
        ch = block_change(bb, cb, float(np.mean(c) / np.mean(b)))
        if ch is not None:
            return ch, ""
    return None, f"too few runs to tell ({len(b)} vs {len(c)}): use --repeat 5 (each run a fresh process)"


def _pooled(case: Case, metric: Metric) -> float | None:
    """The side's pooled percentile (ms) when the side is one Result (its own summary of all its samples)."""
    if len(case.results) != 1:
        return None
    return float(getattr(case.first.metrics.latency_ms, metric.name))


def _row(label: str, base: Case, cur: Case, metric: Metric, gate: Gate) -> tuple[Row, Change | None]:
    b, c = _values(base, metric), _values(cur, metric)
    t = gate.threshold(metric.name)
    row = Row(label, metric.name, metric.unit, "higher is better" if metric.higher_is_better else "lower is better",
              round(t * 100, 6), float(np.mean(b)) * metric.scale if b else None,
              float(np.mean(c)) * metric.scale if c else None, (len(b), len(c)))
    row.figure = f"mean of per-run {metric.name}" if metric.percentile else f"mean of per-run {metric.label}"
    if metric.percentile:
        row.pooled = (_pooled(base, metric), _pooled(cur, metric))
    if not b or not c:
        row.why, row.may_regress = "not measured on both sides", False
        return row, None
    ch, why = _change(base, cur, metric)
    row.change = (float(np.mean(c)) / float(np.mean(b)) - 1) * 100 if np.mean(b) > 0 else None
    if ch is None:
        row.why = why
        return row, None
    row.method = ch.method
    row.change = (ch.ratio - 1) * 100
    row.low = (ch.low - 1) * 100 if math.isfinite(ch.low) else -math.inf
    row.high = (ch.high - 1) * 100 if math.isfinite(ch.high) else math.inf
    return row, ch


def _bounds(metric: Metric, t: float) -> tuple[float, float]:
    """(bad bound, good bound) on the ratio."""
    return (1 - t, 1 + t) if metric.higher_is_better else (1 + t, 1 - t)


def _judge(rows: list[tuple[Row, Change | None]], gate: Gate) -> None:
    """Set every row's verdict: tests past the bad and good bounds, corrected across rows."""
    tested = [(r, ch) for r, ch in rows if ch is not None]
    p_bad, p_good = [], []
    for r, ch in tested:
        m = METRICS[r.metric]
        bad, good = _bounds(m, gate.threshold(r.metric))
        p_bad.append(ch.p_below(bad) if m.higher_is_better else ch.p_above(bad))
        p_good.append(ch.p_above(good) if m.higher_is_better else ch.p_below(good))
    adj_bad = adjust(p_bad, gate.correction, ONE_SIDED_ALPHA).pvalues if tested else ()
    adj_good = adjust(p_good, gate.correction, ONE_SIDED_ALPHA).pvalues if tested else ()
    name = "Holm" if gate.correction == "holm" else "Benjamini-Hochberg"
    tests = f"{len(tested)} test{'s' if len(tested) != 1 else ''}"
    for (r, ch), pb, pg, raw_b, raw_g in zip(tested, adj_bad, adj_good, p_bad, p_good):
        m = METRICS[r.metric]
        bad, good = _bounds(m, gate.threshold(r.metric))
        lo, hi = ch.low, ch.high
        past_bad = hi < bad if m.higher_is_better else lo > bad
        past_good = lo > good if m.higher_is_better else hi < good
        r.p_regressed = pb
        r.may_regress = (lo < bad) if m.higher_is_better else (hi > bad)
        if past_bad and pb <= ONE_SIDED_ALPHA:
            r.verdict, r.why = "regressed", f"the interval lies past the {r.threshold_pct:g} % threshold"
        elif past_good and pg <= ONE_SIDED_ALPHA:
            r.verdict, r.why = "improved", f"the interval lies past the {r.threshold_pct:g} % threshold"
        elif min(bad, good) <= lo and hi <= max(bad, good):
            r.verdict, r.why = "unchanged", f"the interval lies inside +/-{r.threshold_pct:g} %"
        elif past_bad or past_good:  # the interval inverts the same test: only the correction can hold it back
            raw, adj = (raw_b, pb) if past_bad else (raw_g, pg)
            r.why = (f"past the threshold (one-sided p {raw:.3g}), but not after {name}'s correction over {tests}"
                     f" (adjusted p {adj:.3g} > {ONE_SIDED_ALPHA})")
        elif not r.bounded:
            r.why = (f"95 % CI {UNBOUNDED_TEXT}: the baseline's per-run {r.metric} varies too much to bound the ratio"
                     " (its mean is not significantly above 0): use more --repeat or a quieter machine")
        else:
            r.why = f"the interval straddles the {r.threshold_pct:g} % threshold"


def _case_info(base: Case, cur: Case) -> dict[str, Any]:
    b, c = base.first, cur.first
    return {"case": case_label(point(c)), "case_key": {"baseline": b.case_key, "current": c.case_key},
            "model": {"baseline": {"path": b.model.path, "sha256": b.model.sha256},
                      "current": {"path": c.model.path, "sha256": c.model.sha256}},
            "config": {"backend": c.config.backend, "scenario": c.config.scenario,
                       "concurrency": c.config.concurrency, "batch_size": c.config.workload.batch_size,
                       "shapes": c.config.workload.shapes, "session": c.config.session.requested},
            "runs": {"baseline": len(base.runs), "current": len(cur.runs)},
            "files": {"baseline": [str(p) for p in base.paths], "current": [str(p) for p in cur.paths]}}


def compare(baseline: Sequence[str | Path], current: Sequence[str | Path], gate: Gate | None = None,
            match: MatchMode = "auto") -> Comparison:
    """Compare the Results under ``current`` with those under ``baseline`` (files or folders).

    Args:
        baseline, current: Result files or folders (searched recursively; ``.npz`` sidecars read).
        gate: thresholds, metrics, strictness and correction (default :class:`Gate`).
        match: ``case_key``, ``config`` (without the model's hash) or ``auto`` (see
            :func:`inferperf.analysis.compare.data.match_cases`).

    Returns:
        A :class:`Comparison`; its ``exit_code`` is the gate's answer (0 or 3).

    Raises:
        UsageError: a missing path, no Results on a side, a bad gate, or no case matched
            (a gate that compared nothing must not pass).
    """
    gate = gate or Gate()
    gate.check()
    if match not in ("auto", "case_key", "config"):
        raise UsageError(f"unknown --match {match!r}: use case_key or config")
    base, notes_b = load_side(baseline, "baseline")
    cur, notes_c = load_side(current, "current")
    used, pairs, un_b, un_c = match_cases(base, cur, match)
    unmatched = {"baseline": [case_label(point(c.first)) for c in un_b],
                 "current": [case_label(point(c.first)) for c in un_c]}
    if not pairs:
        raise UsageError(f"no case matched between baseline and current (by {used}): "
                         "pass --match config to pair cases whose model files differ")
    rows: list[tuple[Row, Change | None]] = []
    cases = []
    for b, c in pairs:
        info = _case_info(b, c)
        cases.append(info)
        rows.extend(_row(info["case"], b, c, METRICS[m], gate) for m in gate.metrics)
    _judge(rows, gate)
    n_tests = sum(ch is not None for _, ch in rows)
    name = "Holm (family-wise error rate)" if gate.correction == "holm" else "Benjamini-Hochberg (false-discovery rate)"
    forced = sum(config_key(b.first) != config_key(c.first) for b, c in pairs)
    how = used if not forced else (f"{used}: the only configuration on each side, paired although the"
                                   " configurations differ (see the warnings)")
    notes = [f"matched by {how}; intervals are 95 % confidence intervals of the change, from the variation "
             f"between runs; verdicts corrected by {name} over {n_tests} tests, one-sided level {ONE_SIDED_ALPHA}",
             *notes_b, *notes_c]
    if any("one run a side" in r.method for r, _ in rows):
        notes.append("one run a side: intervals come from a block bootstrap over time windows, which sees only the"
                     " noise within a run; they are widened and verdicts lean to inconclusive: use --repeat 5")
    return Comparison(used, gate, cases, [r for r, _ in rows], unmatched, not_comparable(pairs), notes)
