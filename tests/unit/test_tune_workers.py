"""Several tune workers on one machine (issue 24 item 13): measurements take turns under the machine lock, a small
space does not fill the study with cached and pruned answers, and one validation serves them all."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from inferperf.backends.null import LatencySurface
from inferperf.config import BenchConfig, WarmupOptions
from inferperf.system import collect_system
from inferperf.tune.lock import LockedEvaluator, lock_path
from inferperf.tune.objective import Goal
from inferperf.tune.run import TuneSpec, tune
from inferperf.tune.simulate import SurfaceEvaluator
from inferperf.tune.space import TuneSpace
from inferperf.tune.trial import TrialPlan

WORKERS = 4


def _info():
    return collect_system().model_copy(update={"effective_cpus": 4, "cgroup_cpu_limit": None})


class Overlap:
    """An inner evaluator that counts how many runs are inside it at once (a run waits up to 2 s for a second one
    to arrive: without the lock one does)."""

    served = False

    def __init__(self) -> None:
        self.inside = self.most = 0
        self.guard = threading.Lock()
        self.arrived = threading.Event()

    def run(self, model, cfg, params, repeat_index):
        with self.guard:
            self.inside += 1
            self.most = max(self.most, self.inside)
            if self.inside > 1:
                self.arrived.set()
        self.arrived.wait(2.0)
        with self.guard:
            self.inside -= 1
        return repeat_index


def test_runs_on_one_machine_take_turns_under_the_fingerprint_lock(tmp_path: Path) -> None:
    """4 workers measuring at once on 2 CPUs gave 22 samples/s against 139 alone: every run holds the lock."""
    inner = Overlap()
    ev = [LockedEvaluator(inner, "fp-test", folder=tmp_path) for _ in range(2)]  # two workers, one machine
    threads = [threading.Thread(target=e.run, args=("m", None, {}, k)) for k, e in enumerate(ev)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert inner.most == 1
    assert ev[0].path == ev[1].path == lock_path("fp-test", tmp_path)
    assert ev[0].waited_s + ev[1].waited_s > 0  # the second waited for the first
    # must-say-no: without the lock the two runs overlap
    bare = Overlap()
    threads = [threading.Thread(target=bare.run, args=("m", None, {}, k)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert bare.most == 2


def _spec(out: Path, storage: str, seed: int, n_trials: int, validate: bool) -> TuneSpec:
    space = TuneSpace(intra_op_num_threads=[1, 2], concurrency=[1, 2], max_oversubscription=2.0)  # 4 configurations
    return TuneSpec(model="null", base=BenchConfig(backend="null", warmup=WarmupOptions(iterations=2)), space=space,
                    goal=Goal("throughput", slo_p99_ms=60.0, effective_cpus=4), plan=TrialPlan(duration_s=0.5),
                    n_trials=n_trials, output=out, seed=seed, storage=storage, study_name="shared",
                    validate=validate, validation_rounds=2, validate_top=1)


def _workers(tmp_path: Path, n_trials: int, validate: bool, sleep_s: float = 0.2) -> tuple[list, list[SurfaceEvaluator]]:
    storage = f"journal:{tmp_path / 'study.log'}"
    surface = LatencySurface(base_ms=20.0, cpus=4, noise_cv=0.04)
    evs = [SurfaceEvaluator(surface, seed=k, sleep_s=sleep_s) for k in range(WORKERS)]  # runs overlap in time
    outs: list = [None] * WORKERS
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            outs[k] = tune(_spec(tmp_path / f"w{k}", storage, k, n_trials, validate), evs[k], info=_info())
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert not errors, errors
    return outs, evs


def test_four_workers_on_a_small_space_stop_when_every_configuration_is_measured(tmp_path: Path) -> None:
    """A 4-configuration space, budget 12, 4 workers: each configuration measured once, the pass ends when all
    are measured, and the study holds about the budget of trials (was 500+ cached/pruned answers)."""
    outs, _ = _workers(tmp_path, n_trials=12, validate=False)
    study = outs[0].study
    trials = study.get_trials()
    measured = [t for t in trials if t.user_attrs.get("measured") and "cached_from" not in t.user_attrs]
    assert sorted(Counter(t.user_attrs["config_key"] for t in measured).values()) == [1, 1, 1, 1]
    assert len(trials) <= 12 + 2 * WORKERS, Counter(t.state.name for t in trials)
    assert all("every one of the 4 feasible configurations" in o.search.stop_reason for o in outs)
    assert outs[0].summary["measurement_lock"]["path"].endswith(".lock")


def test_one_validation_serves_every_worker_of_the_study(tmp_path: Path) -> None:
    """Every worker whose search ended used to validate: 4 workers, 4 validations of the same candidates."""
    outs, evs = _workers(tmp_path, n_trials=12, validate=True, sleep_s=0.6)  # a validation outlasts a 2 s poll
    validation_runs = sum(1 for e in evs for r in e.runs if r["repeat_index"] >= 100000)
    assert validation_runs == (1 + 1) * 2  # (1 candidate + defaults) x 2 rounds, once
    assert len({repr(o.summary["validation"]) for o in outs}) == 1


def test_a_small_space_with_infeasible_corners_answers_each_proposal_with_a_feasible_one(tmp_path: Path) -> None:
    """Most of the grid oversubscribes 4 CPUs: after each infeasible proposal the next trial is a feasible
    configuration nobody measured, so the study holds about the budget of trials."""
    space = TuneSpace(intra_op_num_threads=[1, 4, 8], concurrency=[1, 4, 8], max_oversubscription=1.0)
    spec = TuneSpec(model="null", base=BenchConfig(backend="null", warmup=WarmupOptions(iterations=2)), space=space,
                    goal=Goal("throughput", slo_p99_ms=60.0, effective_cpus=4), plan=TrialPlan(duration_s=0.5),
                    n_trials=12, output=tmp_path, validate=False)
    out = tune(spec, SurfaceEvaluator(LatencySurface(base_ms=20.0, cpus=4, noise_cv=0.04)), info=_info())
    grid = len(space.grid(_info()))
    trials = out.study.get_trials()
    assert out.search.stop_reason == f"every one of the {grid} feasible configurations is measured"
    assert out.search.infeasible <= grid, Counter(t.state.name for t in trials)
