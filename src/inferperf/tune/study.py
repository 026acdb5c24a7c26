"""Where a tune keeps its trials: Optuna storage (SQLite, journal file, PostgreSQL), the global budget, stale trials.

* Storage: ``sqlite:///DIR/study.db`` in the results folder by default (a rerun continues the study);
  ``journal:PATH`` (or a path ending in ``.log``/``.jsonl``) for Optuna's journal file, whose lock
  (:class:`optuna.storages.journal.JournalFileSymlinkLock`) is broken after ``grace_period`` s with
  Optuna's warning, never waited on forever; ``postgresql+psycopg://...`` (extra
  ``inferperf[distributed]``) for many machines on one study.
* Stale trials: a running trial refreshes a ``heartbeat`` user attribute every 10 s (:func:`heartbeat`);
  before each trial, :func:`sweep_stale` fails the RUNNING trials whose heartbeat is older than the grace
  period (their process died) and enqueues each once more. This is what Optuna's RDB heartbeat
  (``heartbeat_interval``, ``RetryHeartbeatStaleTrialCallback(max_retry=1)``) does, but it works on the
  journal too (which has no heartbeat) and with the ask-and-tell interface tune uses.
* Study name: ``NAME@FINGERPRINT`` (:func:`inferperf.system.machine_fingerprint`), so trials from
  different CPUs, core counts or runtime versions are never compared.
* Budget: a companion study ``NAME@FINGERPRINT/budget`` hands out tickets. Optuna numbers the trials
  of a study in creation order, atomically in every storage, so ticket *k* is the *k*-th measurement
  across all workers: a worker measures only with a ticket below the search budget, and the one
  worker that draws ticket number == the search budget does the validation. The budget is therefore
  global and exact however many workers share the study.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..clock import wall_s
from ..errors import BackendUnavailable, UsageError

HEARTBEAT_S = 10
GRACE_S = 60


def quiet_optuna() -> None:
    """Optuna's per-trial INFO lines off (inferperf prints its own progress); warnings stay."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def open_storage(url: str | None, output: Path, grace_s: int = GRACE_S) -> Any:
    """An Optuna storage for ``url`` (None = SQLite in ``output``).

    Raises:
        UsageError: an unknown scheme, or a database that cannot be reached (one line, exit 2).
        BackendUnavailable: ``postgresql`` without the ``psycopg`` driver (names the extra).
    """
    import optuna
    from optuna.storages import RDBStorage

    if url is None:
        output.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{(output / 'study.db').resolve()}"
    journal = url[len("journal:"):] if url.startswith("journal:") else (url if url.endswith((".log", ".jsonl")) else None)
    if journal is not None:
        from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

        path = Path(journal).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = JournalFileSymlinkLock(str(path), grace_period=grace_s)
        return optuna.storages.JournalStorage(JournalFileBackend(str(path), lock_obj=lock))
    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        raise UsageError(f"--storage {url!r}: use sqlite:///PATH, journal:PATH or postgresql+psycopg://USER@HOST/DB")
    if url.startswith("postgresql"):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise BackendUnavailable("--storage postgresql needs the psycopg driver: pip install 'inferperf[distributed]'") from None
    try:
        return RDBStorage(url, engine_kwargs={"pool_pre_ping": True} if not url.startswith("sqlite") else None)
    except Exception as e:  # noqa: BLE001 - sqlalchemy's OperationalError and friends: one line
        first = " ".join(str(e).split())[:200]
        raise UsageError(f"--storage {_redact(url)}: cannot open the database ({first}): check the URL and that"
                         " the server is running") from None


def _redact(url: str) -> str:
    """The URL without its password."""
    head, sep, tail = url.partition("@")
    if not sep or "://" not in head:
        return url
    scheme, _, cred = head.partition("://")
    return f"{scheme}://{cred.split(':')[0]}:***@{tail}" if ":" in cred else url


def study_names(name: str, fingerprint: str) -> tuple[str, str]:
    """(the study, its budget study) for a study name on a machine."""
    return f"{name}@{fingerprint}", f"{name}@{fingerprint}/budget"


def other_machines(storage: Any, name: str, fingerprint: str) -> list[str]:
    """Fingerprints of other machines that tune ``name`` in this storage (their trials are never compared)."""
    import optuna

    out = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        base, _, fp = s.study_name.partition("@")
        if base == name and fp and "/" not in fp and fp != fingerprint:
            out.append(fp)
    return sorted(out)


def claim_ticket(budget_study: Any) -> int:
    """The next measurement ticket's number (0, 1, 2, ... across every worker of the study)."""
    import optuna

    t = budget_study.ask()
    budget_study.tell(t, state=optuna.trial.TrialState.COMPLETE, values=[0.0])
    return t.number


def tickets_used(budget_study: Any) -> int:
    """Tickets handed out so far."""
    return len(budget_study.get_trials(deepcopy=False))


def sweep_stale(study: Any, grace_s: float = GRACE_S, now: float | None = None) -> list[int]:
    """Fail RUNNING trials whose ``heartbeat`` attribute is older than ``grace_s`` (s) and enqueue each once more
    (its parameters, ``retry_of`` set); a retried trial that goes stale again is not retried.

    Returns:
        The numbers of the trials failed.
    """
    import optuna

    now = wall_s() if now is None else now  # heartbeats are compared across workers and machines: wall time
    failed = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        beat = t.user_attrs.get("heartbeat", t.datetime_start.timestamp() if t.datetime_start else now)
        if now - beat <= grace_s:
            continue
        try:
            study._storage.set_trial_state_values(t._trial_id, state=optuna.trial.TrialState.FAIL)
        except Exception:  # noqa: BLE001 - another worker failed it first
            continue
        failed.append(t.number)
        if "retry_of" not in t.user_attrs:
            study.enqueue_trial(t.params, user_attrs={"retry_of": t.number}, skip_if_exists=False)
    return failed


@contextlib.contextmanager
def heartbeat(study: Any, trial: Any, interval_s: float = HEARTBEAT_S) -> Iterator[None]:
    """Refresh ``trial``'s ``heartbeat`` user attribute every ``interval_s`` while the block runs (journal storage)."""
    stop = threading.Event()

    def beat() -> None:
        """Refresh the attribute until told to stop."""
        while not stop.wait(interval_s):
            with contextlib.suppress(Exception):
                trial.set_user_attr("heartbeat", wall_s())

    trial.set_user_attr("heartbeat", wall_s())
    t = threading.Thread(target=beat, name="inferperf-tune-heartbeat", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(5)

