"""The dynamic batcher: Triton's batch-formation rule (pure) and the asyncio queue around it.

Batch formation is :func:`~inferperf.policy.batching.decide` (the policy module: one pure copy of
Triton's ``DynamicBatchScheduler::GetDynamicBatch`` rule, for this server and the capacity simulator; tested
exactly on :class:`~inferperf.clock.FakeClock`), evaluated here whenever a model instance is free;
``BatchPolicy``, ``Decision``, ``Queued`` and ``decide`` are re-exported from this module.

With dynamic batching off each request is its own batch, still through the
queue (``max_queue_size`` applies) and the instances (``instance_count`` apply).

:class:`DynamicBatcher` is the asyncio plumbing: admission (``QueueFull``
beyond exactly ``max_queue_size`` waiting requests), the dispatcher task that
forms a batch whenever an instance is free, dropping requests whose client
went away before their batch runs, and handing each batch to ``execute``.
Asking the clients takes time (an await per request): a request whose deadline
passes, or whose caller is cancelled, while its batch is being asked is taken
out then (504 / Cancelled at that moment), and the rest of the batch is formed
again by the same rule.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..clock import SYSTEM_CLOCK, Clock
from ..policy.batching import BatchPolicy, Decision, Queued, decide
from .errors import Cancelled, NotReady, QueueFull, QueueTimeout


def _cancel_quietly(future: asyncio.Future[Any], model: str) -> None:
    """Fail a dropped request's future with :class:`Cancelled`, marked as retrieved: its caller is usually gone
    (the client disconnected), and asyncio would otherwise log "Future exception was never retrieved"; a caller
    still awaiting it gets the exception all the same."""
    if not future.done():
        future.set_exception(Cancelled(model))
        future.exception()


class Observer(Protocol):
    """Callbacks the serving core makes (part A's metrics implement them); see serve-contract.md."""

    def request_queued(self, model: str) -> None:  # pragma: no cover - protocol
        """Queue depth +1."""

    def request_dequeued(self, model: str) -> None:  # pragma: no cover - protocol
        """Queue depth -1 (taken into a batch or cancelled)."""

    def rejected(self, model: str, reason: str) -> None:  # pragma: no cover - protocol
        """A request refused: ``queue_full``, ``not_ready`` or ``shutting_down`` (never queued)."""

    def cancelled(self, model: str) -> None:  # pragma: no cover - protocol
        """A queued request dropped because its client went away."""

    def batch_executed(
        self, model: str, batch_rows: int, n_requests: int, queue_ns: list[int], compute_ns: int, failed: bool,
        instance: int | None = None,
    ) -> None:  # pragma: no cover - protocol
        """One model call finished: rows, requests, each request's queue time (ns), compute time (ns), the model
        instance that ran it (None: not known)."""


class NullObserver:
    """An observer that records nothing."""

    def request_queued(self, model: str) -> None:
        """No-op."""

    def request_dequeued(self, model: str) -> None:
        """No-op."""

    def rejected(self, model: str, reason: str) -> None:
        """No-op."""

    def cancelled(self, model: str) -> None:
        """No-op."""

    def batch_executed(self, model: str, batch_rows: int, n_requests: int, queue_ns: list[int],
                       compute_ns: int, failed: bool, instance: int | None = None) -> None:
        """No-op."""


@dataclass(eq=False)
class Request:
    """One accepted request waiting in (or taken from) the queue.

    Attributes:
        inputs: input name -> array (batch dim first when the model batches).
        rows: batch rows (1 for a model without a batch dim).
        key: what must match for requests to share a batch (non-batch dims and datatypes).
        arrival_ns: when it was queued (clock ns).
        is_disconnected: async callable, True once the client went away (None = never asked).
        future: resolved with the request's outputs, or an exception.
        dispatch_ns: when its batch was dispatched (clock ns), 0 until then.
        compute_ns: its batch's model call (ns), set by the executor; 0 until then.
    """

    inputs: dict[str, Any]
    rows: int
    key: Hashable
    arrival_ns: int
    is_disconnected: Callable[[], Awaitable[bool]] | None = None
    future: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    dispatch_ns: int = 0
    compute_ns: int = 0


#: ``execute(batch)``: run one batch and resolve every request's future (outputs or an exception).
Execute = Callable[[list[Request]], Awaitable[None]]


class DynamicBatcher:
    """Queue, admission and the dispatcher task for one model.

    Args:
        model: model name (for observer calls and messages).
        policy: batch formation rules.
        execute: coroutine running one batch on a free instance and resolving each request's future;
            at most ``slots`` run at once.
        slots: model instances (batches in flight at once).
        max_queue_size: requests that may wait; the next one gets :class:`QueueFull` (0 = unbounded).
        timeout_ms: a request still queued this long after arrival is removed and fails with
            :class:`QueueTimeout` at that moment (an event-loop timer; 0 = no deadline).
        clock: arrival and deadline clock (the event loop's timeouts must run on the same time).
        observer: metrics callbacks.

    The dispatcher starts on the first :meth:`submit` (or :meth:`start`) in the running loop; :meth:`close` at the end.
    """

    def __init__(
        self,
        model: str,
        policy: BatchPolicy,
        execute: Execute,
        slots: int,
        max_queue_size: int = 0,
        clock: Clock = SYSTEM_CLOCK,
        observer: Observer | None = None,
        timeout_ms: int = 0,
    ) -> None:
        self.model = model
        self.timeout_ms = timeout_ms
        self.policy = policy
        self._execute = execute
        self._free = slots
        self._slots = slots
        self.max_queue_size = max_queue_size
        self._clock = clock
        self._observer = observer or NullObserver()
        self._queue: deque[Request] = deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._closing = False
        self._checking: set[Request] = set()  # taken from the queue, their clients being asked (see _check)
        self.dispatched: list[tuple[int, list[Request]]] = []  # (dispatch ns, batch): kept only when record=True
        self.record = False

    @property
    def depth(self) -> int:
        """Requests waiting now."""
        return len(self._queue)

    @property
    def closing(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closing

    @property
    def in_flight(self) -> int:
        """Batches running now."""
        return self._slots - self._free

    def start(self) -> None:
        """Start the dispatcher task on the running loop (again, if an earlier loop has ended)."""
        loop = asyncio.get_running_loop()
        if self._task is not None and self._loop is loop and not self._task.done():
            return
        self._queue.clear()  # requests of an ended loop cannot be answered any more
        self._running.clear()
        self._free = self._slots
        self._loop = loop
        self._wake = asyncio.Event()
        self._task = loop.create_task(self._dispatch_loop(), name=f"batcher:{self.model}")
        self._task.add_done_callback(self._dispatcher_ended)

    def _dispatcher_ended(self, task: asyncio.Task[None]) -> None:
        """A dispatcher that died of a bug fails what waits (the next submit starts a new one)."""
        if task.cancelled() or task.exception() is None:
            return
        err = task.exception()
        while self._queue:
            req = self._queue.popleft()
            self._observer.request_dequeued(self.model)
            if not req.future.done():
                req.future.set_exception(RuntimeError(f"model '{self.model}': the batcher failed: {err!r}"))

    async def submit(self, request: Request) -> Any:
        """Queue ``request`` and wait for its outputs.

        Raises:
            QueueFull: ``max_queue_size`` requests already wait.
            NotReady: the batcher is shutting down (reason ``shutting_down``).
            Cancelled: the client went away before its batch ran.
            ModelExecutionError: the batch failed.
        """
        if self._closing:
            self._observer.rejected(self.model, "shutting_down")
            raise NotReady(self.model, "shutting_down")
        self.start()
        assert self._wake is not None
        if self.max_queue_size and len(self._queue) >= self.max_queue_size:
            self._observer.rejected(self.model, "queue_full")
            raise QueueFull(self.model, self.max_queue_size)
        self._queue.append(request)
        self._observer.request_queued(self.model)
        self._wake.set()
        timer = None
        if self.timeout_ms:
            delay_s = max(0.0, (request.arrival_ns + self.timeout_ms * 1_000_000 - self._clock.now_ns()) / 1e9)
            timer = asyncio.get_running_loop().call_later(delay_s, self._expire, request)
        try:
            return await asyncio.shield(request.future)  # cancelling the caller never cancels the batch's future
        except asyncio.CancelledError:
            self._drop_if_queued(request)  # the caller's task was cancelled (client gone)
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _expire(self, request: Request) -> None:
        """The deadline of ``request`` came: if it still waits (in the queue, or taken out while its batch is
        checked for disconnects), take it out and fail it (504); if its batch already runs, nothing happens."""
        if not self._take_out(request):
            return
        self._observer.request_dequeued(self.model)
        self._observer.rejected(self.model, "timeout")
        if not request.future.done():
            request.future.set_exception(QueueTimeout(self.model, self.timeout_ms))
            request.future.exception()  # retrieved: the caller may be gone too
        assert self._wake is not None
        self._wake.set()

    def _drop_if_queued(self, request: Request) -> None:
        if not self._take_out(request):
            return  # already running in a batch
        self._observer.request_dequeued(self.model)
        self._observer.cancelled(self.model)
        _cancel_quietly(request.future, self.model)
        assert self._wake is not None
        self._wake.set()

    def _take_out(self, request: Request) -> bool:
        """Remove ``request`` from the waiting ones: the queue, or the batch being checked (the dispatcher then
        leaves it out, its future being done). False when it waits no more (its batch runs, or it is answered)."""
        if request in self._checking:
            self._checking.discard(request)
            return True
        try:
            self._queue.remove(request)
        except ValueError:
            return False
        return True

    async def _dispatch_loop(self) -> None:
        assert self._wake is not None
        wake = self._wake
        while True:
            wake.clear()
            if self._closing and not self._queue:
                return
            if self._free == 0 or not self._queue:
                await wake.wait()
                continue
            now = self._clock.now_ns()
            take, until = decide(self._queue, now, self.policy, flush=self._closing)
            if take == 0:
                assert until is not None
                try:
                    await asyncio.wait_for(wake.wait(), max(0, until - now) / 1e9)
                except TimeoutError:
                    pass
                continue
            batch = [self._queue.popleft() for _ in range(take)]
            kept = await self._check(batch)
            if len(kept) < len(batch):
                for req in reversed(kept):
                    self._queue.appendleft(req)  # re-form without them: same arrivals, same rule, deadlines kept
                continue
            self._launch(batch)

    async def _check(self, batch: list[Request]) -> list[Request]:
        """The requests of ``batch`` still to run: without those whose client went away (their futures fail with
        Cancelled) and those whose deadline passed, or whose caller was cancelled, while the clients were being
        asked (:meth:`_expire` / :meth:`_drop_if_queued` find them here, as they would in the queue)."""
        self._checking.update(batch)
        try:
            for req in batch:
                ask = req.is_disconnected
                if ask is None or req not in self._checking:
                    continue
                try:
                    away = await ask()
                except Exception:
                    away = True
                if away and self._take_out(req):
                    self._observer.request_dequeued(self.model)
                    self._observer.cancelled(self.model)
                    _cancel_quietly(req.future, self.model)
        finally:
            kept = [r for r in batch if r in self._checking]
            self._checking.difference_update(batch)
        return kept

    def _launch(self, batch: list[Request]) -> None:
        now = self._clock.now_ns()
        for req in batch:
            req.dispatch_ns = now
            self._observer.request_dequeued(self.model)
        if self.record:
            self.dispatched.append((now, batch))
        self._free -= 1
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, batch: list[Request]) -> None:
        try:
            await self._execute(batch)
        except Exception as e:  # execute should answer every request itself; never leave one hanging
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(e)
        finally:
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(RuntimeError(f"model '{self.model}': the batch ended without an answer"))
            self._free += 1
            assert self._wake is not None
            self._wake.set()

    async def close(self, drain: bool = True) -> None:
        """Stop accepting; with ``drain`` answer every queued request (no more waiting for the delay),
        else fail queued requests with NotReady (``shutting_down``); then wait for running batches."""
        self._closing = True
        if not drain:
            while self._queue:
                req = self._queue.popleft()
                self._observer.request_dequeued(self.model)
                if not req.future.done():
                    req.future.set_exception(NotReady(self.model, "shutting_down"))
        if self._task is None or self._loop is not asyncio.get_running_loop() or self._task.done():
            return  # never started, or started on a loop that has ended: nothing runs
        assert self._wake is not None
        self._wake.set()
        await self._task
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)


__all__ = ["BatchPolicy", "Decision", "DynamicBatcher", "Execute", "NullObserver", "Observer", "Queued", "Request",
           "decide"]
