"""Sequence batching: stateful models served as Triton serves them (issue 42).

A model whose ``config.pbtxt`` has ``sequence_batching`` takes requests that belong to sequences: each request
carries Triton's request parameters ``sequence_id`` (an integer, or a string), ``sequence_start`` and
``sequence_end`` (HTTP ``parameters``, gRPC ``InferParameter`` s). The scheduler here:

- **Slots.** A sequence holds one slot from its START to its END (or its idle timeout). ``direct``: one slot per
  batch row of each instance (``instance_count x max(1, max_batch_size)``); ``oldest``: ``max_candidate_sequences``
  candidates. A START finding every slot taken waits (in arrival order) for one to free, as in Triton's
  backlog (a library caller may bound the wait: ``wait_s``): a slot never holds two sequences.
- **Order.** A sequence's requests run one at a time, in arrival order; requests of different sequences are
  batched together by the model's dynamic batcher (at most one row per sequence per batch, since each sequence
  has one request in flight), as ``oldest`` batches across its candidates. ``direct`` binds the sequence to its
  slot and so to the slot's instance: every request of the sequence runs on that instance (a batcher per
  instance: ``ServedModel.pin_instances``), the slots handed out round robin across the instances.
- **Control inputs** (``control_input``, model_config.proto's ``ControlKind``): per row, START (first request),
  END (last), READY (1: every row sent holds a request) as ``int32_false_true`` / ``fp32_false_true`` /
  ``bool_false_true``, CORRID (the sequence id, ``data_type`` UINT64, INT64, UINT32, INT32 or STRING).
- **Implicit state** (``state``): the server keeps each sequence's state tensors. At START the input state is
  ``initial_state`` (zeros, or the configured dims of zeros); each request feeds the sequence's state to
  ``input_name`` and keeps ``output_name``'s answer as the next state (the answer's own outputs leave it out).
  This is what makes an ONNX model (which keeps nothing between calls) an accumulator, a recogniser with
  recurrent state, a voice-activity detector.
- **Lifetime.** A slot is freed after the END request ran, or when no request of the sequence came for
  ``max_sequence_idle_microseconds`` (default 1 s, Triton's); a client that disconnects mid-sequence leaves it
  live until then.
- **Refusals** (400, Triton's words): no sequence id on a sequence model, a request (not START) for a sequence
  that is not live (never started, ended, or expired), a request of more than one row ("must specify
  batch-size 1 due to requirements of sequence batcher"), an id its CORRID input's type cannot carry. A START
  for an id already live ends that sequence and starts a new one (Triton: "has a conflict"). A START that
  fails or is refused frees its slot at once.

Differences from Triton, said: a batch row is not a fixed slot index (the batch holds the requests that are
ready, not every slot with READY 0 for the empty ones), and ``direct``'s ``minimum_slot_utilization`` is not
applied (the model's dynamic batching rule forms the batches, with the strategy's queue delay).

Sources: triton-inference-server/server docs/user_guide/architecture.md ("Stateful Models", "Sequence Batcher",
"Implicit State Management"); common ``protobuf/model_config.proto`` (``ModelSequenceBatching``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..clock import SYSTEM_CLOCK, Clock
from .tensor_types import NUMPY_DTYPE, ProtocolError

log = logging.getLogger("inferperf.serve")
#: Triton's default max_sequence_idle_microseconds
DEFAULT_IDLE_US = 1_000_000


@dataclass(frozen=True)
class Control:
    """One control input: ``name``, ``kind`` (``START``, ``END``, ``READY``, ``CORRID``), and for the flags the
    (false, true) values in ``datatype`` (``INT32``, ``FP32`` or ``BOOL``); for CORRID its ``datatype``."""

    name: str
    kind: str
    datatype: str
    false_true: tuple[Any, Any] = (0, 1)


@dataclass(frozen=True)
class State:
    """One implicit state: fed to ``input_name``, read back from ``output_name``; ``datatype`` and ``dims``
    (without the batch dim); zeros at START."""

    input_name: str
    output_name: str
    datatype: str
    dims: tuple[int, ...]


@dataclass(frozen=True)
class SequenceSettings:
    """A model's ``sequence_batching``: ``strategy`` (``direct`` or ``oldest``), ``idle_us``, ``controls``,
    ``states``, ``max_candidate_sequences`` (oldest)."""

    strategy: str = "direct"
    idle_us: int = DEFAULT_IDLE_US
    controls: tuple[Control, ...] = ()
    states: tuple[State, ...] = ()
    max_candidate_sequences: int = 0

    @property
    def hidden_inputs(self) -> frozenset[str]:
        """Model inputs the server feeds (controls and states): not in the model's metadata for clients."""
        return frozenset({c.name for c in self.controls} | {s.input_name for s in self.states})

    @property
    def hidden_outputs(self) -> frozenset[str]:
        """Model outputs the server keeps (states)."""
        return frozenset(s.output_name for s in self.states)


