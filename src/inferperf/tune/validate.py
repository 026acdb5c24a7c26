"""Validation of the winner: the best candidates and the runtime's defaults re-measured in interleaved rounds.

The search measures each configuration once, so its best is partly luck (the best of N noisy draws is
biased upwards). Validation re-measures the ``top`` best feasible distinct configurations and the
defaults (the base configuration, no tuned parameter) in ``rounds`` shuffled rounds, every run a fresh
process with a full trial's stop rule (:func:`inferperf.measure.rounds.shuffled_rounds`). Each
candidate's validation runs are pooled (samples pooled); a candidate qualifies only if its pooled p99
still meets the SLO; the winner is the qualifying candidate with the best mean objective over its runs.
How sure the choice is: Fieller's 95 % interval of the ratio of mean objective values
(:func:`inferperf.significance.mean_ratio_ci`), winner / runner-up and winner / defaults, with the
rounds that agree (paired by round). When the best is not separated from another qualifying candidate
(the interval contains 1) and within 2 % of it, the tie goes to the one better on the other axis (lower p99 for a throughput
objective, higher throughput for the p99 objective): equal speed, lower latency.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..config import BenchConfig, StopOptions
from ..errors import InferperfError
from ..measure.rounds import shuffled_rounds
from ..measure.runner import aggregate
from ..results.io import save
from ..results.model import Result
from .objective import Goal
from .search import SearchSettings, measured_trials
from .space import apply, serve_params
from .trial import Evaluator

DEFAULTS = "defaults"
#: candidates whose mean objective is within this fraction of the best's count as equally fast
TIE = 0.02


def candidates(study: Any, goal: Goal, top: int) -> list[Any]:
    """The ``top`` best feasible COMPLETE measured trials, one per configuration, best first."""
    import optuna

    done = [t for t in measured_trials(study) if t.state == optuna.trial.TrialState.COMPLETE
            and t.user_attrs.get("feasible") and t.values]
    done.sort(key=lambda t: t.values[0], reverse=goal.objective != "p99")
    out, keys = [], set()
    for t in done:
        if t.user_attrs.get("config_key") not in keys:
            keys.add(t.user_attrs.get("config_key"))
            out.append(t)
    return out[:top]


def _ratio(goal: Goal, a: list[float], b: list[float]) -> dict[str, Any]:
    """Fieller ratio of mean objective values a / b (as 'how much better': inverted for p99), rounds agreeing.

    ``ci95`` is ``[low, high]`` when the interval is bounded; otherwise ``None`` with the reason in
    ``unbounded`` (Fieller's set is the whole line when the denominator's mean is not significantly above 0,
    and there is no interval from fewer than 2 runs a side): no claim either way, and ``separated`` is False.
    ``ratio`` is None when it is undefined (a zero denominator)."""
    from ..significance import mean_ratio_ci

    better = (lambda x, y: x < y) if goal.objective == "p99" else (lambda x, y: x > y)
    wins = sum(1 for x, y in zip(a, b) if better(x, y))
    doc: dict[str, Any] = {"rounds": min(len(a), len(b)), "winner_better_rounds": wins}
    num, den = (b, a) if goal.objective == "p99" else (a, b)
    try:
        ci = mean_ratio_ci(num, den)
    except ValueError as e:
        mean_a, mean_b = sum(num) / len(num), sum(den) / len(den)
        doc.update(ratio=mean_a / mean_b if mean_b else None, ci95=None, separated=False, unbounded=str(e), note=str(e))
        return doc
    if math.isfinite(ci.low) and math.isfinite(ci.high):
        doc.update(ratio=ci.estimate, ci95=[ci.low, ci.high], separated=ci.low > 1.0)
    else:  # Fieller's set is unbounded when the denominator's mean is not significantly above 0: no claim
        why = ci.notes[0] if ci.notes else "the interval is unbounded"
        doc.update(ratio=ci.estimate, ci95=None, separated=False, unbounded=why)
    return doc


def _tie_break(goal: Goal, ok: list[dict[str, Any]]) -> dict[str, Any]:
    """Among the candidates within :data:`TIE` of the best's mean objective and not separated from it (ratio CI
    contains 1), the one better on the other axis: the lowest p99 for a throughput objective, the highest
    throughput for the p99 objective. A candidate further off is never preferred, however wide the interval."""
    best = ok[0]
    tied = [best]
    for r in ok[1:]:
        d = _ratio(goal, best["objective_per_run"], r["objective_per_run"])
        ratio = d.get("ratio")
        if not d.get("separated") and ratio is not None and ratio <= 1.0 + TIE:
            tied.append(r)
    if goal.objective == "p99":
        return max(tied, key=lambda r: r["throughput"])
    return min(tied, key=lambda r: r["p99_ms"])


def _same_settings(s: SearchSettings, params: dict[str, Any], cfg: BenchConfig, cand: Result | None,
                   dflt: Result | None) -> bool:
    """Whether a candidate runs the defaults' settings: the same configuration key as the base (no parameter
    changes anything), or, once measured, the same effective session settings with the same model,
    concurrency, batch, session mode and serving options (e.g. ORT's default threads asked for explicitly)."""
    from .records import config_key

    if params.get("precision") in s.variants or serve_params(params):
        return False
    if config_key(s.model_sha256, cfg, {}, "") == config_key(s.model_sha256, s.base, {}, ""):
        return True
    if cand is None or dflt is None:
        return False

    def facts(r: Result) -> tuple[Any, ...]:
        c = r.config
        return (r.model.sha256, c.backend, c.concurrency, c.workload.batch_size, c.session_mode,
                getattr(c, "allocator", "system"), r.run.get("serve_options"), sorted(c.session.effective.items()))

    return bool(cand.config.session.effective) and facts(cand) == facts(dflt)


def validate(study: Any, s: SearchSettings, evaluator: Evaluator, top: int, rounds: int, seed: int = 0,
             on_run: Callable[[str, int, Result | None, str | None], None] | None = None) -> dict[str, Any]:
    """Re-measure the candidates and the defaults interleaved; pick the winner (see the module docstring).

    Returns:
        ``{"candidates": [{label, trial, params, runs, throughput, p99_ms, objective_per_run, feasible,
        result}], "winner": label or None, "runner_up": ..., "vs_runner_up": ratio doc, "vs_defaults":
        ratio doc, "improvement_over_defaults": ratio or None, "rounds", "seed"}``.
    """
    goal = s.goal
    cands: list[tuple[str, int | None, dict[str, Any], BenchConfig]] = [
        (f"trial {t.number}", t.number, dict(t.user_attrs.get("config", t.params)),
         apply(s.base, t.user_attrs.get("config", t.params))) for t in candidates(study, goal, top)]
    cands.append((DEFAULTS, None, {}, s.base))
    runs: list[list[Result]] = [[] for _ in cands]
    errors: list[str | None] = [None] * len(cands)
    full = StopOptions(min_iterations=s.plan.min_samples, min_duration_s=s.plan.duration_s,
                       max_duration_s=max(s.plan.max_duration_s, s.plan.duration_s))
    vdir = s.output / "validation"
    vdir.mkdir(parents=True, exist_ok=True)
    for slot in shuffled_rounds(len(cands), rounds, seed):
        label, _, params, cfg = cands[slot.case]
        if errors[slot.case]:
            continue
        try:
            r = evaluator.run(s.model_of(params)[0], cfg.model_copy(update={"stop": full, "repeat": 1}), params, 100000 + slot.round)
        except InferperfError as e:
            errors[slot.case] = str(e)
            if on_run:
                on_run(label, slot.round, None, str(e))
            continue
        r.run.update(slot.marks())
        runs[slot.case].append(r)
        if on_run:
            on_run(label, slot.round, r, None)
    rows = []
    pooled_of: dict[str, Result] = {}
    for (label, number, params, cfg), rs, err in zip(cands, runs, errors):
        row: dict[str, Any] = {"label": label, "trial": number, "params": params, "runs": len(rs), "error": err}
        if rs:
            pooled = pooled_of[label] = aggregate(rs, cfg) if len(rs) > 1 else rs[0]
            pooled.kind = "tune"
            pooled.run["tune_validation"] = label
            path = save(pooled, vdir / f"{label.replace(' ', '-')}.json")
            fig = goal.figures(pooled)
            row.update(fig, feasible=goal.feasible(fig), result=str(path.relative_to(s.output)),
                       objective=goal.values(fig, params)[0],
                       objective_per_run=[goal.values(goal.figures(x), params)[0] for x in rs])
        rows.append(row)
    twins = [label for label, _, params, cfg in cands[:-1]
             if _same_settings(s, params, cfg, pooled_of.get(label), pooled_of.get(DEFAULTS))]
    ok = [r for r in rows if r.get("feasible") and r["runs"]]
    ok.sort(key=lambda r: r["objective"], reverse=goal.objective != "p99")
    out: dict[str, Any] = {"candidates": rows, "rounds": rounds, "seed": seed, "winner": None, "runner_up": None,
                           "same_as_defaults": twins}
    if twins:
        out["note"] = (f"{', '.join(twins)} ha{'s' if len(twins) == 1 else 've'} the defaults' settings: the defaults"
                       f" were validated twice (as {', '.join(twins)} and as defaults); the rows are an A/A check of"
                       " the noise, not two configurations")
    if not ok:
        return out
    win = _tie_break(goal, ok)
    ok = [win] + [r for r in ok if r is not win]
    out["winner"] = win["label"]
    if len(ok) > 1:
        out["runner_up"] = ok[1]["label"]
        out["vs_runner_up"] = _ratio(goal, win["objective_per_run"], ok[1]["objective_per_run"])
    dflt = next((r for r in rows if r["label"] == DEFAULTS and r["runs"]), None)
    if dflt is not None and dflt is not win:
        out["vs_defaults"] = _ratio(goal, win["objective_per_run"], dflt["objective_per_run"])
        out["improvement_over_defaults"] = out["vs_defaults"]["ratio"]
    elif dflt is win:
        out["improvement_over_defaults"] = 1.0
    return out
