"""OpenVINO backend (extra ``inferperf[openvino]``): the same ONNX file, OpenVINO's own settings.

Settings keep OpenVINO's property names (``PERFORMANCE_HINT``, ``NUM_STREAMS``,
``INFERENCE_NUM_THREADS``, ``INFERENCE_PRECISION_HINT``, ``ENABLE_CPU_PINNING``
...) and come from ``--session-config`` (see :mod:`inferperf.backends.settings`);
``--intra-op-num-threads N`` maps to ``INFERENCE_NUM_THREADS`` (the total for the
compiled model). Defaults, set explicitly so the Result records them:
``INFERENCE_NUM_THREADS`` = the effective CPUs, ``PERFORMANCE_HINT`` = ``LATENCY``
for one stream and ``THROUGHPUT`` for a Concurrent run, ``INFERENCE_PRECISION_HINT``
= ``f32`` (the CPU plugin would otherwise run bf16 on CPUs that have it, which is
another precision than the fp32 the other runtimes run: ask for ``bf16`` explicitly).

Dynamic inputs are reshaped to the measured shapes before compiling (as
``benchmark_app -shape`` does: a static graph runs faster than a dynamic one;
``--session-config openvino.reshape=0`` keeps it dynamic).

Cold start is split into ``read_ms`` (``Core.read_model``: ONNX -> OpenVINO
graph, plus the reshape) and ``compile_ms`` (``Core.compile_model`` for the device). Effective
settings are read back from the compiled model (``CompiledModel.get_property``).
Concurrent runs use :class:`openvino.AsyncInferQueue` (one infer request per
stream) through :meth:`OpenVinoBackend.async_executor`, not Python threads
around a blocking call.

Sources: OpenVINO Python API (``openvino.Core``, ``CompiledModel``,
``AsyncInferQueue``), the CPU plugin's ``SUPPORTED_PROPERTIES``, and
``benchmark_app``'s flags (``-hint``, ``-nstreams``, ``-nthreads``, ``-infer_precision``, ``-pin``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov

from ..config import SessionOptions
from ..errors import ModelError, UsageError
from ..results.model import TensorInfo
from ..system import default_intra_op_threads
from .altstack import preserve_sigaltstack
from .base import RuntimeBackend
from .settings import entries_for

#: Properties read back after compilation (those the device supports are recorded).
READ_BACK = (
    "PERFORMANCE_HINT",
    "NUM_STREAMS",
    "INFERENCE_NUM_THREADS",
    "INFERENCE_PRECISION_HINT",
    "ENABLE_CPU_PINNING",
    "ENABLE_HYPER_THREADING",
    "SCHEDULING_CORE_TYPE",
    "EXECUTION_MODE_HINT",
    "PERFORMANCE_HINT_NUM_REQUESTS",
    "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
    "EXECUTION_DEVICES",
)


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    # OpenVINO prefixes messages with "Exception from src/...cpp:NN:" lines; keep the first meaningful one
    useful = [ln for ln in lines if not ln.startswith(("Exception from", "Check '")) and "src/" not in ln[:60]]
    text = (useful or lines or [type(e).__name__])[0]
    return text[:300]


def _plain(value: Any) -> Any:
    """A property value as JSON-able data (enums and OV objects become their string form)."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "get_type_name"):  # openvino.Type: "f32", "bf16"
        return str(value.get_type_name())
    name = getattr(value, "name", None)
    return str(name) if isinstance(name, str) else str(value)


