"""Build variant files: fp16, int8-dynamic, int8-static (QDQ), and ORT's offline graph optimizations.

Every builder writes to ``NAME.partial.onnx`` first, then checks the file
(``onnx.checker`` and an ONNX Runtime session), and only then renames it to
``NAME.onnx``: a failed variant leaves no file that looks like a success.
Failures raise :class:`ConversionFailed` with one line naming the step and,
where the runtime says, the node.

Sources:
    * fp16: ``onnxconverter_common.float16.convert_float_to_float16`` (``keep_io_types``,
      ``op_block_list``, ``node_block_list``).
    * int8: ``onnxruntime.quantization`` (``quant_pre_process``, ``quantize_dynamic``,
      ``quantize_static`` with QDQ format and a ``CalibrationDataReader``).
    * CPU recommendation (ONNX Runtime docs, "Quantize ONNX models", section "When to use
      reduce-range and per-channel quantization"): reduce-range (7-bit weights) is meant for U8S8
      on AVX2/AVX512 machines *without* VNNI, to avoid saturation in the 16-bit intermediate sums
      (``vpmaddubsw``); it is not needed with VNNI. S8S8 QDQ is ORT's default otherwise.
    * Offline graph optimization: ``SessionOptions.optimized_model_filepath`` with
      ``graph_optimization_level`` basic / extended / all (``all`` adds layout transforms specific
      to the CPU that saved it).
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InferperfError, UsageError
from .spec import FP16_DEFAULT_KEEP, QuantOptions

_VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm")


class ConversionFailed(InferperfError):
    """A variant could not be built, checked or loaded (exit 1; the other variants go on)."""


@dataclass
class Built:
    """A built variant.

    Attributes:
        name: the variant (``fp16``, ``int8-static``, ...).
        path: the checked file (None when the build failed).
        error: the one-line reason it failed, or None.
        settings: what was applied (converter options, quantization settings).
        notes: warnings and recommendations applied.
        build_s: wall seconds the build and checks took.
    """

    name: str
    path: Path | None
    error: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    build_s: float = 0.0


def has_vnni(isa_flags: Sequence[str]) -> bool:
    """True when the CPU has int8 dot-product instructions (x86 VNNI/AMX-INT8, ARM dot product/i8mm)."""
    return any(f in isa_flags for f in _VNNI_FLAGS)


def recommended_quant(opts: QuantOptions, isa_flags: Sequence[str], static: bool) -> tuple[dict[str, Any], list[str]]:
    """Resolve the unset int8 settings (``None``) to ONNX Runtime's recommendation for this CPU.

    Without VNNI on x86: activations uint8, weights int8 (U8S8) and ``reduce_range`` on, as ORT's
    docs recommend to avoid saturation. With VNNI (or on ARM): S8S8 for QDQ (ORT's default),
    ``reduce_range`` off. ``per_channel`` defaults off (ORT's default). Explicit settings are kept;
    one note says what was applied and why.

    Returns:
        (settings with ``per_channel``, ``reduce_range``, ``activation_type``, ``weight_type``,
        ``calibration_method``, ``vnni``), notes.
    """
    vnni = has_vnni(isa_flags)
    x86 = any(f.startswith(("avx", "sse")) for f in isa_flags)
    no_vnni_x86 = x86 and not vnni
    applied = []
    s: dict[str, Any] = {"vnni": vnni, "calibration_method": opts.calibration_method}
    s["per_channel"] = bool(opts.per_channel)
    if opts.reduce_range is None:
        s["reduce_range"] = no_vnni_x86
        if no_vnni_x86:
            applied.append("reduce_range=True")
    else:
        s["reduce_range"] = opts.reduce_range
    if opts.activation_type is None:
        s["activation_type"] = "uint8" if (no_vnni_x86 or not static) else "int8"
        if no_vnni_x86 and static:
            applied.append("activation_type=uint8")
    else:
        s["activation_type"] = opts.activation_type
    s["weight_type"] = opts.weight_type or "int8"
    notes = []
    if no_vnni_x86:
        how = f"applied {', '.join(applied)}" if applied else "your explicit settings kept"
        notes.append(
            "this CPU has no VNNI (no avx512_vnni/avx_vnni): ONNX Runtime recommends U8S8 with reduce_range"
            f" (7-bit weights) to avoid int16 saturation, and int8 kernels gain less here; {how}"
        )
    if not static and s["activation_type"] != "uint8":
        s["activation_type"] = "uint8"  # DynamicQuantizeLinear always produces uint8 activations
    return s, notes


def _first_line(e: BaseException) -> str:
    from ..backends.ort import _first_line as ort_first_line

    return ort_first_line(e)[:300]


def check_and_load(path: Path, run_checker: bool = True) -> None:
    """``onnx.checker`` (by path, so large models work) and an ONNX Runtime CPU session.

    Raises:
        ConversionFailed: the checker or the runtime refuses the file (the message names the node
            when the runtime does).
    """
    import onnx
    import onnxruntime as ort

    if run_checker:
        try:
            onnx.checker.check_model(str(path))
        except Exception as e:  # onnx raises ValidationError and others
            raise ConversionFailed(f"onnx.checker refuses it: {_first_line(e)}") from e
    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as e:
        from ..backends.ort import map_load_error

        raise ConversionFailed(f"does not load: {map_load_error(e, path, ['CPUExecutionProvider'])}") from e


def _finish(partial: Path, final: Path, run_checker: bool = True) -> Path:
    try:
        check_and_load(partial, run_checker)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, final)
    return final


def convert_fp16(src: Path, dst: Path, keep_fp32: Sequence[str] = ()) -> tuple[Path, dict[str, Any]]:
    """fp16 variant with fp32 inputs/outputs (``keep_io_types``) and a block list kept in fp32.

    Args:
        keep_fp32: op types to add to :data:`FP16_DEFAULT_KEEP` (and the converter's own list);
            the single entry ``none`` converts naively (no block list at all).

    Raises:
        ConversionFailed: the converter, the checker or the runtime fails.
    """
    import onnx
    from onnxconverter_common import float16

    naive = [k.lower() for k in keep_fp32] == ["none"]
    block = [] if naive else sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(FP16_DEFAULT_KEEP) | set(keep_fp32))
    model = onnx.load(str(src))
    present = sorted({n.op_type for n in model.graph.node} & set(block))
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = float16.convert_float_to_float16(model, keep_io_types=True, op_block_list=block)
    except Exception as e:
        raise ConversionFailed(f"fp16 converter failed: {type(e).__name__}: {_first_line(e)}") from e
    partial = dst.with_suffix(".partial.onnx")
    onnx.save(out, str(partial))
    settings = {"converter": "onnxconverter_common.float16", "keep_io_types": True,
                "op_block_list": "none (naive)" if naive else block, "kept_fp32_in_model": present}
    return _finish(partial, dst), settings


def normalize_source(src: Path, dst: Path) -> tuple[Path, list[str]]:
    """Bring a legacy graph into the form the converters expect, without changing what it computes.

    IR < 4 models list every initializer as a graph input (the onnx package's light
    models do); converters then treat weights as inputs, and quantized copies fail
    onnx.checker. Unnamed nodes make the fp16 converter reuse cast names. The copy
    drops initializers from the inputs, raises the IR version to 4 and names unnamed
    nodes ``OpType_index``. Returns ``src`` itself (and no note) when nothing needs it.
    """
    import onnx

    model = onnx.load(str(src))
    init = {t.name for t in model.graph.initializer}
    as_inputs = [i for i in model.graph.input if i.name in init]
    unnamed = [n for n in model.graph.node if not n.name]
    if model.ir_version >= 4 and not as_inputs and not unnamed:
        return src, []
    notes = []
    if model.ir_version < 4 or as_inputs:
        keep = [i for i in model.graph.input if i.name not in init]
        del model.graph.input[:]
        model.graph.input.extend(keep)
        notes.append(f"IR {model.ir_version} model: {len(as_inputs)} initializers removed from the graph inputs and"
                     " IR raised to 4 before conversion (same computation)")
        model.ir_version = max(model.ir_version, 4)
    if unnamed:
        for i, n in enumerate(model.graph.node):
            if not n.name:
                n.name = f"{n.op_type}_{i}"
        notes.append(f"{len(unnamed)} unnamed nodes named OpType_index before conversion")
    onnx.save(model, str(dst))
    return dst, notes


@contextlib.contextmanager
def _in_temp_cwd():
    """Run ORT's quantization tools in a scratch folder: they drop temporary files in the working folder."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="inferperf-quant-") as tmp:
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                yield
        finally:
            os.chdir(cwd)


def preprocess(src: Path, dst: Path) -> tuple[Path, list[str]]:
    """ORT's quantization pre-processing: symbolic shape inference (``auto_merge`` for dynamic dims),
    ORT's basic graph optimization (folds Constant nodes into initializers, BatchNorm into Conv),
    ONNX shape inference. Falls back to ONNX shape inference only when symbolic inference fails,
    with a note. Node names of the model are kept where no fusion removed the node.

    Raises:
        ConversionFailed: both attempts fail.
    """
    from onnxruntime.quantization.shape_inference import quant_pre_process

    src, dst = Path(src).resolve(), Path(dst).resolve()
    notes: list[str] = []
    try:
        with _in_temp_cwd():
            quant_pre_process(str(src), str(dst), auto_merge=True)
    except Exception as e:
        notes.append(f"symbolic shape inference failed ({_first_line(e)[:80]}); pre-processed with ONNX shape"
                     " inference only")
        try:
            with _in_temp_cwd():
                quant_pre_process(str(src), str(dst), skip_symbolic_shape=True)
        except Exception as e2:
            raise ConversionFailed(f"quantization pre-processing failed: {_first_line(e2)}") from e2
    return dst, notes


def _op_types(path: Path, exclude_op_types: Sequence[str], exclude_nodes: Sequence[str]) -> list[str] | None:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    names = {n.name for n in model.graph.node}
    missing = [n for n in exclude_nodes if n not in names]
    if missing:
        sample = ", ".join(sorted(n for n in names if n)[:8])
        raise UsageError(f"--exclude-nodes {missing} not in the model (node names include: {sample} ...)")
    if not exclude_op_types:
        return None
    return sorted({n.op_type for n in model.graph.node} - set(exclude_op_types))


def _qtype(name: str) -> Any:
    from onnxruntime.quantization import QuantType

    return QuantType.QUInt8 if name == "uint8" else QuantType.QInt8


def quantize_int8_dynamic(pre: Path, dst: Path, s: dict[str, Any], opts: QuantOptions) -> Path:
    """Dynamic int8 (weights quantized offline, activations at run time).

    Raises:
        ConversionFailed: the quantizer, the checker or the runtime fails.
        UsageError: an ``--exclude-nodes`` name the model lacks.
    """
    from onnxruntime.quantization import quantize_dynamic

    ops = _op_types(pre, opts.exclude_op_types, opts.exclude_nodes)
    pre, dst = Path(pre).resolve(), Path(dst).resolve()
    partial = dst.with_suffix(".partial.onnx")
    try:
        with _in_temp_cwd():
            quantize_dynamic(str(pre), str(partial), op_types_to_quantize=ops, per_channel=s["per_channel"],
                             reduce_range=s["reduce_range"], weight_type=_qtype(s["weight_type"]),
                             nodes_to_exclude=list(opts.exclude_nodes) or None)
    except Exception as e:
        partial.unlink(missing_ok=True)
        raise ConversionFailed(f"quantize_dynamic failed: {type(e).__name__}: {_first_line(e)}") from e
    return _finish(partial, dst)


def quantize_int8_static(
    pre: Path, dst: Path, s: dict[str, Any], opts: QuantOptions, calibration: Sequence[dict[str, np.ndarray]],
    extra_exclude: Sequence[str] = (),
) -> Path:
    """Static int8 in QDQ format, calibrated on ``calibration`` feeds with ``s['calibration_method']``.

    Raises:
        ConversionFailed: the calibration, the quantizer, the checker or the runtime fails.
        UsageError: an ``--exclude-nodes`` name the model lacks.
    """
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, quantize_static

    class _Reader(CalibrationDataReader):
        def __init__(self, feeds: Sequence[dict[str, np.ndarray]]) -> None:
            self._it = iter(list(feeds))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    method = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
              "percentile": CalibrationMethod.Percentile}[s["calibration_method"]]
    excluded = list(dict.fromkeys([*opts.exclude_nodes, *extra_exclude]))
    ops = _op_types(pre, opts.exclude_op_types, excluded)
    pre, dst = Path(pre).resolve(), Path(dst).resolve()
    partial = dst.with_suffix(".partial.onnx")
    try:
        with _in_temp_cwd():  # the calibrator writes augmented_model.onnx into the working folder
            quantize_static(
                str(pre), str(partial), _Reader(calibration), quant_format=QuantFormat.QDQ,
                op_types_to_quantize=ops, per_channel=s["per_channel"], reduce_range=s["reduce_range"],
                activation_type=_qtype(s["activation_type"]), weight_type=_qtype(s["weight_type"]),
                nodes_to_exclude=excluded or None, calibrate_method=method,
            )
    except Exception as e:
        partial.unlink(missing_ok=True)
        raise ConversionFailed(f"quantize_static failed: {type(e).__name__}: {_first_line(e)}") from e
    return _finish(partial, dst)


def optimize_offline(src: Path, dst: Path, level: str) -> Path:
    """Save the graph ONNX Runtime optimizes at ``level`` (basic | extended | all).

    Raises:
        ConversionFailed: the runtime cannot optimize or reload the model.
    """
    import onnxruntime as ort

    levels = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    partial = dst.with_suffix(".partial.onnx")
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = levels[level]
    so.optimized_model_filepath = str(partial)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    except Exception as e:
        partial.unlink(missing_ok=True)
        raise ConversionFailed(f"ONNX Runtime could not optimize it: {_first_line(e)}") from e
    # contrib ops (com.microsoft) are outside onnx.checker's schemas: the runtime load is the check
    return _finish(partial, dst, run_checker=False)


def timed_build(name: str, fn: Any, *args: Any, **kwargs: Any) -> Built:
    """Run one builder; a ConversionFailed becomes a failed :class:`Built` instead of an exception."""
    t0 = time.perf_counter()
    try:
        out = fn(*args, **kwargs)
    except ConversionFailed as e:
        return Built(name=name, path=None, error=str(e), build_s=time.perf_counter() - t0)
    path, settings = out if isinstance(out, tuple) else (out, {})
    return Built(name=name, path=path, settings=settings, build_s=time.perf_counter() - t0)
