"""ONNX Runtime backend: session settings under ORT's own names, errors mapped to one line.

Importing this module changes no global ONNX Runtime state (the log level is set
per session). Effective settings: ORT does not report the thread count it picks for
``intra_op_num_threads=0``; in sequential mode the intra-op pool adds N-1
threads to the process (the caller is the Nth), so the effective count is
measured as the thread-count delta across session creation plus one.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnxruntime as ort
import psutil

from ..config import SessionOptions
from ..errors import ModelError, RuntimeFailure, UsageError
from ..results.model import TensorInfo
from ..system import default_intra_op_threads
from .base import RuntimeBackend
from .ort_config_keys import is_known_key
from .settings import entries_for

# ORT's log is silenced per session (SessionOptions.log_severity_level = 4): errors reach the user as one
# line (exceptions). The process-wide default logger is left as the importing program set it.

_GRAPH_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
_EXEC_MODES = {"sequential": ort.ExecutionMode.ORT_SEQUENTIAL, "parallel": ort.ExecutionMode.ORT_PARALLEL}

_ORT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(bfloat16)": "bfloat16",
    "tensor(int8)": "int8",
    "tensor(int16)": "int16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(uint8)": "uint8",
    "tensor(uint16)": "uint16",
    "tensor(uint32)": "uint32",
    "tensor(uint64)": "uint64",
    "tensor(bool)": "bool",
    "tensor(string)": "str",
}

_PROVIDER_EXTRAS = {
    "CUDAExecutionProvider": "pip install onnxruntime-gpu (instead of onnxruntime)",
    "TensorrtExecutionProvider": "pip install onnxruntime-gpu with TensorRT libraries",
    "OpenVINOExecutionProvider": "pip install onnxruntime-openvino",
    "DmlExecutionProvider": "pip install onnxruntime-directml",
}


def parse_providers(entries: list[str]) -> list[tuple[str, dict[str, str]]]:
    """Split ``--providers`` entries ``NAME[:key=value[:key=value...]]`` into (name, provider options).

    Example: ``CUDAExecutionProvider:device_id=0:cudnn_conv_algo_search=HEURISTIC``.

    Raises:
        UsageError: an option without ``=``.
    """
    out = []
    for entry in entries:
        name, *opts = entry.split(":")
        options: dict[str, str] = {}
        for opt in opts:
            key, sep, value = opt.partition("=")
            if not sep or not key:
                raise UsageError(f"malformed provider option {opt!r} in {entry!r}: use NAME:key=value[:key=value]")
            options[key.strip()] = value.strip()
        out.append((name.strip(), options))
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    return re.sub(r"/onnxruntime_src/\S+:\d+ (?:[^()]*\([^)]*\) )?", "", text)  # drop source path and C++ signature


def _tensor_info(arg: Any) -> TensorInfo:
    shape = arg.shape if isinstance(arg.shape, list) else []
    return TensorInfo(name=arg.name, dtype=_ORT_DTYPES.get(arg.type, arg.type), shape=list(shape))


def map_load_error(e: Exception, model_path: Path, providers: list[str]) -> Exception:
    """Turn an ONNX Runtime session-creation exception into a one-line inferperf error.

    Returns:
        ModelError for NOT_IMPLEMENTED (names the op, opset and node), INVALID_PROTOBUF,
        INVALID_GRAPH and other load failures.
    """
    msg = _first_line(e)
    kind = type(e).__name__
    m = re.search(r"Could not find an implementation for (\w+)\((\d+)\) node with name '([^']*)'", msg)
    if m:
        return ModelError(
            f"{model_path.name}: op {m.group(1)} (opset {m.group(2)}, node '{m.group(3)}') has no kernel in"
            f" {', '.join(providers)} for its input types: try another --providers, or convert the model"
            " (e.g. to float32)"
        )
    if kind == "InvalidProtobuf" or "Protobuf parsing failed" in msg:
        return ModelError(
            f"'{model_path}' is not a readable ONNX model (protobuf parsing failed): check it is a complete .onnx file"
        )
    if kind == "InvalidGraph":
        return ModelError(f"{model_path.name} is an invalid ONNX graph: {msg.split('failed:')[-1].strip()}")
    return ModelError(f"ONNX Runtime cannot load {model_path.name}: {msg}")


class OnnxRuntimeBackend(RuntimeBackend):
    """ONNX Runtime ``InferenceSession`` with settings under ORT's names.

    Args:
        session: settings (:class:`~inferperf.config.SessionOptions`). ``intra_op_num_threads=None``
            becomes inferperf's default, the effective CPUs, set explicitly.
        default_threads: overrides that default (the Concurrent scenario passes effective CPUs / streams).

    Raises:
        UsageError: a provider this onnxruntime build lacks (names the package that has it).
    """

    name = "onnxruntime"

    def __init__(self, session: SessionOptions, default_threads: int | None = None, **_: Any) -> None:
        super().__init__(session)
        self._default_threads = default_threads
        self._session: ort.InferenceSession | None = None
        self._model_path: Path | None = None
        self._providers = parse_providers(list(session.providers))
        available = ort.get_available_providers()
        missing = [p for p, _ in self._providers if p not in available]
        if missing:
            known = set(ort.get_all_providers())
            hints = "; ".join(
                _PROVIDER_EXTRAS.get(p, f"{p} needs another onnxruntime build") if p in known
                else f"{p} is not a provider name (known: {', '.join(sorted(known))})"
                for p in missing
            )
            raise UsageError(
                f"provider(s) {missing} not in this onnxruntime build (has {available}): {hints}"
            )

    def _session_options(self) -> ort.SessionOptions:
        o = self._opts
        so = ort.SessionOptions()
        so.log_severity_level = 4
        intra = o.intra_op_num_threads
        if intra is None:
            intra = self._default_threads or default_intra_op_threads()
        so.intra_op_num_threads = intra
        if o.inter_op_num_threads is not None:
            so.inter_op_num_threads = o.inter_op_num_threads
        so.execution_mode = _EXEC_MODES[o.execution_mode]
        so.graph_optimization_level = _GRAPH_LEVELS[o.graph_optimization_level]
        so.enable_mem_pattern = o.enable_mem_pattern
        so.enable_cpu_mem_arena = o.enable_cpu_mem_arena
        for key, value in entries_for("onnxruntime", o.session_config).items():
            if not is_known_key(key):
                self._notes.append(
                    f"session config key {key!r} is not one this onnxruntime {ort.__version__} defines:"
                    " ORT accepts it silently and it probably has no effect (check the spelling)"
                )
            try:
                so.add_session_config_entry(key, str(value))
            except Exception as e:  # ORT raises on keys over 128 chars or values over 1024
                raise UsageError(f"--session-config {key}={value} refused by ONNX Runtime: {_first_line(e)}") from e
        return so

    def requested_settings(self) -> dict[str, Any]:
        """Settings as asked for; ``intra_op_num_threads: null`` means inferperf's default (effective CPUs)."""
        return self._opts.model_dump(mode="json")

    def load(self, model_path: Path) -> None:
        """Create the ``InferenceSession``; raises ModelError with the reason and the fix."""
        so = self._session_options()
        proc = psutil.Process()
        before = proc.num_threads()
        try:
            # ORT's Python layer prints an "EP Error ... retrying" banner to stdout on some failures;
            # stdout belongs to inferperf (--json), so it is captured and the error reported as one line
            with contextlib.redirect_stdout(io.StringIO()):
                self._session = ort.InferenceSession(
                    str(model_path), so, providers=[p for p, _ in self._providers],
                    provider_options=[o for _, o in self._providers],
                )
            self._model_path = Path(model_path)
        except Exception as e:  # ORT raises its own pybind exception types
            kind, text = type(e).__name__, str(e)
            model_side = kind in ("InvalidProtobuf", "InvalidGraph", "NotImplemented") or "Load model" in text
            if self._opts.session_config and not model_side:
                entries = " ".join(f"{k}={v}" for k, v in self._opts.session_config.items())
                raise UsageError(
                    f"ONNX Runtime refused the session settings ({_first_line(e)}): check --session-config {entries}"
                ) from e
            raise map_load_error(e, Path(model_path), [p for p, _ in self._providers]) from e
        added = proc.num_threads() - before
        s_opts = self._session.get_session_options()
        intra = s_opts.intra_op_num_threads
        eff: dict[str, Any] = {
            "intra_op_num_threads": intra,
            "inter_op_num_threads": s_opts.inter_op_num_threads,
            "execution_mode": self._opts.execution_mode,
            "graph_optimization_level": self._opts.graph_optimization_level,
            "enable_mem_pattern": s_opts.enable_mem_pattern,
            "enable_cpu_mem_arena": s_opts.enable_cpu_mem_arena,
            "providers": self._session.get_providers(),
            "provider_options": dict(self._session.get_provider_options()),  # as ORT reports them (CPU: none)
            "session_config": entries_for("onnxruntime", self._opts.session_config),
            "onnxruntime_version": ort.__version__,
        }
        if intra == 0:
            if self._opts.execution_mode == "sequential" and added >= 0:
                eff["intra_op_num_threads"] = added + 1
                eff["intra_op_num_threads_source"] = "onnxruntime default, measured from threads created"
            else:
                eff["intra_op_num_threads"] = None
                eff["intra_op_num_threads_source"] = "onnxruntime default, not measurable in parallel mode"
        elif self._opts.intra_op_num_threads is None:
            eff["intra_op_num_threads_source"] = (
                "inferperf default: effective CPUs / concurrency"
                if self._default_threads
                else "inferperf default: effective CPUs"
            )
        self._effective = eff

    def _need(self) -> ort.InferenceSession:
        if self._session is None:
            raise RuntimeError("session not loaded: call load() first")
        return self._session

    def inputs(self) -> list[TensorInfo]:
        """Session inputs (excludes initializers that ``graph.input`` may list)."""
        return [_tensor_info(a) for a in self._need().get_inputs()]

    def outputs(self) -> list[TensorInfo]:
        """Session outputs."""
        return [_tensor_info(a) for a in self._need().get_outputs()]

    def runner(self) -> Callable[[dict[str, Any]], Any]:
        """The raw runtime call ``session.run(None, feed)`` with the bound method captured once.

        A closure, not ``functools.partial``: measured ~50 ns cheaper per call around
        ORT's ``run`` (benchmarks/overhead.py), which matters for microsecond models.
        """
        sess_run = self._need().run

        def run(feed: dict[str, Any], _run: Callable[..., Any] = sess_run) -> Any:
            return _run(None, feed)

        return run

    def fetch(self, feed: dict[str, Any]) -> list[Any]:
        """Run one feed outside any timed window; outputs as numpy arrays in :meth:`outputs` order."""
        import numpy as np

        return [np.asarray(x) for x in self._need().run(None, feed)]

    def node_placement(self, feed: dict[str, Any], force: bool = False) -> dict[str, int] | None:
        """Which execution provider ran how many nodes, from ORT's profile of one run of ``feed``.

        Runs a second, profiling session with the same settings (never the measured one), so it is
        only done when another provider than the CPU one was asked for, or when ``force`` is set.

        Returns:
            provider name -> number of nodes it ran; None when skipped.
        """
        names = [p for p, _ in self._providers]
        if not force and names == ["CPUExecutionProvider"]:
            return None
        import json
        import tempfile

        so = self._session_options()
        with tempfile.TemporaryDirectory(prefix="inferperf-ortprof-") as tmp:
            so.enable_profiling = True
            so.profile_file_prefix = str(Path(tmp) / "profile")
            with contextlib.redirect_stdout(io.StringIO()):
                sess = ort.InferenceSession(str(self._model_path), so, providers=names,
                                            provider_options=[o for _, o in self._providers])
            sess.run(None, feed)
            events = json.loads(Path(sess.end_profiling()).read_text())
        return nodes_by_provider(events)


    def profile_runs(self, feeds: list[dict[str, Any]], runs: int, warmup: int, prefix: Path) -> tuple[Path, int]:
        """Run ``warmup`` + ``runs`` calls in a second, profiling session (same settings; never the measured one).

        ORT records from session creation until ``end_profiling()``; warm-up is told apart later by the
        trace's ``model_run`` timestamps (analysis/profile/ops.py). ``prefix`` should be unique per process
        (ORT appends a timestamp); the path ORT returns is the trace's.

        Returns:
            (Chrome-trace JSON path, profiled wall time of the measured runs in ns).
        """
        import time

        names = [p for p, _ in self._providers]
        so = self._session_options()
        so.enable_profiling = True
        so.profile_file_prefix = str(prefix)
        with contextlib.redirect_stdout(io.StringIO()):
            sess = ort.InferenceSession(str(self._model_path), so, providers=names,
                                        provider_options=[o for _, o in self._providers])
        for i in range(warmup):
            sess.run(None, feeds[i % len(feeds)])
        t0 = time.perf_counter_ns()
        for i in range(runs):
            sess.run(None, feeds[i % len(feeds)])
        wall = time.perf_counter_ns() - t0
        return Path(sess.end_profiling()), wall


def nodes_by_provider(events: list[dict[str, Any]]) -> dict[str, int]:
    """Count distinct nodes per execution provider in an ORT profile (``cat: Node`` events' ``args.provider``)."""
    seen: dict[str, set[str]] = {}
    for ev in events:
        args = ev.get("args") or {}
        if ev.get("cat") == "Node" and "provider" in args:
            node = str(ev.get("name", "")).removesuffix("_kernel_time").removesuffix("_fence_before").removesuffix("_fence_after")
            seen.setdefault(args["provider"], set()).add(node)
    return {p: len(nodes) for p, nodes in sorted(seen.items())}


def map_run_error(e: Exception) -> Exception:
    """Map an exception from ``session.run`` to UsageError (bad input) or RuntimeFailure (the rest)."""
    msg = _first_line(e)
    if type(e).__name__ == "InvalidArgument":
        return UsageError(f"ONNX Runtime refused the input: {msg}: check --shape/--dim and --input-data dtypes")
    return RuntimeFailure(
        f"ONNX Runtime failed while running: {msg[:400]}: the input shape may not suit the model (check --shape)"
    )
