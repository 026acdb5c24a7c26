"""What ``inferperf tune`` prints: the plan, one line per trial with the best so far and the time left, the summary."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from ..measure.speedup import sig
from ..tune.output import params_text


class TuneView:
    """Console output of a tune (plain lines: readable in a terminal, a pipe and a CI log alike)."""

    def __init__(self, info: Any) -> None:
        self.info = info
        self.spec: Any = None  # the checked TuneSpec: set by :meth:`header`, before the first trial
        self.space: Any = None
        self.t0 = time.monotonic()
        self.measured = 0
        self.best: tuple[float, str] | None = None

    def header(self, spec: Any) -> None:
        """The goal, the space (axes, grid size), the budget split of ``spec`` (the checked TuneSpec)."""
        self.spec, self.space = spec, spec.space
        self.t0 = time.monotonic()  # the search's clock starts here (its deadline too), after any variants' build
        s = self.spec
        grid = len(self.space.grid(self.info, s.base.concurrency))
        print(f"tune {s.model}: {s.goal.describe()}")
        for name, values in self.space.axes().items():
            print(f"  axis {name}: {values}")
        print(f"  space: {self.space.size()} combinations, {grid} feasible after pruning; sampler {s.sampler}, seed {s.seed}")
        print(f"  budget: {s.n_trials} measured trials = {s.n_trials - s.validation_runs} search +"
              f" {s.validation_runs} validation ({s.validate_top} candidates + defaults x {s.validation_rounds} rounds);"
              f" each trial >= {s.plan.min_samples} samples and >= {s.plan.duration_s:g} s in up to"
              f" {s.plan.max_stages} fresh processes")
        from ..system import machine_fingerprint
        from ..tune.lock import lock_path

        print(f"  measurements: one at a time on this machine (lock {lock_path(machine_fingerprint(self.info))}):"
              " tune workers sharing it take turns, so none measures another's load")
        print(f"  results: {s.output}/ (study, trials.csv, best.yaml, tune.json)", flush=True)

    def _left(self) -> str:
        if self.spec.timeout_s:
            return f", {max(0.0, self.spec.timeout_s - (time.monotonic() - self.t0)):.0f} s left"
        if self.measured:
            per = (time.monotonic() - self.t0) / self.measured
            rest = max(0, self.spec.n_trials - self.spec.validation_runs - self.measured) + self.spec.validation_runs
            return f", ~{per * rest / 60:.1f} min left at most"
        return ""

    def on_trial(self, row: dict[str, Any]) -> None:
        """One line per trial: state, parameters, figures, SLO verdict, best so far, time left."""
        state = row["state"]
        figs = ""
        if row.get("throughput") is not None:
            ok = "meets SLO" if row.get("feasible") else "VIOLATES"
            figs = f": {sig(row['throughput'])} samples/s, p99 {sig(row['p99_ms'])} ms ({ok})"
        if state in ("complete", "pruned") and row.get("throughput") is not None:
            self.measured += 1
        if state == "complete" and row.get("feasible"):
            value = row["throughput"] if self.spec.goal.objective != "p99" else -row["p99_ms"]
            if self.best is None or value > self.best[0]:
                self.best = (value, f"trial {row['number']}")
        best = f" | best: {self.best[1]}" if self.best else ""
        note = f" [{row['note']}]" if row.get("note") and state != "complete" else ""
        print(f"trial {row['number']:>3} {state:<8} {params_text(row['params'])}{figs}{note}{best}{self._left()}",
              flush=True)

    def on_validation(self, label: str, round_: int, r: Any, error: str | None) -> None:
        """One line per validation run."""
        if error:
            print(f"validate {label} round {round_ + 1}: failed: {error}", flush=True)
            return
        lat = r.metrics.latency_ms
        print(f"validate {label:<10} round {round_ + 1}: {sig(r.metrics.throughput.samples_per_s)} samples/s,"
              f" p99 {sig(lat.p99)} ms", flush=True)

    def summary(self, s: dict[str, Any]) -> None:
        """The validation table, the winner with its intervals, importances, the files written."""
        v = s.get("validation")
        p = s["this_pass"]
        print(f"search: {p['measured']} measured, {p['pruned']} pruned early, {p['cached']} answered from the cache,"
              f" {p['infeasible']} pruned as infeasible, {p['failed']} failed; {p['stop_reason'] or 'done'}")
        lock = s.get("measurement_lock") or {}
        if lock.get("waited_s"):
            print(f"machine lock: waited {lock['waited_s']:.1f} s in all for other workers' measurements on this machine")
        if s.get("other_machines"):
            print(f"note: {len(s['other_machines'])} other machine(s) tune this study in the same storage; their trials"
                  f" are kept apart (fingerprint {s['machine_fingerprint']} here) and never compared with these")
        if v:
            print(f"validation ({v['rounds']} interleaved rounds, fresh processes):")
            for c in v["candidates"]:
                if not c["runs"]:
                    print(f"  {c['label']:<10} failed: {c.get('error')}")
                    continue
                mark = "meets SLO" if c["feasible"] else "VIOLATES the SLO"
                print(f"  {c['label']:<10} {params_text(c['params'])}: {sig(c['throughput'])} samples/s, p99"
                      f" {sig(c['p99_ms'])} ms over {int(c['samples'])} samples ({mark})")
            if v.get("note"):
                print(f"  note: {v['note']}")
            for key, what in (("vs_runner_up", "runner-up"), ("vs_defaults", "defaults")):
                d = v.get(key)
                if d:
                    ci = d.get("ci95")
                    sure = ("separated" if d.get("separated") else "not separated: no claim") if ci else "no interval"
                    cis = f" 95 % CI [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and all(map(math.isfinite, ci)) else ""
                    print(f"  winner vs {what}: {d['ratio']:.3f}x{cis} ({sure}; better in {d['winner_better_rounds']}"
                          f" of {d['rounds']} rounds)")
        b = s.get("best")
        if b:
            print(f"best ({b['source']}): {params_text(b['config'])}: {sig(b['throughput'])} samples/s, p99 {sig(b['p99_ms'])} ms")
            print(f"  written: {self.spec.output}/best.yaml (bench --config / serve --config), best-matrix.yaml,"
                  " trials.csv, tune.json")
        if s.get("importances"):
            note = f" ({s['importances_note']})" if s.get("importances_note") else ""
            print("importances: " + ", ".join(f"{k} {v:.2f}" for k, v in s["importances"].items()) + note)
        if s.get("pareto"):
            print("pareto front: " + "; ".join(f"trial {x['trial']} {sig(x['throughput'])}/s @ {sig(x['p99_ms'])} ms"
                                              for x in s["pareto"]))
        sys.stdout.flush()
