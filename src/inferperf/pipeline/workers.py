"""Stage workers: the call a stage makes on one item, in a thread of this process or in a child process.

A :class:`ThreadWorker` calls the stage in the calling thread (items are passed by reference: no hand-over
cost). A :class:`ProcessWorker` owns one child process (``spawn``) that builds the stage itself (imports the
function, or creates the model's session) and answers over a pipe; the parent's proxy thread measures the
round trip, the child measures the service time, and the difference is the hand-over (pickling, pipe
transfer, unpickling), reported per hop. Both read time through :mod:`inferperf.clock`: a thread worker its
clock (the system clock, ``perf_counter_ns``, unless given another), a process worker and its child the
system clock (CLOCK_MONOTONIC, shared by every process on Linux); both count the calling thread's CPU time
(:data:`~inferperf.clock.thread_cpu_ns`), which a GIL-bound thread does not accumulate while it waits.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..clock import SYSTEM_CLOCK, Clock, thread_cpu_ns
from ..errors import MeasurementError, UsageError
from .spec import StageSpec, model_path, resolve_callable

#: ONNX Runtime settings a model stage gets unless its ``session:`` says otherwise: one intra-op thread per
#: worker, so stages running side by side do not oversubscribe the CPUs (and no spinning pool threads).
MODEL_DEFAULTS: dict[str, Any] = {"intra_op_num_threads": 1}

_now = SYSTEM_CLOCK.now_ns
_cpu = thread_cpu_ns


class StageError(Exception):
    """A stage raised on an item: ``kind`` is the exception's class name, the message its first line."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclass
class Call:
    """One item through one worker: the item it returned, service start/end (ns, perf_counter), CPU ns of the
    thread that ran it, hand-over ns (process workers: the round trip minus the service), the error if any."""

    item: Any
    start_ns: int
    end_ns: int
    cpu_ns: int
    handover_ns: int = 0
    error: StageError | None = None


def build_stage(stage: StageSpec, base_dir: str | Path) -> tuple[Callable[[Any], Any], dict[str, Any], Callable[[], None]]:
    """The stage's item -> item callable, what it is (``info``: backend settings of a model), and its close.

    Raises:
        UsageError: the function cannot be imported, or the model cannot be loaded (ModelError,
            BackendUnavailable).
    """
    if stage.function:
        fn = resolve_callable(stage.function, base_dir, f"stage {stage.name!r}: function")
        return fn, {}, lambda: None
    from ..backends.base import create_backend
    from ..config import SessionOptions
    from ..zoo import resolve

    settings = {**MODEL_DEFAULTS, **stage.session}
    try:
        opts = SessionOptions(**settings)
    except Exception as e:  # noqa: BLE001 - pydantic's first error, one line
        errs = e.errors() if hasattr(e, "errors") else []
        what = (f"{'.'.join(map(str, errs[0]['loc']))}: {errs[0]['msg']}" if errs else str(e).splitlines()[0])
        raise UsageError(f"stage {stage.name!r}: session setting {what}: use ONNX Runtime's SessionOptions names"
                         f" (intra_op_num_threads, execution_mode, ...) or session_config") from None
    backend = create_backend(stage.backend, opts)
    backend.load(Path(resolve(model_path(stage.model or "", base_dir))))
    run = backend.runner()
    names = [t.name for t in backend.inputs()]
    key_in, key_out, name = stage.input, stage.output, stage.name

    def model_stage(item: Any) -> Any:
        """Feed ``item[input]`` (an array for the only input, or a dict of feeds) and store the outputs."""
        if not isinstance(item, dict):
            raise TypeError(f"model stage {name!r} needs dict items, got {type(item).__name__}")
        if key_in not in item:
            raise KeyError(f"model stage {name!r}: the item has no key {key_in!r} (keys: {sorted(map(str, item))})")
        x = item[key_in]
        feeds = x if isinstance(x, dict) else {names[0]: x}
        if any(getattr(v, "shape", (1,))[:1] == (0,) for v in feeds.values()):
            item[key_out] = []  # an empty batch (no boxes found): nothing to run
            return item
        item[key_out] = list(run(feeds))
        return item

    info = {"backend": stage.backend, "session": {"requested": settings, "effective": backend.effective_settings()}}
    return model_stage, info, backend.close


