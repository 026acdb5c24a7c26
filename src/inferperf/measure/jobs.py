"""The worker-process protocol: one job in a fresh Python process, its result or its error back.

Every job inferperf runs in a fresh process (a measured run, :mod:`inferperf.measure.worker`;
the outputs for runtime agreement, :mod:`inferperf.measure.outputs`) goes through here.

Parent (:func:`run_job`): write ``job.json`` into a private temporary folder, start
``python -m MODULE job.json OUT``, wait with a timeout, and always reap the child (killed
on timeout, Ctrl-C or SIGTERM). The folder is removed when the caller is done with the
output (:func:`run_job` is a context manager).

Child (:func:`serve_job`): read the job, call ``work(job, out_path)``; on an exception write
``error.json`` beside the output: ``{"type", "message", "exit_code", "traceback"}``.

The parent then raises the worker's own class (UsageError, ModelError, ...) with its
one-line message. An exception that is not an :class:`~inferperf.errors.InferperfError` is an
inferperf bug: it comes back as a :class:`WorkerInternalError` of the same name, which the
CLI reports as an internal error. Either way the worker's traceback text is chained as the
``__cause__`` (a :class:`WorkerTraceback`), so ``--debug`` prints where the worker failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import BackendUnavailable, InferperfError, MeasurementError, ModelError, RuntimeFailure, UsageError
from ..fsutil import atomic_write_text

_ERRORS: dict[str, type[InferperfError]] = {
    c.__name__: c for c in (UsageError, ModelError, BackendUnavailable, RuntimeFailure, MeasurementError)
}
ERROR_FILE = "error.json"


class WorkerTraceback(Exception):
    """The traceback text of an exception raised in a worker process (chained as ``__cause__``)."""


class WorkerInternalError(Exception):
    """An exception in a worker that inferperf did not raise on purpose (a bug); subclassed under
    the original exception's name so the CLI's one line names it."""


def error_doc(e: BaseException) -> dict[str, Any]:
    """What a worker writes for an exception: class name, one-line message, exit code, traceback text."""
    ours = isinstance(e, InferperfError)
    return {
        "type": type(e).__name__,
        "message": str(e) if ours else f"{type(e).__name__}: {e}",
        "exit_code": e.exit_code if ours else 1,
        "internal": not ours,
        "traceback": "".join(traceback.format_exception(e)),
    }


def raise_error_doc(doc: dict[str, Any]) -> None:
    """Raise the exception a worker reported in ``doc`` (see :func:`error_doc`), its traceback chained.

    Raises:
        the worker's InferperfError class (MeasurementError when unknown), or a WorkerInternalError
        named after the worker's exception when it was not inferperf's own.
    """
    cause = WorkerTraceback(doc.get("traceback") or "(no traceback)")
    if doc.get("internal"):
        name = str(doc.get("type") or "Exception")
        cls = type(name if name.isidentifier() else "Exception", (WorkerInternalError,), {"__module__": __name__})
        message = doc["message"].removeprefix(f"{name}: ")
        raise cls(message) from cause
    raise _ERRORS.get(doc.get("type", ""), MeasurementError)(doc["message"]) from cause


@contextlib.contextmanager
def run_job(
    module: str,
    job: dict[str, Any],
    out_name: str,
    *,
    what: str,
    timeout_s: float,
    timeout_fix: str = "",
    env: dict[str, str] | None = None,
    argv_prefix: list[str] | None = None,
) -> Iterator[Path]:
    """Run ``python -m module job.json OUT`` in a fresh process; yield the output path it wrote.

    Args:
        module: the worker module (its ``main(argv)`` calls :func:`serve_job`).
        job: the JSON job document.
        out_name: the output file's name inside the job folder.
        what: how messages name the job (``run 2``, ``openvino: the outputs worker``).
        timeout_s: seconds before the worker is killed.
        timeout_fix: what the timeout message suggests.
        env: the worker's environment (default: this process's).
        argv_prefix: a command to run the interpreter under (``numactl ...``).

    Yields:
        the output path; the folder holding it is removed when the ``with`` block ends.

    Raises:
        the worker's error (see :func:`raise_error_doc`); MeasurementError when the worker times out,
        is killed (e.g. out of memory) or writes nothing.
    """
    with tempfile.TemporaryDirectory(prefix="inferperf-") as tmp:
        job_path, out = Path(tmp) / "job.json", Path(tmp) / out_name
        job_path.write_text(json.dumps(job))
        argv = [*(argv_prefix or []), sys.executable, "-m", module, str(job_path), str(out)]
        proc = subprocess.Popen(argv, env=env if env is not None else dict(os.environ), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            fix = f": {timeout_fix}" if timeout_fix else ""
            raise MeasurementError(f"{what} timed out after {timeout_s:.0f} s and was killed{fix}") from None
        except BaseException:  # Ctrl-C / SIGTERM: reap the worker, then let the interrupt through
            proc.kill()
            proc.wait()
            raise
        err = Path(tmp) / ERROR_FILE
        if err.exists():
            raise_error_doc(json.loads(err.read_text()))
        if not out.exists():
            rc = proc.returncode
            how = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
            oom = " (out of memory?)" if rc == -9 else ""
            tail = (stderr or "").strip().splitlines()[-1:] or [""]
            raise MeasurementError(f"{what} worker {how}{oom} without a result {tail[0][:200]}".rstrip())
        yield out


def serve_job(argv: list[str], work: Callable[[dict[str, Any], Path], None]) -> int:
    """Worker side: read ``argv[0]`` (the job), run ``work(job, out_path)``; return the exit code.

    An exception is written to ``error.json`` beside the output (see :func:`error_doc`),
    never printed: the parent raises it.
    """
    job_path, out = Path(argv[0]), Path(argv[1])
    try:
        work(json.loads(job_path.read_text()), out)
        return 0
    except Exception as e:  # reported to the parent as data
        doc = error_doc(e)
        atomic_write_text(out.with_name(ERROR_FILE), json.dumps(doc))
        return int(doc["exit_code"])
