"""Plain-data options of ``inferperf optimize``: variants, conversion settings, data, gates; and the command as
one validated spec (:class:`OptimizeSpec`): :meth:`OptimizeSpec.check` refuses what cannot run, so
:func:`~inferperf.optimize.run.run_optimize` (the library call behind the command) gets the same one-line refusals
as the CLI, and :func:`~inferperf.optimize.report.gate_message` decides its exit 3.

Nothing here imports a runtime. Variant names follow DESIGN.md's precision words
(``fp16``, ``int8-dynamic``, ``int8-static`` = QDQ) plus ``ort-basic``,
``ort-extended``, ``ort-all`` (graphs optimized offline by ONNX Runtime and
saved). ``fp32`` is always the reference and is never converted.

Accuracy gates compare a variant's agreement with fp32 (or a task metric) to
the reference. Agreement metrics (``cosine``, ``top1``, ``top5``) score 1.0 for
fp32 against itself, so a drop is ``1 - value``. A drop budget must carry its
unit: ``cosine:0.01`` (absolute, on a named metric) or ``1%`` / ``top1:0.5%``
(relative to the reference's score). A bare number such as ``3`` is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..config import BenchConfig
from ..errors import UsageError

REFERENCE = "fp32"
VARIANTS: tuple[str, ...] = ("fp16", "int8-dynamic", "int8-static", "ort-basic", "ort-extended", "ort-all")
"""Variants ``--variants`` accepts, in table order."""

AGREEMENT_METRICS: tuple[str, ...] = ("cosine", "top1", "top5")
#: Closeness metrics: an error, gated from above (``max_abs_error:0.05`` in the output's unit, or
#: ``max_abs_error:10%`` of the fp32 output's largest magnitude).
CLOSENESS_METRICS: tuple[str, ...] = ("max_abs_error",)
"""Metrics scored against fp32's own outputs (fp32 scores 1.0 on each)."""

#: Ops kept in fp32 by default in the fp16 variant, on top of onnxconverter-common's own
#: ``DEFAULT_OP_BLOCK_LIST`` (Resize, Range, TopK, NonMaxSuppression, Min, Max, CumSum, ...).
#: Shape/size arithmetic and numerically fragile reductions overflow or lose precision in fp16
#: (fp16 max 65504, 11-bit significand).
FP16_DEFAULT_KEEP: tuple[str, ...] = (
    "Resize", "Upsample", "Range", "Shape", "Size", "ConstantOfShape", "Expand", "Tile", "NonZero",
    "Exp", "Pow", "Log", "Softmax", "LogSoftmax", "ReduceSum", "ReduceMean", "ReduceSumSquare",
    "ReduceL2", "ReduceLogSumExp", "LayerNormalization", "InstanceNormalization", "Erf", "Sqrt", "Reciprocal",
    "CumSum", "TopK", "NonMaxSuppression", "RoiAlign",
)  # fmt: skip

CalibrationMethod = Literal["minmax", "entropy", "percentile"]
QuantType = Literal["int8", "uint8"]


