"""Tune outputs: the summary (tune.json), the trials table (CSV), best.yaml, the one-case matrix, importances.

An infeasible trial (constraint violated) is never the best in any of them: ``best`` comes from the
validation's winner (or, with ``--no-validate``, the best feasible measured trial), and when no
configuration is feasible ``best`` is null and ``closest`` names the one nearest the constraints.
"""

from __future__ import annotations

import csv
import math
from typing import Any

from ..fsutil import atomic_open, atomic_write_text
from ..measure.speedup import sig
from ..stats import ci_text
from .search import SearchPass, SearchSettings, measured_trials, write_json
from .space import apply, serve_params

CSV_COLUMNS = ["number", "state", "ticket", "cached_from", "config", "throughput", "queries_per_s", "p50_ms", "p99_ms",
               "samples", "feasible", "note", "stages", "result", "config_key"]  # fmt: skip


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def params_text(params: dict[str, Any]) -> str:
    """A configuration as short flag-like words (``threads=2 conc=4``; ``(defaults)`` for none)."""
    names = {"intra_op_num_threads": "threads", "inter_op_num_threads": "inter", "concurrency": "conc",
             "session_mode": "mode", "execution_mode": "exec", "graph_optimization_level": "graph",
             "max_batch_size": "mbs", "max_queue_delay_us": "delay_us", "instance_count": "instances"}
    return " ".join(f"{names.get(k, k)}={v}" for k, v in params.items()) or "(defaults)"


def trial_rows(study: Any) -> list[dict[str, Any]]:
    """One row per trial (over-budget tickets excluded), in trial order."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        a = t.user_attrs
        if a.get("over_budget"):
            continue
        rows.append({
            "number": t.number, "state": t.state.name.lower(), "ticket": a.get("ticket"),
            "cached_from": a.get("cached_from"), "config": a.get("config", t.params),
            **{k: _finite(a.get(k)) for k in ("throughput", "queries_per_s", "p50_ms", "p99_ms", "samples", "feasible")},
            "note": a.get("error") or a.get("pruned_reason") or a.get("decided_by") or "",
            "stages": a.get("stages"), "result": a.get("result"), "config_key": a.get("config_key"),
        })  # fmt: skip
    return rows


def importances(study: Any, goal: Any) -> dict[str, float]:
    """Optuna's parameter importances (its default evaluator: PED-ANOVA in Optuna 5, Watanabe et al. 2023) of the
    first objective, oriented so that "important" means "matters for a better value"; {} when too few trials."""
    import warnings

    import optuna

    done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]
    if len(done) < 3 or len({repr(sorted(t.params.items())) for t in done}) < 2:
        return {}
    sign = 1.0 if goal.directions[0] == "minimize" else -1.0  # the evaluator ranks what achieves LOW targets
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(study, target=lambda t: sign * t.values[0])
        return {k: float(v) for k, v in found.items()}
    except (ValueError, RuntimeError, ZeroDivisionError):
        return {}


#: Distinct measured configurations below which importances carry a caveat (PED-ANOVA ranks axes by how the
#: best quantile of trials differs from the rest: a handful of trials makes that quantile one or two points).
MIN_CONFIGS_FOR_IMPORTANCES = 10


def importances_note(study: Any) -> str | None:
    """A caveat for importances from fewer than :data:`MIN_CONFIGS_FOR_IMPORTANCES` distinct measured
    configurations (``None`` when there are enough, or no importances at all)."""
    import optuna

    done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]
    configs = len({repr(sorted(t.params.items())) for t in done})
    if configs >= MIN_CONFIGS_FOR_IMPORTANCES:
        return None
    return (f"from {configs} configuration(s) in {len(done)} completed trial(s): too few to rank the axes"
            f" ({MIN_CONFIGS_FOR_IMPORTANCES}+ needed); a hint, not a finding")


def _closest(study: Any, s: SearchSettings) -> dict[str, Any] | None:
    rows = [t for t in measured_trials(study) if t.user_attrs.get("p99_ms") is not None]
    if not rows:
        return None
    t = min(rows, key=lambda t: s.goal.violation(t.user_attrs))
    return {"trial": t.number, "config": t.user_attrs.get("config", t.params),
            **{k: t.user_attrs.get(k) for k in ("throughput", "p50_ms", "p99_ms", "samples")}}


def pareto(study: Any) -> list[dict[str, Any]]:
    """Multi-objective: the measured feasible trials no other dominates (throughput max, p99 min)."""
    pts = [t for t in measured_trials(study) if t.user_attrs.get("feasible") and t.values and len(t.values) == 2]
    front = [t for t in pts if not any(o.values[0] >= t.values[0] and o.values[1] <= t.values[1] and o.values != t.values
                                        for o in pts)]
    return [{"trial": t.number, "config": t.user_attrs.get("config"), "throughput": t.values[0], "p99_ms": t.values[1]}
            for t in sorted(front, key=lambda t: t.values[0])]


def summarize(study: Any, spec: Any, s: SearchSettings, sp: SearchPass, validation: dict[str, Any] | None,
              fingerprint: str, others: list[str], tickets: int) -> dict[str, Any]:
    """The tune.json document (see the module docstring for ``best`` / ``closest``)."""
    from .records import best_feasible_value

    best: dict[str, Any] | None = None
    if validation and validation.get("winner"):
        win = next(c for c in validation["candidates"] if c["label"] == validation["winner"])
        best = {"source": "validation", "label": win["label"], "trial": win["trial"], "config": win["params"],
                **{k: win.get(k) for k in ("throughput", "p50_ms", "p99_ms", "samples", "objective", "runs", "result")}}
    elif not spec.validate and best_feasible_value(study, s.goal) is not None:
        from .validate import candidates

        t = candidates(study, s.goal, 1)[0]
        best = {"source": "search (not validated)", "trial": t.number, "config": t.user_attrs.get("config"),
                **{k: t.user_attrs.get(k) for k in ("throughput", "p50_ms", "p99_ms", "samples", "result")}}
    if best is not None:
        best["model"] = spec.variants.get((best.get("config") or {}).get("precision"), spec.model)
    rows = trial_rows(study)
    imp = importances(study, s.goal)
    return {
        "kind": "tune", "model": spec.model, "study": study.study_name, "machine_fingerprint": fingerprint,
        "other_machines": others, "goal": s.goal.describe(), "objective": s.goal.objective,
        "slo_p99_ms": s.goal.slo_p99_ms, "min_throughput": s.goal.min_throughput,
        "sampler": spec.sampler, "seed": spec.seed, "space": spec.space.model_dump(mode="json", exclude_none=True),
        "budget": {"n_trials": spec.n_trials, "search": s.search_budget, "validation": spec.validation_runs,
                   "tickets_used": tickets},
        "this_pass": {"measured": sp.measured, "cached": sp.cached, "pruned": sp.pruned, "infeasible": sp.infeasible,
                      "failed": sp.failed, "stop_reason": sp.stop_reason},
        "trials": {"total": len(rows), "measured": sum(1 for r in rows if r["result"] and r["cached_from"] is None),
                   "cached": sum(1 for r in rows if r["cached_from"] is not None),
                   "feasible": sum(1 for r in rows if r["feasible"] and r["cached_from"] is None)},
        "best": best, "closest": None if best else _closest(study, s), "validation": validation,
        "importances": imp, "importances_note": importances_note(study) if imp else None,
        "pareto": pareto(study) if s.goal.objective == "multi" else None,
        "history": [{"number": r["number"], "state": r["state"], "throughput": r["throughput"], "p99_ms": r["p99_ms"],
                     "feasible": r["feasible"]} for r in rows],
    }  # fmt: skip


def best_settings(spec: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The settings-file document of a configuration: BenchConfig fields (+ ``serve:`` for a served tune)."""
    cfg = apply(spec.base, config)
    doc = cfg.model_dump(mode="json", exclude_defaults=True)
    for name in ("intra_op_num_threads", "inter_op_num_threads", "execution_mode", "graph_optimization_level"):
        if name in config:
            doc.setdefault("session", {})[name] = config[name]
    serve = {**spec.serve_base, **serve_params(config)}
    if serve:
        doc["serve"] = serve
    return doc