class SequenceError(ProtocolError):
    """A request the sequence rules refuse (400)."""


@dataclass(frozen=True)
class SequenceParams:
    """A request's ``sequence_id`` (int or str), ``start`` and ``end`` flags."""

    sequence_id: int | str
    start: bool = False
    end: bool = False


def sequence_params(params: dict[str, Any]) -> SequenceParams | None:
    """Triton's request parameters ``sequence_id`` / ``sequence_start`` / ``sequence_end`` (None when no id is
    given; ``0`` and ``""`` mean no sequence, as in Triton).

    Raises:
        ProtocolError: an id that is neither an integer nor a string, flags that are not booleans.
    """
    sid = params.get("sequence_id")
    if sid is None or sid == 0 or sid == "":
        if params.get("sequence_start") or params.get("sequence_end"):
            raise ProtocolError("sequence_start / sequence_end need a non-zero sequence_id")
        return None
    if type(sid) is not int and not isinstance(sid, str):
        raise ProtocolError(f"sequence_id {sid!r} must be an integer or a string")
    if type(sid) is int and not 0 < sid < 2**64:
        raise ProtocolError(f"sequence_id {sid} must be an unsigned 64-bit integer")
    for key in ("sequence_start", "sequence_end"):
        if key in params and type(params[key]) is not bool:
            raise ProtocolError(f"{key} {params[key]!r} must be a boolean")
    return SequenceParams(sid, bool(params.get("sequence_start")), bool(params.get("sequence_end")))


@dataclass
class _Sequence:
    sid: int | str
    slot: int
    last_ns: int
    state: dict[str, np.ndarray] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ended: bool = False


