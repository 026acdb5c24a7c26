"""``ServedModel``: the one object the serving app talks to (load, infer, stats, close).

``ServedModel.load`` resolves the model as bench does (``zoo:NAME`` or a file;
a fixed batch of 1 goes through bench's make-batchable-and-verify path), starts
``instance_count`` instances (:mod:`inferperf.serve.instances`), warms them up
with the given shapes, and builds the KServe v2 metadata. ``infer`` queues one
request in the dynamic batcher (:mod:`inferperf.serve.batcher`) and returns
exactly its own rows. ``stats`` gives Triton's statistics-extension numbers.

Datatypes are KServe v2's (``FP32``, ``INT64``, ``BYTES`` ...); shapes hold -1
for free dims, the batch dim included as -1 when ``max_batch_size`` > 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..clock import SYSTEM_CLOCK, Clock, wall_s
from ..config import BenchConfig
from ..measure.batching import make_batchable, needs_batching
from ..measure.facts import torch_facts
from ..results.model import TensorInfo
from ..system import collect_system
from ..workload.signature import inspect_model
from ..zoo import resolve as zoo_resolve
from ..zoo import zoo_name
from .batcher import BatchPolicy, DynamicBatcher, NullObserver, Observer, Request
from .errors import InvalidInput, ModelExecutionError, NotReady
from .instances import InstancePool
from .options import AUTO_MAX_BATCH_SIZE, ServeOptions
from .tensor_types import NUMPY_DTYPE, TensorSpec
from .signature import given_shapes, meta_shape, served_max_batch_size
from .warmup import probed_outputs, warm_feeds

#: numpy dtype name (as backends report it) -> KServe v2 datatype (the protocol's table, inverted).
KSERVE_DATATYPE = {
    **{dt.name: k for k, dt in NUMPY_DTYPE.items() if k != "BYTES"}, "str": "BYTES", "object": "BYTES",
    "bfloat16": "BF16",
}

#: One input or output: ``name``, KServe ``datatype``, ``shape`` (-1 = free; batch dim included).
TensorMeta = TensorSpec


@dataclass(frozen=True)
class ModelMetadata:
    """What ``GET /v2/models/{name}`` reports: name, versions, platform, inputs and outputs."""

    name: str
    versions: tuple[str, ...]
    platform: str
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]


@dataclass
class _Counter:
    count: int = 0
    ns: int = 0

    def add(self, ns: int, n: int = 1) -> None:
        self.count += n
        self.ns += ns

    def doc(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass
class _Stats:
    """Triton's statistics extension, cumulative (counts per request, batch_stats per execution)."""

    success: _Counter = field(default_factory=_Counter)
    fail: _Counter = field(default_factory=_Counter)
    queue: _Counter = field(default_factory=_Counter)
    compute_input: _Counter = field(default_factory=_Counter)
    compute_infer: _Counter = field(default_factory=_Counter)
    compute_output: _Counter = field(default_factory=_Counter)
    batches: dict[int, list[_Counter]] = field(default_factory=dict)  # rows -> [input, infer, output]
    inference_count: int = 0
    execution_count: int = 0
    last_inference_ms: int = 0