def _best_result(spec: Any, summary: dict[str, Any], best: dict[str, Any]) -> None:
    """``best.json``: the winner's Result (its pooled validation runs, or its trial) with the study's summary in
    ``run.tune_summary`` (what ``report`` draws the tuning section from)."""
    from ..results.io import load, save

    if not best.get("result") or not (spec.output / best["result"]).exists():
        return
    r = load(spec.output / best["result"])
    r.run["tune_summary"] = {k: summary.get(k) for k in ("goal", "objective", "slo_p99_ms", "min_throughput", "study",
                                                          "machine_fingerprint", "importances", "importances_note",
                                                          "pareto", "budget")}
    r.run["tune_summary"].update(best_config=best.get("config"), validation={
        k: (summary.get("validation") or {}).get(k) for k in ("winner", "runner_up", "vs_runner_up", "vs_defaults",
                                                               "improvement_over_defaults", "rounds")})
    save(r, spec.output / "best.json")


def write_outputs(study: Any, spec: Any, summary: dict[str, Any]) -> None:
    """Write tune.json, trials.csv and (when a best exists) best.yaml and best-matrix.yaml into ``spec.output``."""
    import json

    import yaml

    out = spec.output
    write_json(out / "tune.json", summary)
    with atomic_open(out / "trials.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for row in trial_rows(study):
            w.writerow({**row, "config": json.dumps(row["config"], sort_keys=True)})
    best = summary.get("best")
    if not best:
        return
    _best_result(spec, summary, best)
    head = (f"# inferperf tune {spec.model}: {summary['goal']}\n"
            f"# best: {best.get('label') or 'trial ' + str(best['trial'])} ({best['source']}): "
            f"{sig(best.get('throughput', 0))} samples/s, p99 {sig(best.get('p99_ms', 0))} ms\n")
    v = summary.get("validation") or {}
    if v.get("improvement_over_defaults") is not None:
        vs = v.get("vs_defaults")
        head += f"# vs the runtime's defaults: {v['improvement_over_defaults']:.3f}x" + (
            f" ({ci_text(vs.get('ci95'))})\n" if vs else " (the defaults won)\n")
    model = spec.variants.get(best["config"].get("precision"), spec.model)
    if model != spec.model:
        head += f"# model: {model} (the {best['config']['precision']} variant)\n"
    head += f"# use: inferperf bench {model} --config best.yaml   (or inferperf serve ... --config best.yaml)\n"
    atomic_write_text(out / "best.yaml", head + yaml.safe_dump(best_settings(spec, best["config"]), sort_keys=False))
    axes = {k: [v] for k, v in best["config"].items() if not k.startswith("session_config:") and k not in
            ("max_batch_size", "max_queue_delay_us", "instance_count", "precision")}
    settings = spec.base.model_dump(mode="json", exclude_defaults=True)
    matrix = {"models": [{"path": model, "shapes": [spec.base.workload.shapes]} if spec.base.workload.shapes
                         else model], "axes": axes, "settings": {k: v for k, v in settings.items() if k != "workload"}}
    atomic_write_text(out / "best-matrix.yaml", "# the tuned configuration as a sweep matrix: inferperf sweep --matrix"
                      " best-matrix.yaml\n" + yaml.safe_dump(matrix, sort_keys=False))