class ThreadWorker:
    """Runs the stage in the calling thread (the engine's worker thread), timed on ``clock`` (ns)."""

    def __init__(self, fn: Callable[[Any], Any], clock: Clock = SYSTEM_CLOCK) -> None:
        self.fn = fn
        self._now = clock.now_ns

    def call(self, item: Any) -> Call:
        """Run the stage on ``item``; an exception becomes ``Call.error`` (the item is then dropped)."""
        _now = self._now
        c0, t0 = _cpu(), _now()
        try:
            out = self.fn(item)
            err = None
        except Exception as e:  # noqa: BLE001 - a stage's failure is counted, the pipeline goes on
            out, err = None, StageError(type(e).__name__, (str(e).splitlines() or [""])[0][:300])
        t1 = _now()
        return Call(out, t0, t1, _cpu() - c0, 0, err)

    def close(self) -> None:
        """Nothing to release (the stage's resources are closed by its owner)."""


def _child_main(conn: Any, stage_doc: dict[str, Any], base_dir: str, path: list[str]) -> None:
    """Child process: build the stage, say ready (or the error), then answer items until ``None``."""
    sys.path[:0] = [p for p in path if p not in sys.path]
    os.environ["INFERPERF_WORKER"] = "1"
    try:
        fn, info, close = build_stage(StageSpec(**stage_doc), base_dir)
    except Exception as e:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("error", type(e).__name__, str(e)))
        return
    conn.send(("ready", info, os.getpid()))
    while True:
        try:
            item = conn.recv()
        except EOFError:
            break
        if item is None:
            break
        c0, t0 = _cpu(), _now()
        try:
            out = fn(item)
            t1 = _now()
            conn.send(("ok", out, t0, t1, _cpu() - c0))
        except Exception as e:  # noqa: BLE001
            t1 = _now()
            conn.send(("err", type(e).__name__, (str(e).splitlines() or [""])[0][:300], t0, t1, _cpu() - c0))
    close()


class ProcessWorker:
    """One child process running the stage; :meth:`call` sends an item and waits for the answer.

    Raises (constructor):
        UsageError: the child could not build the stage (the child's one-line reason).
        MeasurementError: the child did not start within ``start_timeout_s``.
    """

    def __init__(self, stage: StageSpec, base_dir: str | Path, start_timeout_s: float = 120.0) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.stage = stage.name
        self.proc = ctx.Process(target=_child_main, name=f"inferperf-stage-{stage.name}", daemon=True,
                                args=(child, stage.model_dump(), str(base_dir), [str(Path(base_dir).resolve()), *sys.path]))
        self.proc.start()
        child.close()
        if not self._conn.poll(start_timeout_s):
            self.close()
            raise MeasurementError(f"stage {stage.name!r}: worker process did not start in {start_timeout_s:g} s")
        msg = self._conn.recv()
        if msg[0] == "error":
            self.close()
            raise UsageError(f"stage {stage.name!r} (process worker): {msg[2]}")
        self.info, self.pid = msg[1], msg[2]

    def call(self, item: Any) -> Call:
        """Send ``item``, wait for the child's answer; the hand-over is the round trip minus the service."""
        ts = _now()
        try:
            self._conn.send(item)
            msg = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError) as e:
            t = _now()
            code = self.proc.exitcode
            return Call(None, ts, t, 0, 0, StageError("WorkerExited", f"process worker of {self.stage!r} ended"
                                                                    f" (exit code {code}): {type(e).__name__}"))
        except Exception as e:  # noqa: BLE001 - an item (or result) that cannot be pickled
            t = _now()
            return Call(None, ts, t, 0, 0, StageError(type(e).__name__, f"cannot pass the item to a process: {e}"))
        tb = _now()
        if msg[0] == "ok":
            _, out, t0, t1, cpu = msg
            return Call(out, t0, t1, cpu, max(0, (t0 - ts) + (tb - t1)))
        _, kind, text, t0, t1, cpu = msg
        return Call(None, t0, t1, cpu, max(0, (t0 - ts) + (tb - t1)), StageError(kind, text))

    def close(self) -> None:
        """Ask the child to stop, then terminate it if it has not exited within 5 s."""
        try:
            self._conn.send(None)
        except (OSError, BrokenPipeError, ValueError):
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)
        self._conn.close()


__all__ = ["Call", "MODEL_DEFAULTS", "ProcessWorker", "StageError", "ThreadWorker", "build_stage"]
