"""Model instances: ``instance_count`` executors running batches in parallel, off the event loop.

Each instance is one thread of its own (a one-worker
:class:`~concurrent.futures.ThreadPoolExecutor`): ONNX Runtime, OpenVINO and
PyTorch release the GIL while they compute, so instances really overlap.
Instances hold a session each (``shared=False``, the default) or share one
session (``shared=True``, concurrent ``run`` calls on one ONNX Runtime
session, which is thread-safe). benchmarks/serve_instances.py measured both
(BENCHMARKS.md, "Serving: model instances"): no difference that separates from
this machine's noise; a session each is the default because only it can follow
a per-instance CPU split (below), at the cost of one copy of the weights each.

Threads: the default ``intra_op_num_threads`` is effective CPUs // instances
(at least 1), with a note when instances x threads exceed the effective CPUs.

Pinning (``cpus``): the CPU list is split into ``instance_count`` contiguous
parts (when it has that many CPUs; else every instance gets the whole list).
Each instance thread pins ITSELF (Linux: ``os.sched_setaffinity`` on its native
thread id, which sets that one thread's mask) and then creates its session, so
the runtime's intra-op threads, created with the session, inherit the mask.
The event loop's thread stays unpinned. With a shared session every instance
thread gets the whole list.

Batch assembly: the requests' inputs are concatenated along the batch axis
(one request: passed as is, no copy), the model runs once, and every output is
split back by row offsets, so each request gets exactly its own rows (views,
no copy). All of it runs in the instance thread, timed as Triton's
``compute_input``, ``compute_infer`` and ``compute_output``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.base import create_backend
from ..clock import SYSTEM_CLOCK, Clock
from ..config import SessionOptions
from ..errors import UsageError
from ..measure.threads import name_this_thread
from ..results.model import TensorInfo


def split_cpus(cpus: Sequence[int] | None, count: int) -> list[list[int] | None]:
    """CPU sets for ``count`` instances: ``cpus`` cut into contiguous parts, sizes differing by at most 1.

    With fewer CPUs than instances every instance gets the whole list; ``None`` (not pinned) for each
    when ``cpus`` is None.
    """
    if cpus is None:
        return [None] * count
    cpus = list(cpus)
    if len(cpus) < count:
        return [list(cpus) for _ in range(count)]
    base, extra = divmod(len(cpus), count)
    out, start = [], 0
    for i in range(count):
        n = base + (1 if i < extra else 0)
        out.append(cpus[start : start + n])
        start += n
    return out


def default_threads(effective_cpus: int, count: int, cpus: Sequence[int] | None = None) -> int:
    """Default intra-op threads per instance: (pinned CPUs of one instance, else effective CPUs) // count, >= 1."""
    if cpus is not None:
        return max(1, len(split_cpus(cpus, count)[0] or []))
    return max(1, effective_cpus // count)


def oversubscription_note(count: int, threads: int | None, effective_cpus: int) -> str | None:
    """The warning for ``count`` instances x ``threads`` intra-op threads over ``effective_cpus``, or None."""
    if isinstance(threads, int) and threads > 0 and count * threads > effective_cpus:
        return (
            f"oversubscribed: {count} instance(s) x {threads} intra-op threads > {effective_cpus} effective CPUs:"
            " lower --instance-count or --intra-op-threads"
        )
    return None


def _name_instance(index: int, cpus: list[int] | None) -> None:
    """A shared-session instance's thread: pinned to ``cpus`` (when given) and named ``ip-inst-INDEX``."""
    if cpus:
        pin_this_thread(cpus)
    name_this_thread(f"ip-inst-{index}")


def pin_this_thread(cpus: Sequence[int]) -> list[int]:
    """Pin the calling thread (only it, and threads it creates later) to ``cpus``; return its mask.

    Raises:
        UsageError: a CPU this process may not use (names the allowed ones).
    """
    allowed = sorted(os.sched_getaffinity(0))
    stray = [c for c in cpus if c not in allowed]
    if stray:
        raise UsageError(f"--cpus {stray} not available to this process (allowed: {allowed}): pick from those")
    tid = threading.get_native_id()
    os.sched_setaffinity(tid, list(cpus))  # Linux: a thread id sets that thread's mask
    return sorted(os.sched_getaffinity(tid))


def concat_rows(feeds: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """One feed holding every request's rows in order (one request: its own arrays, no copy)."""
    if len(feeds) == 1:
        return feeds[0]
    return {n: np.concatenate([f[n] for f in feeds], axis=0) for n in names}


def split_rows(outputs: Sequence[Any], rows: Sequence[int], names: Sequence[str]) -> list[list[Any]]:
    """Each request's rows of every output (views), by row offsets.

    Args:
        outputs: the batch's outputs, batch axis first.
        rows: rows of each request, in batch order.
        names: output names (for the message).

    Raises:
        ValueError: an output whose leading dim is not the batch's total rows (it cannot be split).
    """
    if len(rows) == 1:
        return [[np.asarray(o) for o in outputs]]
    total = sum(rows)
    arrays = [np.asarray(o) for o in outputs]
    for name, a in zip(names, arrays, strict=True):
        if a.ndim == 0 or a.shape[0] != total:
            raise ValueError(
                f"output '{name}' has shape {list(a.shape)}, not {total} rows first: it cannot be split per"
                " request; serve this model without dynamic batching"
            )
    offsets = np.cumsum([0, *rows])
    return [[a[offsets[i] : offsets[i + 1]] for a in arrays] for i in range(len(rows))]


@dataclass
class BatchOutput:
    """One batch's result: per-request outputs (in ``outputs()`` order) and its phase times (ns)."""

    per_request: list[list[Any]]
    input_ns: int
    infer_ns: int
    output_ns: int
    instance: int


def _call_of(backend: Any) -> Callable[[dict[str, Any]], list[Any]]:
    """The backend's call returning host numpy outputs in ``outputs()`` order (ORT: the raw ``run``)."""
    if backend.name == "onnxruntime":
        return backend.runner()
    return backend.fetch


class InstancePool:
    """``count`` model instances, each one thread, with a session each or one shared session.

    Args:
        backend: backend name (``onnxruntime``, ``openvino``, ``torch``).
        session: session settings; ``intra_op_num_threads=None`` = :func:`default_threads`.
        model_path: the model to load (already resolved and made batchable if needed).
        count: instances.
        shared: one session for every instance (concurrent runs) instead of one each.
        cpus: CPUs to pin the instances to (see the module docstring), or None.
        effective_cpus: this process's effective CPUs (for the default threads and the warning).
        clock: times the batch phases.
        backend_kwargs: extra backend arguments.

    Raises:
        UsageError / ModelError / BackendUnavailable: from the backend while loading.
    """

    def __init__(
        self,
        backend: str,
        session: SessionOptions,
        model_path: Path | str,
        count: int,
        *,
        shared: bool = False,
        cpus: Sequence[int] | None = None,
        effective_cpus: int = 1,
        clock: Clock = SYSTEM_CLOCK,
        backend_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.count = count
        self.shared = shared
        self._clock = clock
        self.notes: list[str] = []
        parts = [list(cpus)] * count if (shared and cpus is not None) else split_cpus(cpus, count)
        self.cpus = parts
        kwargs = dict(backend_kwargs or {})
        kwargs.setdefault("default_threads", default_threads(effective_cpus, count, cpus))
        if shared:
            kwargs.setdefault("concurrency", count)
        self._threads = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"inferperf-instance-{i}") for i in range(count)
        ]
        self._backends: list[Any] = []
        self._calls: list[Callable[[dict[str, Any]], list[Any]]] = []
        try:
            for i in range(count):
                if shared and i > 0:
                    self._calls.append(self._calls[0])
                    self._threads[i].submit(_name_instance, i, parts[i]).result()
                    continue
                self._threads[i].submit(self._load, i, backend, session, model_path, parts[i], kwargs).result()
        except BaseException:
            self.close()
            raise
        first = self._backends[0]
        self.effective = first.effective_settings()
        self.notes.extend(first.notes())
        note = oversubscription_note(count, self.effective.get("intra_op_num_threads"), effective_cpus)
        if note:
            self.notes.append(note)
        self.input_names = [i.name for i in first.inputs()]
        self.output_names = [o.name for o in first.outputs()]
        self._free: deque[int] = deque(range(count))

    def _load(self, index: int, backend: str, session: SessionOptions, path: Path | str, cpus: list[int] | None,
              kwargs: dict[str, Any]) -> None:
        if cpus:
            pin_this_thread(cpus)  # before the session exists: its intra-op threads inherit the mask
        name_this_thread(f"ip-pool-{index}")  # the runtime's threads started by the session inherit this name
        b = create_backend(backend, session, **kwargs)
        b.load(Path(path))
        name_this_thread(f"ip-inst-{index}")  # the thread that calls the runtime (measure/threads.py's roles)
        self._backends.append(b)
        self._calls.append(_call_of(b))

    def inputs(self) -> list[TensorInfo]:
        """Model inputs as the session reports them."""
        return self._backends[0].inputs()

    def outputs(self) -> list[TensorInfo]:
        """Model outputs as the session reports them."""
        return self._backends[0].outputs()

    @property
    def backend_name(self) -> str:
        """The runtime's name."""
        return str(self._backends[0].name)

    def run_sync(self, index: int, feeds: Sequence[dict[str, Any]], rows: Sequence[int]) -> BatchOutput:
        """Run one batch on instance ``index`` in the calling thread: concatenate, run, split (timed, ns).

        Raises:
            whatever the runtime raises; ValueError when outputs cannot be split per request.
        """
        now = self._clock.now_ns
        t0 = now()
        feed = concat_rows(feeds, self.input_names)
        t1 = now()
        outs = self._calls[index](feed)
        t2 = now()
        per = split_rows(outs, rows, self.output_names)
        t3 = now()
        return BatchOutput(per, t1 - t0, t2 - t1, t3 - t2, index)

    async def run(self, feeds: Sequence[dict[str, Any]], rows: Sequence[int]) -> BatchOutput:
        """Run one batch on a free instance, in that instance's thread (the caller keeps at most
        ``count`` batches in flight).

        Raises:
            RuntimeError: no instance is free (the caller let more than ``count`` batches in flight).
        """
        if not self._free:
            raise RuntimeError("no free model instance: at most instance_count batches may run at once")
        index = self._free.popleft()
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._threads[index], self.run_sync, index, feeds, rows)
        finally:
            self._free.append(index)

    async def run_on(self, index: int, feeds: Sequence[dict[str, Any]], rows: Sequence[int]) -> BatchOutput:
        """Run one batch on instance ``index`` (a pinned lane: one batch in flight per instance, the caller's
        rule), in that instance's thread.

        Raises:
            whatever :meth:`run_sync` raises.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads[index], self.run_sync, index, feeds, rows)

    def warm_up(self, feeds: Sequence[dict[str, Any]], iterations: int) -> None:
        """Run ``max(iterations, len(feeds))`` calls on every instance, cycling ``feeds``, each instance in
        its own thread (all at once)."""
        def work(i: int) -> None:
            for k in range(max(iterations, len(feeds))):
                self._calls[i](feeds[k % len(feeds)])

        futures = [self._threads[i].submit(work, i) for i in range(self.count)]
        for f in futures:
            f.result()

    def close(self) -> None:
        """Stop the instance threads (after their current batch) and drop the sessions."""
        for t in self._threads:
            t.shutdown(wait=True)
        for b in self._backends:
            b.close()
        self._backends = []