class _Opts(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Gate(_Opts):
    """One accuracy budget: the most ``metric`` may drop below fp32's score.

    Attributes:
        metric: ``cosine``, ``top1``, ``top5`` or the task metric's name (``--metric``); ``*`` = every
            agreement metric that applies plus the task metric.
        kind: ``abs`` (drop in the metric's own unit) or ``rel`` (drop in percent of the reference's score).
        amount: the largest allowed drop (>= 0).
        explicit: set by the user (a failure exits 3) rather than a default.
    """

    metric: str
    kind: Literal["abs", "rel"]
    amount: float = Field(ge=0)
    explicit: bool = True

    def describe(self) -> str:
        """``cosine drop <= 0.01`` / ``top1 drop <= 1%`` / ``max_abs_error <= 10% of fp32's peak``."""
        unit = "%" if self.kind == "rel" else ""
        if self.metric in CLOSENESS_METRICS:
            return f"{self.metric} <= {self.amount:g}{unit}" + (" of fp32's peak" if self.kind == "rel" else "")
        return f"{self.metric} drop <= {self.amount:g}{unit}"


DEFAULT_GATES: tuple[Gate, ...] = (
    Gate(metric="cosine", kind="abs", amount=0.01, explicit=False),
    Gate(metric="top1", kind="abs", amount=0.01, explicit=False),
)
"""Used when no ``--max-accuracy-drop`` is given: cosine >= 0.99 and top-1 agreement >= 99 % where it applies."""

SYNTHETIC_GATES: tuple[Gate, ...] = (
    Gate(metric="cosine", kind="abs", amount=0.01, explicit=False),
    Gate(metric="max_abs_error", kind="rel", amount=10.0, explicit=False),
)
"""Used instead of :data:`DEFAULT_GATES` on synthetic eval inputs: output closeness only (cosine >= 0.99, max abs
error <= 10 % of the fp32 output's largest magnitude). Top-1 agreement is not gated there: noise inputs give
near-tied logits whose argmax flips on rounding (fp16 with cosine 1.0000 matched 7 of 8 on ppocr-cls), so it
measures the inputs, not the variant. Measured here: fp16 errs ~0.1 % of the peak, int8-dynamic 1.4-4.5 %
(tiny-cnn, ppocr-cls); 10 % catches a broken conversion that cosine averages away."""

_NUM = r"(\d+(?:\.\d*)?|\.\d+)"
_GATE_RE = re.compile(rf"^(?:(?P<metric>[A-Za-z_][\w.\-]*)\s*[:=]\s*)?(?P<num>{_NUM})\s*(?P<pct>%)?$")


def parse_accuracy_drop(text: str) -> Gate:
    """Parse one ``--max-accuracy-drop`` value.

    Accepted: ``METRIC:ABS`` (``cosine:0.01``: cosine may fall by 0.01), ``METRIC:PCT%``
    (``top1:0.5%``), or ``PCT%`` alone (``1%``: every metric may fall by 1 % of its reference score).

    Raises:
        UsageError: a bare number (``3``: is it 3 %, 3 points, 0.03?), a malformed value, a negative
            amount, or an absolute budget of 1 or more on an agreement metric (those lie in [0, 1]).
    """
    raw = text.strip()
    m = _GATE_RE.match(raw)
    if not m:
        raise UsageError(
            f"malformed --max-accuracy-drop {text!r}: use METRIC:ABS (cosine:0.01), METRIC:PCT% (top1:0.5%) or PCT% (1%)"
        )
    metric, amount, pct = m.group("metric"), float(m.group("num")), bool(m.group("pct"))
    if metric is not None and metric.lower() in CLOSENESS_METRICS:
        return Gate(metric=metric.lower(), kind="rel" if pct else "abs", amount=amount)
    if not pct and metric is None:
        raise UsageError(
            f"--max-accuracy-drop {text!r} is ambiguous (percent? absolute? on which metric?):"
            f" write {text}% for a relative drop, or METRIC:{text} (e.g. cosine:{text}) for an absolute one"
        )
    metric = (metric or "*").lower() if metric is None or metric.lower() in AGREEMENT_METRICS else metric
    if not pct and metric in AGREEMENT_METRICS and amount >= 1.0:
        raise UsageError(
            f"--max-accuracy-drop {text!r}: {metric} lies in [0, 1], so an absolute drop of {amount:g} allows"
            f" anything; did you mean {metric}:{amount:g}%?"
        )
    if pct and amount > 100:
        raise UsageError(f"--max-accuracy-drop {text!r}: a relative drop over 100% allows anything")
    return Gate(metric=metric, kind="rel" if pct else "abs", amount=amount)


class ImagePrep(_Opts):
    """How an image folder becomes input tensors (one documented preprocessing).

    Each image (``.png .jpg .jpeg .bmp .webp .tif .tiff``, sorted by name) is opened with Pillow,
    converted to RGB (``channel_order`` ``bgr`` reverses the channels afterwards), then fitted to the
    input's H x W: ``resize`` = ``letterbox`` scales it to fit keeping the aspect ratio and pads the
    bottom/right with ``pad_value`` (0..255), ``stretch`` resizes to exactly H x W; bilinear filter.
    Pixels become float32 ``value * scale`` then ``(value - mean[c]) / std[c]`` per channel.
    Layout: ``auto`` reads NCHW when the input's dim 1 is 1 or 3, NHWC when its last dim is; 1 channel
    converts the image to grey ("L").
    """

    resize: Literal["letterbox", "stretch"] = "letterbox"
    pad_value: int = Field(default=0, ge=0, le=255)
    scale: float = 1.0 / 255.0
    mean: list[float] = Field(default_factory=lambda: [0.0, 0.0, 0.0])
    std: list[float] = Field(default_factory=lambda: [1.0, 1.0, 1.0])
    layout: Literal["auto", "nchw", "nhwc"] = "auto"
    channel_order: Literal["rgb", "bgr"] = "rgb"

    @field_validator("std")
    @classmethod
    def _positive(cls, v: list[float]) -> list[float]:
        if any(x <= 0 for x in v):
            raise ValueError("--std values must be > 0")
        return v


class QuantOptions(_Opts):
    """int8 settings under ``onnxruntime.quantization``'s names. ``None`` = the recommendation for
    this CPU (see :func:`inferperf.optimize.convert.recommended_quant`), recorded with a note."""

    calibration_method: CalibrationMethod = "minmax"
    per_channel: bool | None = None
    reduce_range: bool | None = None
    activation_type: QuantType | None = None
    weight_type: QuantType | None = None
    exclude_op_types: list[str] = Field(default_factory=list)
    exclude_nodes: list[str] = Field(default_factory=list)


class OptimizeOptions(_Opts):
    """Everything ``optimize`` needs besides the model.

    Attributes:
        variants: names from :data:`VARIANTS` (fp32 is always added as the reference).
        keep_fp32: op types kept in fp32 in the fp16 variant, on top of :data:`FP16_DEFAULT_KEEP`.
        quant: int8 settings.
        calibration_data / eval_data: an ``.npz`` (keyed by input name) or an image folder; None = synthetic
            (seeded), and every accuracy figure is then flagged as not predictive.
        calibration_samples / eval_samples: how many inputs to use (the first N of the data).
        image: preprocessing of image folders.
        gates: explicit accuracy budgets; empty = :data:`DEFAULT_GATES`.
        metric: ``module:function`` task metric, called as ``fn(reference_outputs, candidate_outputs)`` with
            two lists (one per eval input) of ``{output name: array}``; higher is better.
        fail_on_gate: exit 3 when a default gate fails (explicit gates always do).
        sensitivity: rank nodes of the int8-static variant by the error they add.
        auto_exclude: keep the worst nodes in fp32 until the gates pass (implies sensitivity).
        max_auto_exclude: the most nodes auto-exclusion may keep in fp32.
        bench: how each variant is measured (the bench settings; ``repeat`` rounds, interleaved).
        measure: False skips the speed measurement (accuracy and conversion checks only).
    """

    variants: list[str] = Field(default_factory=lambda: ["fp16", "int8-dynamic", "int8-static"])
    keep_fp32: list[str] = Field(default_factory=list)
    quant: QuantOptions = Field(default_factory=QuantOptions)
    calibration_data: Path | None = None
    eval_data: Path | None = None
    calibration_samples: int = Field(default=16, ge=1)
    eval_samples: int = Field(default=8, ge=1)
    image: ImagePrep = Field(default_factory=ImagePrep)
    gates: list[Gate] = Field(default_factory=list)
    metric: str | None = None
    fail_on_gate: bool = False
    sensitivity: bool = False
    auto_exclude: bool = False
    max_auto_exclude: int = Field(default=16, ge=1)
    sensitivity_top: int = Field(default=10, ge=1)
    bench: BenchConfig = Field(default_factory=lambda: BenchConfig(repeat=3))
    measure: bool = True

    @field_validator("variants")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        out = []
        for name in v:
            n = name.strip().lower()
            if n == REFERENCE:
                continue
            if n not in VARIANTS:
                raise ValueError(f"unknown variant {name!r}: choose from {', '.join(VARIANTS)} (fp32 is always measured)")
            if n not in out:
                out.append(n)
        return out

    def effective_gates(self, predictive: bool = True) -> list[Gate]:
        """The explicit gates, else the defaults: :data:`DEFAULT_GATES` on real eval data (``predictive``),
        :data:`SYNTHETIC_GATES` (output closeness, no top-1) on synthetic inputs."""
        if self.gates:
            return list(self.gates)
        return list(DEFAULT_GATES if predictive else SYNTHETIC_GATES)


def check_gate_metrics(opts: OptimizeOptions) -> None:
    """Refuse a gate on a metric no check computes.

    Raises:
        UsageError: a ``--max-accuracy-drop`` metric that is neither an agreement or closeness metric nor the
            ``--metric`` task metric's name.
    """
    task = opts.metric.split(":")[-1] if opts.metric else None
    for gate in opts.gates:
        if gate.metric not in ("*", *AGREEMENT_METRICS, *CLOSENESS_METRICS) and gate.metric != task:
            raise UsageError(
                f"--max-accuracy-drop names metric {gate.metric!r}, which no check computes: use"
                f" {', '.join((*AGREEMENT_METRICS, *CLOSENESS_METRICS))}"
                + (f" or {task}" if task else " (or a --metric module:function)")
            )


def options_from(doc: dict[str, Any]) -> OptimizeOptions:
    """:class:`OptimizeOptions` from plain settings (``quant`` and ``image`` as mappings or their models).

    Raises:
        UsageError: a refused value, one line naming its flag (``--calibration-method Input should be ...``).
    """
    doc = dict(doc)
    try:
        for key, cls in (("quant", QuantOptions), ("image", ImagePrep)):  # checked first, as the flags are read
            if isinstance(doc.get(key), dict):
                doc[key] = cls.model_validate(doc[key])
        return OptimizeOptions.model_validate(doc)
    except ValidationError as e:
        err = e.errors()[0]
        where = "--" + str(err["loc"][-1]).replace("_", "-") if err["loc"] else ""
        raise UsageError(f"{where} {err['msg'].replace('Value error, ', '')}".strip()) from None


@dataclass
class OptimizeSpec:
    """One optimize run: ``model`` (fp32 ONNX file or ``zoo:NAME``), ``output`` (the folder for variant files,
    Results and the summary) and its options (an :class:`OptimizeOptions`, or its fields as plain settings)."""

    model: str
    output: Path
    options: OptimizeOptions | dict[str, Any] = field(default_factory=dict)

    def check(self) -> OptimizeSpec:
        """Refuse what cannot run; returns self with ``options`` validated and the zoo model's default shapes in
        its bench settings (``zoo:ppocr-cls`` at 48x192 unless ``--shape``).

        Raises:
            UsageError: a refused setting (:func:`options_from`), no variant to build, a gate on a metric no check
                computes (:func:`check_gate_metrics`).
        """
        from ..zoo import with_default_shapes

        opts = options_from(self.options) if isinstance(self.options, dict) else self.options
        if not opts.variants:
            raise UsageError("--variants names no variant to build: choose from fp16,int8-dynamic,int8-static,ort-basic,"
                             "ort-extended,ort-all")
        check_gate_metrics(opts)
        self.options = opts.model_copy(update={"bench": with_default_shapes(self.model, opts.bench)})
        return self