class OpenVinoBackend(RuntimeBackend):
    """An OpenVINO ``CompiledModel`` with settings under OpenVINO's property names.

    Args:
        session: settings; ``intra_op_num_threads`` -> ``INFERENCE_NUM_THREADS`` (None: effective CPUs,
            0: OpenVINO's own default), OpenVINO entries of ``session_config`` -> compile properties,
            ``DEVICE`` -> the device (default ``CPU``).
        concurrency: streams this compiled model serves (picks the default ``PERFORMANCE_HINT``).
        static_shapes: input name -> the shape every query will have; dynamic inputs are reshaped to it
            before compiling (``Model.reshape``, as ``benchmark_app -shape`` does), unless
            ``openvino.reshape=0`` keeps the model dynamic.
        default_threads: the per-session share of the CPUs when each stream has its own compiled model.

    Raises:
        UsageError: the device is not available (lists those that are).
    """

    name = "openvino"
    _handle = "_compiled"  # what close() drops

    def __init__(self, session: SessionOptions, concurrency: int = 1, default_threads: int | None = None,
                 static_shapes: dict[str, list[int]] | None = None, **_: Any) -> None:
        super().__init__(session)
        entries = entries_for("openvino", session.session_config)
        self._device = entries.pop("DEVICE", "CPU")
        keep_dynamic = entries.pop("reshape", "1").lower() in ("0", "false", "no", "off")
        self._static_shapes = None if keep_dynamic else static_shapes
        self._props: dict[str, str] = {}
        if session.intra_op_num_threads is None and default_threads and concurrency <= 1:
            # one compiled model per stream (per-stream sessions): each gets its share of the CPUs
            self._props["INFERENCE_NUM_THREADS"] = str(default_threads)
            self._threads_source = "inferperf default: effective CPUs / concurrency"
        elif session.intra_op_num_threads is None:
            self._props["INFERENCE_NUM_THREADS"] = str(default_intra_op_threads())
            self._threads_source = "inferperf default: effective CPUs"
        elif session.intra_op_num_threads > 0:
            self._props["INFERENCE_NUM_THREADS"] = str(session.intra_op_num_threads)
            self._threads_source = "--intra-op-num-threads"
        else:
            self._threads_source = "openvino default"
        self._props["PERFORMANCE_HINT"] = "LATENCY" if concurrency <= 1 else "THROUGHPUT"
        # fp32 like the other runtimes unless asked: the CPU plugin otherwise runs bf16 where the CPU has it
        self._props["INFERENCE_PRECISION_HINT"] = "f32"
        self._props.update(entries)  # the user's names win
        with preserve_sigaltstack():  # the CPU plugin, built here, swaps this thread's signal stack
            self._core = ov.Core()
            devices = self._core.available_devices
        if self._device.split(".")[0].split(":")[0] not in {d.split(".")[0] for d in devices} | {"AUTO", "HETERO", "MULTI"}:
            raise UsageError(f"OpenVINO device {self._device!r} is not available (has {devices}): pass DEVICE=CPU")
        self._compiled: Any = None
        self._model_path: Path | None = None
        ignored = [k for k, v in session.model_dump().items()
                   if k in ("inter_op_num_threads", "execution_mode") and v not in (None, "sequential")]
        if ignored:
            self._notes.append(f"openvino ignores ONNX Runtime settings {ignored}: use OpenVINO properties"
                               " (--session-config NUM_STREAMS=2 ...)")

    def requested_settings(self) -> dict[str, Any]:
        """The device and the compile properties as passed to ``compile_model`` (OpenVINO's names)."""
        return {"device": self._device, **self._props,
                **({"static_shapes": self._static_shapes} if self._static_shapes else {})}

    def load(self, model_path: Path) -> None:
        """``read_model`` then ``compile_model``; each timed into :meth:`load_phases` (ms).

        Raises:
            ModelError: OpenVINO cannot read or convert the model.
            UsageError: a compile property OpenVINO refuses (names it).
        """
        now = time.perf_counter_ns
        t0 = now()
        try:
            model = self._core.read_model(str(model_path))
        except Exception as e:  # OpenVINO raises RuntimeError / its own OpConversionFailure
            raise ModelError(f"OpenVINO cannot read {Path(model_path).name}: {_first_line(e)}") from e
        reshaped = None
        if self._static_shapes:
            dynamic = {p.get_any_name(): p for p in model.inputs if p.get_partial_shape().is_dynamic}
            reshaped = {n: list(self._static_shapes[n]) for n in dynamic if n in self._static_shapes}
            if reshaped:
                try:
                    model.reshape({n: ov.PartialShape(v) for n, v in reshaped.items()})
                except Exception as e:
                    raise UsageError(f"OpenVINO cannot reshape {Path(model_path).name} to {reshaped}"
                                     f" ({_first_line(e)}): check --shape, or keep it dynamic with"
                                     " --session-config openvino.reshape=0") from e
        t1 = now()
        try:
            with preserve_sigaltstack():
                self._compiled = self._core.compile_model(model, self._device, dict(self._props))
        except Exception as e:
            msg = _first_line(e)
            bad = [k for k in self._props if k in str(e)]
            if bad or "property" in str(e).lower() or "config" in str(e).lower():
                names = " ".join(f"{k}={self._props[k]}" for k in (bad or self._props))
                raise UsageError(f"OpenVINO refused the settings ({msg}): check --session-config {names}") from e
            raise ModelError(f"OpenVINO cannot compile {Path(model_path).name} for {self._device}: {msg}") from e
        t2 = now()
        self._phases = {"read_ms": (t1 - t0) / 1e6, "compile_ms": (t2 - t1) / 1e6}
        self._model_path = Path(model_path)
        eff: dict[str, Any] = {"device": self._device}
        supported = set()
        try:
            supported = set(self._compiled.get_property("SUPPORTED_PROPERTIES"))
        except Exception:
            pass
        for key in dict.fromkeys([*READ_BACK, *self._props]):
            if supported and key not in supported:
                continue
            try:
                eff[key] = _plain(self._compiled.get_property(key))
            except Exception:
                continue
        eff["INFERENCE_NUM_THREADS_source"] = self._threads_source
        eff["static_shapes"] = reshaped or None  # dynamic inputs compiled for the measured shapes
        eff["openvino_version"] = ov.get_version()
        self._effective = eff

    def _need(self) -> Any:
        if self._compiled is None:
            raise RuntimeError("model not compiled: call load() first")
        return self._compiled

    def _onnx_dims(self) -> dict[str, list[int | str | None]]:
        """Symbolic dim names from the ONNX file (OpenVINO keeps the dynamism, not the names)."""
        if self._model_path is None or self._model_path.suffix != ".onnx":
            return {}
        try:
            import onnx

            m = onnx.load(str(self._model_path), load_external_data=False)
        except Exception:
            return {}
        out: dict[str, list[int | str | None]] = {}
        for v in list(m.graph.input) + list(m.graph.output):
            out[v.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                           for d in v.type.tensor_type.shape.dim]
        return out

    def _infos(self, ports: Any) -> list[TensorInfo]:
        named = self._onnx_dims()
        infos = []
        for p in ports:
            name = p.get_any_name()
            dims: list[int | str | None] = []
            for k, d in enumerate(p.get_partial_shape()):
                if d.is_static:
                    dims.append(d.get_length())
                else:
                    onnx_dims = named.get(name, [])
                    dims.append(onnx_dims[k] if k < len(onnx_dims) and isinstance(onnx_dims[k], str) else None)
            dtype = np.dtype(p.get_element_type().to_dtype()).name
            infos.append(TensorInfo(name=name, dtype=dtype, shape=dims))
        return infos

    def inputs(self) -> list[TensorInfo]:
        """Compiled-model inputs (numpy dtype names; dynamic dims by their ONNX names where known)."""
        return self._infos(self._need().inputs)

    def outputs(self) -> list[TensorInfo]:
        """Compiled-model outputs."""
        return self._infos(self._need().outputs)

    def runner(self) -> Callable[[dict[str, Any]], Any]:
        """One infer request's blocking ``infer``; inputs shared with the pool, outputs not copied.

        Not thread-safe: one runner per stream (the Concurrent scenario uses :meth:`async_executor`).
        """
        request = self._need().create_infer_request()
        infer = request.infer

        def run(feed: dict[str, Any], _infer: Callable[..., Any] = infer) -> Any:
            return _infer(feed, share_inputs=True, share_outputs=True)

        return run

    def fetch(self, feed: dict[str, Any]) -> list[np.ndarray]:
        """Run one feed outside any timed window; outputs as numpy arrays in :meth:`outputs` order."""
        res = self._need().create_infer_request().infer(feed)
        return [np.array(v, copy=True) for v in res.values()]

    def profile_runs(self, feeds: list[dict[str, Any]], runs: int, warmup: int, prefix: Path) -> tuple[Path, int]:
        """Per-layer performance counters (``PERF_COUNT``) of ``warmup`` + ``runs`` calls, written as a Chrome trace.

        Compiles a second model with ``PERF_COUNT=YES`` (never the measured one). Each run becomes a
        ``model_run`` event spanning its wall time, holding one ``<layer>_kernel_time`` event per EXECUTED layer
        (``real_time``; ``op_name`` = OpenVINO's layer type), laid back to back, so
        :func:`inferperf.analysis.profile.op_profile` reads it like ORT's trace.

        Returns:
            (trace JSON path ``<prefix>.json``, wall time of the measured runs in ns).
        """
        import json

        if self._model_path is None:
            raise RuntimeError("session not loaded: call load() first")
        model = self._core.read_model(str(self._model_path))
        if self._static_shapes:
            dyn = {p.get_any_name() for p in model.inputs if p.get_partial_shape().is_dynamic}
            shapes = {n: ov.PartialShape(list(v)) for n, v in self._static_shapes.items() if n in dyn}
            if shapes:
                model.reshape(shapes)
        with preserve_sigaltstack():
            compiled = self._core.compile_model(model, self._device, {**dict(self._props), "PERF_COUNT": True})
        request = compiled.create_infer_request()
        events: list[dict[str, Any]] = []
        t_us, wall = 0.0, 0
        for i in range(warmup + runs):
            t0 = time.perf_counter_ns()
            request.infer(feeds[i % len(feeds)])
            dt = time.perf_counter_ns() - t0
            if i >= warmup:
                wall += dt
            start, k_t = t_us, t_us
            for info in request.profiling_info:
                if str(info.status).endswith("EXECUTED") and not str(info.status).endswith("NOT_RUN"):
                    dur = info.real_time.total_seconds() * 1e6
                    events.append({"cat": "Node", "ph": "X", "name": f"{info.node_name}_kernel_time", "ts": k_t,
                                   "dur": dur, "args": {"op_name": info.node_type, "provider": info.exec_type}})
                    k_t += dur
            run_us = max(dt / 1e3, k_t - start)
            events.append({"cat": "Session", "ph": "X", "name": "model_run", "ts": start, "dur": run_us})
            t_us = start + run_us + 1.0
        path = Path(f"{prefix}.json")
        path.write_text(json.dumps(events))
        return path, wall

    def async_executor(self, jobs: int) -> OpenVinoAsyncExecutor:
        """An :class:`openvino.AsyncInferQueue` of ``jobs`` infer requests (the Concurrent executor)."""
        return OpenVinoAsyncExecutor(self._need(), jobs)


