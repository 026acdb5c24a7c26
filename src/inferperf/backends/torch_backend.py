"""PyTorch backend (extra ``inferperf[torch]``, pinned to the CPU wheel ``torch==2.13.0``).

Models (see :mod:`inferperf.backends.torch_spec`): a ``torch.export`` program
(``.pt2``), a TorchScript file saved with :func:`save_torchscript` (it stores the
input signature beside the code), or ``package.module:function`` returning
``(module, example_inputs)``.

Settings: ``intra_op_num_threads`` -> ``torch.set_num_threads`` (None: the
effective CPUs, 0: torch's default), ``inter_op_num_threads`` ->
``torch.set_num_interop_threads`` (only before torch's first parallel work);
``--session-config torch.device=cuda[:N]`` and ``torch.compile=MODE``
(``default``, ``reduce-overhead``, ``max-autotune``; compilation then happens in
the first inference). Every call runs under ``torch.inference_mode()``; on CUDA
the timed call ends with ``torch.cuda.synchronize()`` so the latency covers the
work, not its launch, and includes the host-to-device copy of the inputs.

Cold start phases: ``read_ms`` (load or build the module) and ``to_device_ms``.
Signature: input names from the example inputs (or ``forward``'s parameters);
for ``module:function`` the leading dim is reported as the symbolic ``batch``,
as :func:`export_onnx` declares it, so the same flags resolve the same shapes on
every runtime.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import SessionOptions
from ..errors import ModelError, UsageError
from ..results.model import TensorInfo
from ..system import default_intra_op_threads
from .base import RuntimeBackend
from .settings import entries_for
from .torch_spec import EXPORT_SUFFIXES, TORCHSCRIPT_SUFFIXES, ensure_cwd_importable, is_callable_spec

SIGNATURE_FILE = "inferperf_inputs.json"
_COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _dtype_name(t: Any) -> str:
    return str(t).removeprefix("torch.").replace("float", "float").replace("bool", "bool")


def load_callable(spec: str) -> tuple[Any, dict[str, Any]]:
    """Import ``module:function``, call it, and return ``(module, {input name: example tensor})``.

    Raises:
        ModelError: import failure, not callable, or a return value that is not ``(module, inputs)``.
    """
    ensure_cwd_importable()
    mod_name, fn_name = spec.split(":", 1)
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as e:
        raise ModelError(f"cannot import {spec!r} ({type(e).__name__}: {e}): check the module path and name") from e
    try:
        got = fn()
        module, examples = got
    except (TypeError, ValueError) as e:
        raise ModelError(f"{spec}() must return (module, example_inputs): {e}") from e
    if not callable(module):
        raise ModelError(f"{spec}() returned {type(module).__name__} as the module: return a torch.nn.Module")
    if isinstance(examples, torch.Tensor):
        examples = (examples,)
    if isinstance(examples, dict):
        named = dict(examples)
    else:
        target = module.forward if hasattr(module, "forward") else module
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params][: len(examples)]
        names += [f"input_{k}" for k in range(len(names), len(examples))]
        named = dict(zip(names, examples, strict=True))
    return module, named


def export_onnx(spec: str, path: Path, opset: int = 17) -> Path:
    """Export ``module:function`` to ONNX with ``torch.onnx.export(dynamo=False)``; dim 0 is ``batch``.

    Input names are the example inputs' names, outputs ``output_0``... The same
    seeded module then runs in PyTorch, and the file in ONNX Runtime and OpenVINO.

    Raises:
        ModelError: the exporter fails (its first line).
    """
    module, named = load_callable(spec)
    if hasattr(module, "eval"):
        module.eval()
    with torch.inference_mode():
        out = module(*named.values())
    n_out = len(out) if isinstance(out, list | tuple) else 1
    outs = [f"output_{k}" for k in range(n_out)]
    axes = {n: {0: "batch"} for n in [*named, *outs]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            torch.onnx.export(module, tuple(named.values()), str(tmp), dynamo=False, input_names=list(named),
                              output_names=outs, dynamic_axes=axes, opset_version=opset)
    except Exception as e:
        tmp.unlink(missing_ok=True)
        raise ModelError(f"torch.onnx.export of {spec} failed: {str(e).strip().splitlines()[0][:300]}") from e
    tmp.replace(path)
    return path


def save_torchscript(module: Any, examples: dict[str, Any], path: Path) -> Path:
    """Trace ``module`` on ``examples`` and save it with its input signature (read back by the backend)."""
    sig = [{"name": n, "dtype": _dtype_name(t.dtype), "shape": list(t.shape)} for n, t in examples.items()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(module.eval(), tuple(examples.values()))
        torch.jit.save(traced, str(path), _extra_files={SIGNATURE_FILE: json.dumps(sig)})
    return path


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flatten(v)]
    if isinstance(out, list | tuple):
        return [t for v in out for t in _flatten(v)]
    return []


class TorchBackend(RuntimeBackend):
    """A PyTorch module run under ``torch.inference_mode`` with torch's thread settings.

    Args:
        session: ``intra_op_num_threads`` / ``inter_op_num_threads``; ``torch.*`` entries of ``session_config``.
        default_threads: overrides the default thread count (Concurrent: effective CPUs / streams).

    Raises:
        UsageError: an unknown ``torch.*`` setting, a bad compile mode, or CUDA asked for where there is none.
    """

    name = "torch"
    _handle = "_module"  # what close() drops

    def __init__(self, session: SessionOptions, default_threads: int | None = None, **_: Any) -> None:
        super().__init__(session)
        entries = entries_for("torch", session.session_config)
        unknown = [k for k in entries if k not in ("device", "compile")]
        if unknown:
            raise UsageError(f"unknown torch setting(s) {unknown}: use torch.device=cpu|cuda[:N], torch.compile=MODE")
        self._device = entries.get("device", "cpu")
        self._compile = entries.get("compile")
        if self._compile in ("0", "false", "off"):
            self._compile = None
        elif self._compile in ("1", "true", "on"):
            self._compile = "default"
        if self._compile is not None and self._compile not in _COMPILE_MODES:
            raise UsageError(f"torch.compile={self._compile}: choose one of {', '.join(_COMPILE_MODES)}")
        if self._device.startswith("cuda") and not torch.cuda.is_available():
            raise UsageError(f"torch.device={self._device} but this torch ({torch.__version__}) sees no CUDA device:"
                             " use torch.device=cpu, or install a CUDA build of torch on a GPU machine")
        intra = session.intra_op_num_threads
        if intra is None:
            intra = default_threads or default_intra_op_threads()
            self._threads_source = ("inferperf default: effective CPUs / concurrency" if default_threads
                                    else "inferperf default: effective CPUs")
        else:
            self._threads_source = "torch default" if intra == 0 else "--intra-op-num-threads"
        self._intra = intra
        self._module: Any = None
        self._names: list[str] = []
        self._inputs: list[TensorInfo] = []
        self._outputs: list[TensorInfo] = []

    def requested_settings(self) -> dict[str, Any]:
        """Threads, device and compile mode as asked for (``intra_op_num_threads: null`` = effective CPUs)."""
        return {
            "intra_op_num_threads": self._opts.intra_op_num_threads,
            "inter_op_num_threads": self._opts.inter_op_num_threads,
            "device": self._device,
            "compile": self._compile,
        }

    def _read(self, model: str) -> None:
        if is_callable_spec(model):
            module, named = load_callable(model)
            self._inputs = [TensorInfo(name=n, dtype=_dtype_name(t.dtype), shape=["batch", *list(t.shape)[1:]])
                            for n, t in named.items()]
            self._names = list(named)
            self._module = module.eval() if hasattr(module, "eval") else module
            return
        path = Path(model)
        if not path.is_file():
            raise ModelError(f"model file '{model}' not found: pass a .pt2 (torch.export), a TorchScript file,"
                             " or package.module:function")
        suffix = path.suffix.lower()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                if suffix in EXPORT_SUFFIXES:
                    ep = torch.export.load(str(path))
                    args = (ep.example_inputs or ((), {}))[0]
                    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
                    self._inputs = [TensorInfo(name=n, dtype=_dtype_name(t.dtype), shape=list(t.shape))
                                    for n, t in zip(names, args, strict=False)]
                    out_node = next(n for n in ep.graph.nodes if n.op == "output")
                    vals = [a.meta.get("val") for a in out_node.args[0] if hasattr(a, "meta")]
                    self._outputs = [TensorInfo(name=str(n), dtype=_dtype_name(v.dtype), shape=list(v.shape))
                                     for n, v in zip(ep.graph_signature.user_outputs, vals, strict=False)
                                     if v is not None]
                    self._module = ep.module()
                elif suffix in TORCHSCRIPT_SUFFIXES:
                    extra = {SIGNATURE_FILE: ""}
                    self._module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
                    if not extra[SIGNATURE_FILE]:
                        raise ModelError(
                            f"TorchScript file {path.name} carries no input signature: save it with"
                            " inferperf.backends.torch_backend.save_torchscript, or export a .pt2 (torch.export.save)"
                        )
                    self._inputs = [TensorInfo(**d) for d in json.loads(extra[SIGNATURE_FILE])]
                    self._module.eval()
                elif suffix == ".onnx":
                    raise ModelError(
                        f"the torch backend does not run ONNX ({path.name}): pass a .pt2 or TorchScript file, or"
                        " package.module:function (compare runtimes with --backend onnxruntime,torch=MODEL.pt2)"
                    )
                else:
                    raise ModelError(f"{path.name}: unknown PyTorch model type {suffix!r}: use .pt2 (torch.export),"
                                     " .pt (TorchScript) or package.module:function")
        except ModelError:
            raise
        except Exception as e:  # torch raises RuntimeError / pickle errors for unreadable files
            raise ModelError(f"PyTorch cannot load {path.name}: {str(e).strip().splitlines()[0][:300]}") from e
        self._names = [i.name for i in self._inputs]

    def load(self, model_path: Path | str) -> None:
        """Set threads, load the module, move it to the device, wrap it in ``torch.compile`` if asked.

        Raises:
            ModelError: the model cannot be loaded (the reason and the fix).
        """
        if self._intra > 0:
            torch.set_num_threads(self._intra)
        if self._opts.inter_op_num_threads:
            try:
                torch.set_num_interop_threads(self._opts.inter_op_num_threads)
            except RuntimeError:
                self._notes.append("torch.set_num_interop_threads refused: torch had already started parallel work")
        now = time.perf_counter_ns
        t0 = now()
        self._read(str(model_path))
        t1 = now()
        if self._device != "cpu":
            self._module = self._module.to(self._device)
        t2 = now()
        if self._compile:
            self._module = torch.compile(self._module, mode=self._compile)
        self._phases = {"read_ms": (t1 - t0) / 1e6, "to_device_ms": (t2 - t1) / 1e6}
        self._effective = {
            "intra_op_num_threads": torch.get_num_threads(),
            "intra_op_num_threads_source": self._threads_source,
            "inter_op_num_threads": torch.get_num_interop_threads(),
            "device": self._device,
            "compile": self._compile,
            "inference_mode": True,
            "torch_version": torch.__version__,
        }
        if self._device.startswith("cuda"):
            self._effective["cuda_device_name"] = torch.cuda.get_device_name(torch.device(self._device))

    def inputs(self) -> list[TensorInfo]:
        """The input signature (from the example inputs)."""
        return list(self._inputs)

    def outputs(self) -> list[TensorInfo]:
        """Outputs where known without running (a ``.pt2`` program records them); else empty."""
        return list(self._outputs)

    def runner(self) -> Callable[[dict[str, Any]], Any]:
        """Call the module on the feed's arrays (``torch.from_numpy``: no copy on CPU) under inference mode.

        A read-only array (a served request's tensor is a view of its body) is copied first: torch cannot make
        a read-only tensor, and a module writing its input in place would write into the caller's bytes."""
        if self._module is None:
            raise RuntimeError("model not loaded: call load() first")
        module, names, im = self._module, list(self._names), torch.inference_mode

        def from_numpy(a: np.ndarray) -> Any:
            return torch.from_numpy(a if a.flags.writeable else a.copy())
        if self._device == "cpu":

            def run(feed: dict[str, Any]) -> Any:
                with im():
                    return module(*[from_numpy(feed[n]) for n in names])

            return run
        dev, sync = torch.device(self._device), torch.cuda.synchronize

        def run_device(feed: dict[str, Any]) -> Any:
            with im():
                out = module(*[from_numpy(feed[n]).to(dev) for n in names])
            sync(dev)
            return out

        return run_device

    def profile_runs(self, feeds: list[dict[str, Any]], runs: int, warmup: int, prefix: Path) -> tuple[Path, int]:
        """``torch.profiler`` over ``warmup`` + ``runs`` calls, each inside ``record_function("model_run")``.

        The top-level ops under each run become ``<op>#<i>_kernel_time`` events (``op_name`` = the aten op,
        input shapes recorded) in the ORT-like trace form :func:`inferperf.analysis.profile.op_profile` reads;
        torch's own Chrome trace is written beside it (``<prefix>.torch.json``) for Perfetto.

        Returns:
            (trace JSON path ``<prefix>.json``, wall time of the measured runs in ns).
        """
        import json
        import time

        from torch.profiler import ProfilerActivity, profile, record_function

        run = self.runner()
        wall = 0
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for i in range(warmup + runs):
                t0 = time.perf_counter_ns()
                with record_function("model_run"):
                    run(feeds[i % len(feeds)])
                if i >= warmup:
                    wall += time.perf_counter_ns() - t0
        prof.export_chrome_trace(f"{prefix}.torch.json")
        events: list[dict[str, Any]] = []
        for ev in prof.events():
            if ev.name != "model_run":
                continue
            start = float(ev.time_range.start)
            events.append({"cat": "Session", "ph": "X", "name": "model_run", "ts": start,
                           "dur": float(ev.time_range.end) - start})
            for k, child in enumerate(ev.cpu_children):
                shapes = [{"float": list(s)} for s in (child.input_shapes or []) if s]
                events.append({"cat": "Node", "ph": "X", "name": f"{child.name}#{k}_kernel_time",
                               "ts": float(child.time_range.start),
                               "dur": float(child.time_range.end) - float(child.time_range.start),
                               "args": {"op_name": child.name, "provider": "torch-cpu", "input_type_shape": shapes}})
        path = Path(f"{prefix}.json")
        path.write_text(json.dumps(events))
        return path, wall

    def fetch(self, feed: dict[str, Any]) -> list[np.ndarray]:
        """Run one feed outside any timed window; outputs (flattened) as float/int numpy arrays on the host."""
        out = self.runner()(feed)
        return [t.detach().to("cpu").numpy().copy() for t in _flatten(out)]