class ServedModel:
    """A loaded, warmed-up model behind a dynamic batcher and ``instance_count`` instances.

    Build it with :meth:`load`. Attributes: ``name``, ``version``, ``metadata``
    (:class:`ModelMetadata`), ``max_batch_size`` (Triton's meaning; 0 = no batch dim), ``options``,
    ``ready`` (loaded and warmed up, not closing), ``notes`` (warnings for the banner/Result),
    ``effective`` (session settings as the runtime resolved them).
    The batcher starts on the first :meth:`infer`, in that event loop.
    """

    def __init__(self, name: str, version: str, metadata: ModelMetadata, max_batch_size: int, options: ServeOptions,
                 pool: InstancePool, observer: Observer | None, clock: Clock, notes: list[str]) -> None:
        self.name = name
        self.version = version
        self.metadata = metadata
        self.max_batch_size = max_batch_size
        self.options = options
        self.notes = notes
        self.effective = pool.effective
        self._pool = pool
        self._observer = observer or NullObserver()
        self._clock = clock
        self._stats = _Stats()
        policy = BatchPolicy(
            max_batch_size=max(1, max_batch_size),
            dynamic=options.dynamic_batching and max_batch_size > 0,
            max_queue_delay_ns=options.max_queue_delay_us * 1000,
            preferred_batch_sizes=tuple(options.preferred_batch_size),
        )
        self.batcher = DynamicBatcher(name, policy, self._execute, pool.count, options.max_queue_size, clock,
                                      self._observer, timeout_ms=options.request_timeout_ms)
        self._policy = policy
        #: one batcher per instance, each running its batches on that instance only (:meth:`pin_instances`)
        self.lanes: list[DynamicBatcher] | None = None
        self._input_names = [t.name for t in metadata.inputs]
        self._output_names = [t.name for t in metadata.outputs]
        self._text_inputs = [t.name for t in metadata.inputs if t.datatype == "BYTES"]
        self.ready = True
        #: input name -> inclusive (lo, hi) row ids of the Gather table it indexes (checked per request)
        self.index_ranges: dict[str, tuple[int, int]] = {}
        #: one feed per warm-up shape (empty: no warm-up); the app sends them through itself before ready
        self.warmup_feeds: list[dict[str, Any]] = []

    @classmethod
    def load(
        cls,
        model: str,
        config: BenchConfig,
        options: ServeOptions,
        name: str | None = None,
        observer: Observer | None = None,
        clock: Clock = SYSTEM_CLOCK,
        *,
        shared_session: bool = False,
        version: str = "1",
        versions: Sequence[str] | None = None,
        warmup: bool = True,
    ) -> ServedModel:
        """Resolve, batch if needed, create the instances and warm them up.

        Args:
            model: ONNX file path or ``zoo:NAME`` (a PyTorch ``.pt``/``module:function`` with ``backend=torch``).
            config: backend, session settings and workload (``shapes``/``dims`` fix dims and shape the
                warm-up, ``input_data`` gives its data (needed for string inputs); ``warmup.iterations`` calls
                per instance, alternating 1 and ``max_batch_size`` rows).
            options: serving settings.
            name: model name (default: the zoo name or the file stem).
            observer: metrics callbacks.
            clock: times queue and compute phases.
            shared_session: one session for every instance (see :mod:`inferperf.serve.instances`).
            version: this file's version (a model repository's version folder; default "1").
            versions: every version served under ``name``, for the metadata (default: ``version`` only).
            warmup: False = no warm-up (``serve --warmup 0``): ready at once, said in ``notes``.

        Raises:
            UsageError / ModelError / BackendUnavailable: bad model, flags or shapes (before any port is bound).
        """
        zname = zoo_name(str(model))
        path = Path(zoo_resolve(str(model)))
        is_onnx = path.suffix.lower() == ".onnx"
        facts = torch_facts(str(model)) if (config.backend == "torch" and not is_onnx) else inspect_model(path)
        notes: list[str] = []
        want = options.max_batch_size
        if want is None and options.dynamic_batching:
            want = AUTO_MAX_BATCH_SIZE
        if is_onnx and config.backend != "torch" and want and needs_batching(facts.path, want):
            batched, how = make_batchable(facts.path, facts.sha256, want, config.backend, config.session)
            notes.append(f"{facts.path.name} has a fixed batch of 1; serving a verified batchable copy ({how})")
            facts = inspect_model(batched)
        system = collect_system()
        pool = InstancePool(
            config.backend, config.session, facts.path, options.instance_count, shared=shared_session,
            cpus=options.cpus, effective_cpus=system.effective_cpus, clock=clock,
            backend_kwargs={"latencies_s": [x / 1e3 for x in config.null_latency_ms]} if config.backend == "null" else None,
        )
        try:
            inputs, outputs = pool.inputs(), pool.outputs()
            notes.extend(pool.notes)
            mbs = served_max_batch_size(inputs, options)
            shapes = given_shapes(inputs, config)
            dims = dict(config.workload.dims)

            def meta(infos: list[TensorInfo], given: dict[str, list[int]]) -> tuple[TensorMeta, ...]:
                return tuple(
                    TensorMeta(i.name, KSERVE_DATATYPE.get(i.dtype, i.dtype.upper()),
                               meta_shape(i, mbs > 0, given.get(i.name), dims))
                    for i in infos
                )

            in_meta = meta(inputs, shapes)
            partial = ModelMetadata("", (), "", in_meta, ())
            feeds: list[dict[str, Any]] = []
            if warmup or not outputs:
                feeds = warm_feeds(inputs, partial, mbs, config, facts.index_ranges, notes)
            if not outputs:
                outputs = probed_outputs(pool, feeds, mbs, notes)
                pool.output_names = [o.name for o in outputs]
            metadata = ModelMetadata(
                name=name or zname or Path(str(model)).stem, versions=tuple(versions or (version,)),
                platform=f"{pool.backend_name}_{'onnx' if is_onnx else 'model'}",
                inputs=in_meta, outputs=meta(outputs, {}),
            )
            if warmup and feeds:
                pool.warm_up(feeds, config.warmup.iterations)
            elif not warmup:
                notes.append("warm-up off (--warmup 0): ready at once; the first requests pay the first-call costs")
                feeds = []
        except BaseException:
            pool.close()
            raise
        served = cls(metadata.name, version, metadata, mbs, options, pool, observer, clock, notes)
        served.warmup_feeds = feeds
        names = {t.name for t in metadata.inputs}
        served.index_ranges = {n: r for n, r in facts.index_ranges.items() if n in names}
        return served

    def pin_instances(self) -> None:
        """Give each instance a batcher of its own (one batch in flight each, the model's batching rule), so a
        request can name the instance it runs on (``infer(instance=i)``: a direct sequence's slot)."""
        o = self.options
        self.lanes = [DynamicBatcher(self.name, self._policy, lambda b, i=i: self._execute(b, i), 1, o.max_queue_size,
                                     self._clock, self._observer, timeout_ms=o.request_timeout_ms)
                      for i in range(self._pool.count)]

    async def infer(
        self,
        inputs: dict[str, np.ndarray],
        rows: int,
        requested_outputs: list[str] | None = None,
        is_disconnected: Callable[[], Awaitable[bool]] | None = None,
        timing: dict[str, Any] | None = None,
        instance: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Run one request (already validated against ``metadata``) and return exactly its rows.

        Args:
            inputs: input name -> array (batch dim first when ``max_batch_size`` > 0).
            rows: the request's rows (1 when ``max_batch_size`` is 0).
            requested_outputs: output names to return, in order (None = all).
            is_disconnected: async callable, True once the client went away; asked before the batch runs.
            timing: when given, filled with ``queue_ms`` (arrival to dispatch) and ``compute_ms`` (its
                batch's model call) once the batch ran.
            instance: run on this instance (its lane: :meth:`pin_instances`); None: any free one.

        Returns:
            output name -> array with ``rows`` rows first (views into the batch's output).

        Raises:
            QueueFull: ``max_queue_size`` requests already wait (503 + Retry-After).
            NotReady: not loaded or shutting down (503 + Retry-After).
            Cancelled: the client went away before its batch ran.
            ModelExecutionError: the model failed on this request's batch (500).
        """
        if not self.ready:
            self._observer.rejected(self.name, "shutting_down" if self.batcher.closing else "not_ready")
            raise NotReady(self.name, "shutting_down" if self.batcher.closing else "not_ready")
        for name, (lo, hi) in self.index_ranges.items():  # ids past a Gather table: 400 now, not a failed batch
            arr = inputs.get(name)
            if arr is not None and arr.size and arr.dtype.kind in "iu":
                low, high = int(arr.min()), int(arr.max())
                if low < -(hi + 1) or high > hi:
                    bad = high if high > hi else low
                    raise InvalidInput(f"input '{name}': value {bad} is outside [{-(hi + 1)}, {hi}], the rows of the"
                                       f" table it indexes ({hi + 1} rows): send ids the model's vocabulary holds")
        for name in self._text_inputs:  # runtimes take BYTES as text: ORT would turn b"ab" into "b'ab'"
            arr = inputs.get(name)
            if arr is not None and arr.dtype == object:
                inputs[name] = _as_text(name, arr)
        if self.max_batch_size > 0:
            key: Any = tuple((n, inputs[n].dtype.str, inputs[n].shape[1:]) for n in self._input_names)
        else:
            key = None
        req = Request(inputs=inputs, rows=rows, key=key, arrival_ns=self._clock.now_ns(),
                      is_disconnected=is_disconnected)
        try:
            lane = self.lanes[instance] if instance is not None and self.lanes is not None else self.batcher
            outs = await lane.submit(req)
        finally:
            if timing is not None and req.dispatch_ns:
                timing["queue_ms"] = round((req.dispatch_ns - req.arrival_ns) / 1e6, 3)
                timing["compute_ms"] = round(req.compute_ns / 1e6, 3)
        names = requested_outputs if requested_outputs is not None else self._output_names
        return {n: outs[n] for n in names}

    async def _execute(self, batch: list[Request], instance: int | None = None) -> None:
        """Run ``batch`` on a free instance (or on ``instance``: a lane's); resolve each request's future; count
        stats; tell the observer."""
        st = self._stats
        queue_ns = [r.dispatch_ns - r.arrival_ns for r in batch]
        rows = [r.rows for r in batch]
        total = sum(max(1, r) for r in rows)
        try:
            feeds = [r.inputs for r in batch]
            out = await (self._pool.run(feeds, rows) if instance is None else self._pool.run_on(instance, feeds, rows))
        except Exception as e:  # the runtime (or the split) failed: every request of the batch gets a 500
            err = ModelExecutionError(self.name, f"{type(e).__name__}: {e}")
            end = self._clock.now_ns()
            for r in batch:
                st.fail.add(end - r.arrival_ns)
                if not r.future.done():
                    r.future.set_exception(err)
            self._observer.batch_executed(self.name, total, len(batch), queue_ns, 0, True)
            return
        end = self._clock.now_ns()
        compute_ns = out.input_ns + out.infer_ns + out.output_ns
        n = len(batch)
        for r, q, arrays in zip(batch, queue_ns, out.per_request, strict=True):
            r.compute_ns = compute_ns
            st.success.add(end - r.arrival_ns)
            st.queue.add(q)
            if not r.future.done():
                r.future.set_result(dict(zip(self._output_names, arrays, strict=True)))
        st.compute_input.add(out.input_ns * n, n)
        st.compute_infer.add(out.infer_ns * n, n)
        st.compute_output.add(out.output_ns * n, n)
        per_size = st.batches.setdefault(total, [_Counter(), _Counter(), _Counter()])
        for c, ns in zip(per_size, (out.input_ns, out.infer_ns, out.output_ns), strict=True):
            c.add(ns)
        st.inference_count += total
        st.execution_count += 1
        st.last_inference_ms = int(wall_s() * 1000)  # epoch ms, as Triton's statistics report it
        self._observer.batch_executed(self.name, total, n, queue_ns, compute_ns, False, out.instance)

    def reset_stats(self) -> None:
        """Zero the statistics-extension counters (after the warm-up requests, which are not counted)."""
        self._stats = _Stats()

    def stats(self) -> dict[str, Any]:
        """This model's entry of Triton's statistics extension (``model_stats[]`` item), cumulative.

        ``inference_stats`` counts requests (``ns``: summed durations; ``success`` from queueing to the
        answer, ``queue`` from queueing to dispatch, ``compute_*`` the batch phases each request was
        part of); ``batch_stats`` counts executions per batch size (rows). ``inference_count`` is rows
        run, ``execution_count`` model calls, ``last_inference`` ms since the epoch.
        """
        st = self._stats
        zero = {"count": 0, "ns": 0}
        return {
            "name": self.name,
            "version": self.version,
            "last_inference": st.last_inference_ms,
            "inference_count": st.inference_count,
            "execution_count": st.execution_count,
            "inference_stats": {
                "success": st.success.doc(), "fail": st.fail.doc(), "queue": st.queue.doc(),
                "compute_input": st.compute_input.doc(), "compute_infer": st.compute_infer.doc(),
                "compute_output": st.compute_output.doc(), "cache_hit": dict(zero), "cache_miss": dict(zero),
            },
            "batch_stats": [
                {"batch_size": size, "compute_input": c[0].doc(), "compute_infer": c[1].doc(),
                 "compute_output": c[2].doc()}
                for size, c in sorted(st.batches.items())
            ],
        }  # fmt: skip

    async def close(self, drain: bool = True) -> None:
        """Stop accepting (``ready`` turns False); with ``drain`` answer everything accepted, else fail
        what still waits with NotReady; then stop the instances."""
        self.ready = False
        await self.batcher.close(drain)
        for lane in self.lanes or ():
            await lane.close(drain)
        await asyncio.to_thread(self._pool.close)


def _as_text(name: str, arr: np.ndarray) -> np.ndarray:
    """A BYTES input (object array of ``bytes``) as an object array of ``str`` (UTF-8), the runtimes' strings.

    Raises:
        InvalidInput: an element that is not UTF-8 (400, naming the input and the element).
    """
    flat = arr.reshape(-1).tolist()
    out = np.empty(len(flat), dtype=object)
    for i, x in enumerate(flat):
        try:
            out[i] = x.decode() if isinstance(x, bytes) else x
        except UnicodeDecodeError:
            raise InvalidInput(f"input '{name}': BYTES element {i} is not UTF-8 text, which the runtime's string"
                               " tensors need: send UTF-8") from None
    return out.reshape(arr.shape)