class OpenVinoAsyncExecutor:
    """A pool of ``jobs`` OpenVINO infer requests driven asynchronously (closed loop by the caller).

    The measure layer calls :meth:`set_callback` once, then repeatedly :meth:`idle_job` (blocks until a
    request is free) and :meth:`start`; the callback runs on OpenVINO's thread when a request completes,
    as ``callback(request, userdata)``. :meth:`wait_all` drains the pool and raises a request's error.
    """

    description = "openvino AsyncInferQueue"

    def __init__(self, compiled: Any, jobs: int) -> None:
        self._queue = ov.AsyncInferQueue(compiled, jobs)
        self.jobs = len(self._queue)

    def set_callback(self, fn: Callable[[Any, Any], None]) -> None:
        """Call ``fn(request, userdata)`` on completion of every started job."""
        self._queue.set_callback(fn)

    def idle_job(self) -> int:
        """The id of a free request, waiting for one if all are busy."""
        return self._queue.get_idle_request_id()

    def start(self, feed: dict[str, Any], userdata: Any) -> None:
        """Start ``feed`` on the next free request (the one :meth:`idle_job` returned); returns at once."""
        self._queue.start_async(feed, userdata, share_inputs=True)

    def wait_all(self) -> None:
        """Wait until every started request has completed."""
        self._queue.wait_all()