class SequenceScheduler:
    """The sequences of one model (module docstring).

    Args:
        model: what runs a request: ``await run(inputs, rows, requested, is_disconnected, **kw)`` returning
            output name -> array (the model's dynamic batcher behind it).
        name: the model's name (in refusals).
        settings: the model's :class:`SequenceSettings`.
        slots: how many sequences may be live at once.
        batched: the model has a batch dim (``max_batch_size`` > 0): control and state tensors get one row per
            request row.
        clock: time source (the fake clock in tests).
        wait_s: how long a START waits for a free slot before ``TimeoutError`` (None: as long as it takes).
        per_instance: ``direct``: slots per instance (its rows); each request of a sequence then runs on its
            slot's instance (``run(..., instance=slot // per_instance)``); 0: any instance.
    """

    def __init__(self, run: Any, name: str, settings: SequenceSettings, slots: int, batched: bool = True,
                 clock: Clock = SYSTEM_CLOCK, wait_s: float | None = None, per_instance: int = 0) -> None:
        self._run, self.name, self.settings, self.clock, self.wait_s = run, name, settings, clock, wait_s
        self.batched, self.per_instance = batched, per_instance
        self.slots = max(1, slots)
        self.live: dict[int | str, _Sequence] = {}
        if per_instance:  # slot s is row s % per_instance of instance s // per_instance; hand them out round robin
            lanes = self.slots // per_instance
            self._free: deque[int] = deque(i * per_instance + j for j in range(per_instance) for i in range(lanes))
        else:
            self._free = deque(range(self.slots))
        self._backlog: deque[asyncio.Future[int]] = deque()
        self.expired = 0  # sequences freed by the idle timeout

    # ------------------------------------------------------------------------------------------------- slots
    def expire_idle(self) -> int:
        """Free the slots of sequences idle past ``idle_us`` (none of their requests running); returns how many."""
        now, limit = self.clock.now_ns(), self.settings.idle_us * 1000
        stale = [s for s in self.live.values() if not s.lock.locked() and now - s.last_ns >= limit]
        for s in stale:
            self._release(s)
        self.expired += len(stale)
        return len(stale)

    def _release(self, seq: _Sequence) -> None:
        if self.live.get(seq.sid) is seq:
            del self.live[seq.sid]
            seq.ended = True
            if seq.slot >= 0:  # (a START that never got its slot holds none)
                self._hand_over(seq.slot)

    def _hand_over(self, slot: int) -> None:
        """``slot`` to the first START still waiting, else to the free slots."""
        while self._backlog and self._backlog[0].done():  # STARTs that gave up (cancelled, timed out)
            self._backlog.popleft()
        if self._backlog:
            self._backlog.popleft().set_result(slot)
        else:
            self._free.append(slot)

    async def _slot(self) -> int:
        self.expire_idle()
        if self._free:
            return self._free.popleft()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[int] = loop.create_future()
        self._backlog.append(waiter)
        end = None if self.wait_s is None else loop.time() + self.wait_s
        try:
            while True:  # woken by a release, or each idle period to free the sequences gone idle
                step = self.settings.idle_us / 1e6
                if end is not None:
                    step = min(step, end - loop.time())
                    if step <= 0:
                        raise TimeoutError
                try:
                    slot = await asyncio.wait_for(asyncio.shield(waiter), step)
                except TimeoutError:
                    self.expire_idle()
                    continue
                task = asyncio.current_task()
                if task is not None and task.cancelling():  # cancelled in the pass the slot came: not taken
                    raise asyncio.CancelledError
                return slot
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._hand_over(waiter.result())  # handed a slot just as this START gave up: to the next
            else:
                waiter.cancel()
            raise

    # ------------------------------------------------------------------------------------------------ running
    def _open(self, p: SequenceParams) -> _Sequence | None:
        """The live sequence of ``p`` (None for a START that needs a slot).

        A START for a live id ends that sequence and starts a new one, as Triton does ("has a conflict ...
        Previous sequence will be terminated early"): its requests still waiting are refused as not live.

        Raises:
            SequenceError: a request (not START) for an id that is not live.
        """
        self.expire_idle()
        seq = self.live.get(p.sequence_id)
        if p.start:
            if seq is not None:
                log.warning("sequence %s of model '%s' has a conflict: a START for it while it is in progress; the "
                            "previous sequence is terminated early", p.sequence_id, self.name)
                self._release(seq)
            return None
        if seq is None:
            raise self._not_live(p)
        return seq

    def _not_live(self, p: SequenceParams) -> SequenceError:
        return SequenceError(f"inference request for sequence {p.sequence_id} to model '{self.name}' must specify the "
                             "START flag on the first request of the sequence (it is not in progress: never started, "
                             "ended, or idle past max_sequence_idle_microseconds)")

    async def infer(self, inputs: dict[str, np.ndarray], rows: int, requested: list[str] | None,
                    is_disconnected: Any, p: SequenceParams | None, **kw: Any) -> dict[str, np.ndarray]:
        """Run one request of sequence ``p``: its turn in the sequence, the control and state inputs added, the
        state kept; returns the outputs asked (state outputs left out).

        Raises:
            SequenceError: no sequence id, or one the rules refuse (400).
            TimeoutError: a START that found no free slot within ``wait_s``.
            whatever the model's run raises (queue full, cancelled, a failed batch).
        """
        if p is None:
            raise SequenceError(f"inference request to model '{self.name}' must specify a non-zero or non-empty "
                                "correlation ID (parameters.sequence_id): it is a sequence model")
        if self.batched and rows != 1:
            raise SequenceError(f"inference request to model '{self.name}' must specify batch-size 1 due to "
                                f"requirements of sequence batcher (got {rows} rows)")
        controls = self._controls(p, rows)  # an id its CORRID cannot carry is refused before any slot is taken
        seq = self._open(p)
        if seq is None:  # a START: live at once (so the requests behind it wait their turn), then its slot
            seq = _Sequence(p.sequence_id, -1, self.clock.now_ns())
            seq.state = {s.input_name: self._initial(s, rows) for s in self.settings.states}
            self.live[p.sequence_id] = seq
            await seq.lock.acquire()
            try:
                seq.slot = await self._slot()
            except BaseException:
                self._release(seq)
                seq.lock.release()
                raise
        else:
            await seq.lock.acquire()  # one request of a sequence at a time, in arrival order (the lock is FIFO)
        try:
            if seq.ended:  # expired, ended or restarted while this request waited its turn: not live for it
                raise self._not_live(p)
            feed = {**inputs, **controls, **seq.state}
            if self.per_instance:
                kw["instance"] = seq.slot // self.per_instance
            ask = None if requested is None else [*requested, *self.settings.hidden_outputs]
            try:
                out = await self._run(feed, rows, ask, is_disconnected, **kw)
            except BaseException:
                if p.start:  # a START that did not run: the sequence never began, its slot goes back
                    self._release(seq)
                raise
            finally:
                seq.last_ns = self.clock.now_ns()
            for st in self.settings.states:
                seq.state[st.input_name] = np.ascontiguousarray(out[st.output_name])
            if p.end:
                self._release(seq)
        finally:
            seq.lock.release()
        return {k: v for k, v in out.items() if k not in self.settings.hidden_outputs}

    def _initial(self, s: State, rows: int) -> np.ndarray:
        return np.zeros(((rows,) if self.batched else ()) + s.dims, dtype=NUMPY_DTYPE[s.datatype])

    def _controls(self, p: SequenceParams, rows: int) -> dict[str, np.ndarray]:
        shape = (rows, 1) if self.batched else (1,)
        out = {}
        for c in self.settings.controls:
            if c.kind == "CORRID":
                value: Any = p.sequence_id
                if c.datatype != "BYTES":
                    try:
                        if isinstance(value, str) and not (value.isascii() and value.isdigit()):
                            raise ValueError
                        value = int(value)
                        np.array(value, dtype=NUMPY_DTYPE[c.datatype])  # in the type's range
                    except (ValueError, OverflowError):
                        raise SequenceError(f"sequence_id {p.sequence_id!r}: model '{self.name}' takes the "
                                            f"correlation ID as {c.datatype} (control input {c.name}): send an "
                                            "integer id in that type's range") from None
                arr = np.empty(shape, dtype=object) if c.datatype == "BYTES" else None
                if arr is not None:
                    arr.fill(str(value).encode())
                    out[c.name] = arr
                else:
                    out[c.name] = np.full(shape, value, dtype=NUMPY_DTYPE[c.datatype])
                continue
            flag = {"START": p.start, "END": p.end, "READY": True}[c.kind]
            out[c.name] = np.full(shape, c.false_true[int(flag)], dtype=NUMPY_DTYPE[c.datatype])
        return out


__all__ = ["Control", "DEFAULT_IDLE_US", "SequenceError", "SequenceParams", "SequenceScheduler", "SequenceSettings",
           "State", "sequence_params"]
