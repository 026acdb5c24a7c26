"""Two ``tune`` processes on one study: each measured trial counted once, the budget global, on the journal file
and on a real PostgreSQL server (.ci/run starts one with scripts/start_postgres.sh)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("tune_worker.py")
PG_URL = os.environ.get("INFERPERF_TEST_POSTGRES_URL",
                        "postgresql+psycopg://inferperf:inferperf@127.0.0.1:5432/inferperf_tune")
BUDGET = 8


def _two_workers(storage: str, study: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(WORKER), storage, study, str(tmp_path / f"w{k}"), str(k), str(BUDGET)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for k in range(2)]
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)


def _check(storage_obj, study: str) -> None:
    import optuna

    from inferperf.system import machine_fingerprint
    from inferperf.tune.study import study_names

    names = [s.study_name for s in optuna.get_all_study_summaries(storage_obj, include_best_trial=False)
             if s.study_name.startswith(study + "@")]
    main = next(n for n in names if not n.endswith("/budget"))
    assert main.split("@")[1] == machine_fingerprint(
        __import__("inferperf.system", fromlist=["x"]).collect_system().model_copy(
            update={"effective_cpus": 4, "cgroup_cpu_limit": None}))
    s = optuna.load_study(study_name=main, storage=storage_obj)
    measured = [t for t in s.get_trials() if t.user_attrs.get("measured") and "cached_from" not in t.user_attrs]
    tickets = [t.user_attrs["ticket"] for t in measured]
    assert sorted(tickets) == list(range(BUDGET)), tickets  # the budget is global and exact: 8 measured, once each
    keys = Counter(t.user_attrs["config_key"] for t in measured)
    assert max(keys.values()) == 1, keys  # no configuration measured by both workers
    budget = optuna.load_study(study_name=study_names(study, main.split("@")[1])[1], storage=storage_obj)
    assert len(budget.get_trials()) == BUDGET + 2  # every worker drew one ticket past the budget, then stopped
    over = [t for t in s.get_trials() if t.user_attrs.get("over_budget")]
    assert len(over) == 2


def test_two_processes_share_a_journal_study(tmp_path: Path) -> None:
    from inferperf.tune.study import open_storage

    path = tmp_path / "study.log"
    _two_workers(f"journal:{path}", "shared", tmp_path)
    _check(open_storage(f"journal:{path}", tmp_path), "shared")


def test_two_processes_share_a_postgresql_study(tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="pip install 'inferperf[distributed]' (the test extra has it)")
    from inferperf.errors import UsageError
    from inferperf.tune.study import open_storage

    try:
        storage = open_storage(PG_URL, tmp_path)
    except UsageError as e:
        pytest.skip(f"no PostgreSQL at {PG_URL} (run scripts/start_postgres.sh): {e}")
    study = f"ci-{uuid.uuid4().hex[:8]}"
    _two_workers(PG_URL, study, tmp_path)
    _check(storage, study)


def test_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="pip install 'inferperf[distributed]'")
    from inferperf.errors import UsageError
    from inferperf.tune.study import open_storage

    with pytest.raises(UsageError, match="cannot open the database"):
        s = open_storage("postgresql+psycopg://nobody:secret@127.0.0.1:1/none", tmp_path)
        import optuna

        optuna.create_study(storage=s, study_name="x")


def test_a_stale_trial_is_failed_and_retried_once(tmp_path: Path) -> None:
    import optuna

    from inferperf.tune.study import open_storage, sweep_stale

    storage = open_storage(f"journal:{tmp_path / 's.log'}", tmp_path)
    study = optuna.create_study(storage=storage, study_name="stale", direction="maximize")
    t = study.ask()
    t.suggest_categorical("intra_op_num_threads", [1, 2])
    t.set_user_attr("heartbeat", 1000.0)  # a worker that died long ago
    assert sweep_stale(study, grace_s=60, now=5000.0) == [t.number]
    states = [x.state for x in study.get_trials()]
    assert states[0] == optuna.trial.TrialState.FAIL and states[1] == optuna.trial.TrialState.WAITING
    retry = study.ask()
    assert retry.user_attrs["retry_of"] == t.number
    assert retry.suggest_categorical("intra_op_num_threads", [1, 2]) == t.params["intra_op_num_threads"]


@pytest.mark.timeout(120)
def test_a_stale_journal_lock_is_broken_after_the_grace_period(tmp_path: Path, caplog) -> None:
    import time

    import optuna
    from optuna.storages.journal._file import LOCK_FILE_SUFFIX

    from inferperf.tune.study import open_storage

    path = tmp_path / "s.log"
    path.touch()
    os.symlink(str(path), str(path) + LOCK_FILE_SUFFIX)  # the lock a killed worker left behind
    t0 = time.monotonic()
    storage = open_storage(f"journal:{path}", tmp_path, grace_s=3)
    optuna.create_study(storage=storage, study_name="after-a-crash")
    waited = time.monotonic() - t0
    # broken once the grace period passed (Optuna counts it on the monotonic clock from its first look at the
    # lock, after t0: a floor load cannot lower); "not forever" is the test's timeout, not a wall-clock bound
    assert waited >= 3
    assert not os.path.lexists(str(path) + LOCK_FILE_SUFFIX)
