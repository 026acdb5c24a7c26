"""Built-in model names -> ONNX files.

A zoo name is written ``zoo:NAME`` wherever a model path is accepted. Three kinds:

* ``onnx-light``: the small "light" models shipped inside the ``onnx`` package
  (``onnx/backend/test/data/light``); real architectures with constant weights,
  good for speed measurements only.
* ``package``: real models found inside an installed package (PP-OCR from
  ``rapidocr_onnxruntime``); missing ones name the pip command.
* ``generated``: tiny models built with ``onnx.helper`` from seeded weights on
  first use and cached under :func:`cache_dir`.

This module imports neither onnxruntime nor (at import time) onnx: packages are
located with :func:`importlib.util.find_spec`, and ``onnx`` is imported only
when a generated model has to be built.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from inferperf.errors import UsageError
from inferperf.fsutil import atomic_write_bytes

ZOO_PREFIX = "zoo:"
"""Prefix that marks a model argument as a zoo name (``zoo:tiny-cnn``)."""

GENERATOR_VERSION = "g1"
"""Bumped whenever a generator changes; part of the cache file name so old files are not reused."""

_SEED = 20240601
_OPSET = 17
_IR_VERSION = 8  # the IR version that goes with opset 17; loadable by older runtimes too

ZooKind = Literal["onnx-light", "package", "generated"]


@dataclass(frozen=True)
class ZooEntry:
    """One built-in model.

    Attributes:
        name: The zoo name, used as ``zoo:NAME``.
        kind: ``"onnx-light"``, ``"package"`` or ``"generated"``.
        description: One line on what the model is (architecture, inputs).
        note: What the weights are good for, e.g. ``"constant weights: for speed only"``.
        extra: How to get the model when it is missing (a pip command), or ``""``.
    """

    name: str
    kind: ZooKind
    description: str
    note: str
    extra: str


_LIGHT_NOTE = "constant weights: for speed only"
_ONNX_PIP = "pip install onnx"
_RAPIDOCR_PIP = "pip install --no-deps rapidocr-onnxruntime"

# name -> file stem under onnx/backend/test/data/light (light_<stem>.onnx): the name itself but for alexnet
_LIGHT_FILES: dict[str, str] = {
    **{n: n for n in ("resnet50", "densenet121", "squeezenet", "shufflenet", "inception_v1", "inception_v2", "vgg19")},
    "alexnet": "bvlc_alexnet",
    "zfnet512": "zfnet512",
}

# name -> (preferred file name, fallback glob) under rapidocr_onnxruntime/models
_PACKAGE_FILES: dict[str, tuple[str, str]] = {
    "ppocr-det": ("ch_PP-OCRv4_det_infer.onnx", "*det*.onnx"),
    "ppocr-rec": ("ch_PP-OCRv4_rec_infer.onnx", "*rec*.onnx"),
    "ppocr-cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", "*cls*.onnx"),
}

_ENTRIES: dict[str, ZooEntry] = {}
for _name in _LIGHT_FILES:
    _ENTRIES[_name] = ZooEntry(
        _name, "onnx-light", f"{_name} image classifier from onnx's light test models, input [1,3,224,224]",
        _LIGHT_NOTE, _ONNX_PIP,
    )
#: zoo name -> input shapes used when neither --shape, --dim nor --input-data sets one: the sizes RapidOCR
#: feeds these models (rec_img_shape 3x48x320, cls_image_shape 3x48x192); None is the batch dim (--batch-size, or 1)
_DEFAULT_SHAPES: dict[str, dict[str, tuple[int | None, ...]]] = {
    "ppocr-rec": {"x": (None, 3, 48, 320)},
    "ppocr-cls": {"x": (None, 3, 48, 192)},
}
for _name, _what in (("ppocr-det", "PP-OCRv4 text detector, input x [batch,3,H,W]: pass --shape"),
                     ("ppocr-rec", "PP-OCRv4 text recognizer, input x [batch,3,H,W] (default 48x320)"),
                     ("ppocr-cls", "PP-OCR v2.0 text direction classifier, x [batch,3,H,W] (default 48x192)")):
    _ENTRIES[_name] = ZooEntry(_name, "package", _what, "real weights", _RAPIDOCR_PIP)
_GEN_NOTE = "generated, seeded weights"
_ENTRIES["tiny-cnn"] = ZooEntry(
    "tiny-cnn", "generated", "2-conv CNN: x float32 [batch,3,32,32] -> logits float32 [batch,10]", _GEN_NOTE, _ONNX_PIP)
_ENTRIES["tiny-cnn-fixed"] = ZooEntry(
    "tiny-cnn-fixed", "generated", "tiny-cnn with batch fixed to 1: x float32 [1,3,32,32] -> logits [1,10]",
    _GEN_NOTE, _ONNX_PIP)
_ENTRIES["tiny-bert"] = ZooEntry(
    "tiny-bert", "generated",
    "1-layer encoder: input_ids, attention_mask int64 [batch,seq] (vocab 1000) -> last_hidden_state float32 "
    "[batch,seq,64]", _GEN_NOTE, _ONNX_PIP)


def entries() -> list[ZooEntry]:
    """Return every zoo entry, in listing order (onnx-light, package, generated)."""
    return list(_ENTRIES.values())


def cache_dir() -> Path:
    """Return the folder that holds generated models (not created here).

    ``$INFERPERF_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/inferperf/zoo``, else
    ``~/.cache/inferperf/zoo``.
    """
    explicit = os.environ.get("INFERPERF_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "inferperf" / "zoo"


def zoo_name(name_or_path: str) -> str | None:
    """Return NAME for ``zoo:NAME`` (stripped, lower-cased), or None for a plain path.

    The name is not checked against the known names; :func:`resolve` does that.
    """
    text = str(name_or_path).strip()
    if text.lower().startswith(ZOO_PREFIX):
        return text[len(ZOO_PREFIX):].strip().lower()
    return None


def default_shapes(name_or_path: str, batch_size: int | None = None) -> dict[str, list[int]]:
    """The input shapes a zoo model is measured at when none are given (``{}``: none, or not a zoo name).

    Args:
        name_or_path: ``zoo:NAME`` or a path.
        batch_size: rows per query, the leading dim (default 1).
    """
    name = zoo_name(name_or_path)
    shapes = _DEFAULT_SHAPES.get(name or "", {})
    return {k: [batch_size or 1 if d is None else d for d in dims] for k, dims in shapes.items()}


def with_default_shapes(model: str | Path, cfg: Any) -> Any:
    """``cfg`` (a :class:`~inferperf.config.BenchConfig`) with the zoo model's default shapes filled in.

    Unchanged when the model has none, or when ``--shape``, ``--dim`` or ``--input-data`` already
    say what the inputs are (the user's choice wins whole). Filled shapes are recorded like given
    ones, so ``bench zoo:ppocr-cls`` and ``bench zoo:ppocr-cls --shape x:1x3x48x192`` are one case.
    """
    w = cfg.workload
    if w.shapes or w.dims or w.input_data is not None:
        return cfg
    shapes = default_shapes(str(model), w.batch_size)
    if not shapes:
        return cfg
    return cfg.model_copy(update={"workload": w.model_copy(update={"shapes": shapes})})


def _package_dir(package: str) -> Path | None:
    """Locate an installed package's folder without importing it, or None."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _find_file(entry: ZooEntry) -> Path | None:
    """Return the existing file of an onnx-light or package entry, or None when missing."""
    if entry.kind == "onnx-light":
        onnx_dir = _package_dir("onnx")
        if onnx_dir is None:
            return None
        path = onnx_dir / "backend" / "test" / "data" / "light" / f"light_{_LIGHT_FILES[entry.name]}.onnx"
        return path if path.is_file() else None
    pkg_dir = _package_dir("rapidocr_onnxruntime")
    if pkg_dir is None:
        return None
    models = pkg_dir / "models"
    preferred, pattern = _PACKAGE_FILES[entry.name]
    if (models / preferred).is_file():
        return models / preferred
    found = sorted(models.glob(pattern)) if models.is_dir() else []
    return found[-1] if found else None


def _cache_path(name: str) -> Path:
    """The cache file of a generated model; the generator version is part of the name."""
    return cache_dir() / f"{name}-{GENERATOR_VERSION}.onnx"


def list_models() -> list[tuple[ZooEntry, bool, str | None]]:
    """List every entry with whether it is available and where its file is.

    Generated models are not built here: they are always available, and their
    path is the cached file when it already exists, else None.

    Returns:
        ``(entry, available, path_or_None)`` tuples in listing order.
    """
    rows: list[tuple[ZooEntry, bool, str | None]] = []
    for entry in _ENTRIES.values():
        if entry.kind == "generated":
            cached = _cache_path(entry.name)
            rows.append((entry, True, str(cached) if cached.is_file() else None))
        else:
            path = _find_file(entry)
            rows.append((entry, path is not None, str(path) if path else None))
    return rows


def resolve(name_or_path: str) -> Path:
    """Turn a model argument into a file path.

    Args:
        name_or_path: ``zoo:NAME`` or a plain path. A plain path is returned as a
            :class:`~pathlib.Path` unchanged, without checking that it exists.

    Returns:
        The ONNX file. Generated models are built on first use and cached.

    Raises:
        UsageError: unknown zoo name (the message lists the known names), a
            package model whose package is missing (names the pip command), or
            ``onnx`` missing for an onnx-light or generated model.
    """
    name = zoo_name(name_or_path)
    if name is None:
        return Path(name_or_path)
    entry = _ENTRIES.get(name)
    if entry is None:
        known = ", ".join(_ENTRIES)
        raise UsageError(f"unknown zoo model {name!r}: known models are {known} (run 'inferperf zoo' to list them)")
    if entry.kind == "generated":
        return _build_cached(entry)
    path = _find_file(entry)
    if path is None:
        what = "onnx" if entry.kind == "onnx-light" else "rapidocr-onnxruntime"
        raise UsageError(f"zoo model {name!r} needs the {what} package, which is missing: {entry.extra}")
    return path


def _build_cached(entry: ZooEntry) -> Path:
    """Return the cached generated model, building it atomically when missing."""
    path = _cache_path(entry.name)
    if path.is_file() and path.stat().st_size > 0:
        return path
    if _package_dir("onnx") is None:
        raise UsageError(f"zoo model {entry.name!r} is generated with onnx, which is missing: {_ONNX_PIP}")
    data = _GENERATORS[entry.name]()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data)
    return path


def _finish(graph: Any) -> bytes:
    """Wrap a graph into an opset-17 model, check it and serialize it."""
    import onnx
    from onnx import helper

    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="inferperf.zoo",
        producer_version=GENERATOR_VERSION, ir_version=_IR_VERSION,
    )
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def _tensor(name: str, array: Any) -> Any:
    """A named TensorProto initializer from a numpy array."""
    from onnx import numpy_helper

    return numpy_helper.from_array(array, name=name)


def _tiny_cnn(batch: int | str = "batch") -> bytes:
    """x float32 [batch,3,32,32] -> Conv+Relu, Conv(s2)+Relu, GAP, Flatten, Gemm -> logits float32 [batch,10]."""
    import numpy as np
    from onnx import TensorProto, helper

    rng = np.random.default_rng(_SEED)

    def he(shape: tuple[int, ...], fan_in: int) -> Any:
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    def bias(n: int) -> Any:
        return (rng.standard_normal(n) * 0.1).astype(np.float32)

    inits = [
        _tensor("conv1.w", he((8, 3, 3, 3), 27)), _tensor("conv1.b", bias(8)),
        _tensor("conv2.w", he((16, 8, 3, 3), 72)), _tensor("conv2.b", bias(16)),
        _tensor("fc.w", he((10, 16), 16)), _tensor("fc.b", bias(10)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv1.w", "conv1.b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "conv2.w", "conv2.b"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
        initializer=inits,
    )
    return _finish(graph)


def _tiny_bert() -> bytes:
    """input_ids, attention_mask int64 [batch,seq] -> one-head encoder layer -> last_hidden_state [batch,seq,64]."""
    import numpy as np
    from onnx import TensorProto, helper

    vocab, hidden, ffn = 1000, 64, 128
    rng = np.random.default_rng(_SEED + 1)

    def w(*shape: int, scale: float) -> Any:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = [
        _tensor("emb", w(vocab, hidden, scale=1.0)),
        _tensor("wq", w(hidden, hidden, scale=hidden**-0.5)), _tensor("bq", w(hidden, scale=0.02)),
        _tensor("wk", w(hidden, hidden, scale=hidden**-0.5)), _tensor("bk", w(hidden, scale=0.02)),
        _tensor("wv", w(hidden, hidden, scale=hidden**-0.5)), _tensor("bv", w(hidden, scale=0.02)),
        _tensor("wo", w(hidden, hidden, scale=hidden**-0.5)), _tensor("bo", w(hidden, scale=0.02)),
        _tensor("w1", w(hidden, ffn, scale=hidden**-0.5)), _tensor("b1", w(ffn, scale=0.02)),
        _tensor("w2", w(ffn, hidden, scale=ffn**-0.5)), _tensor("b2", w(hidden, scale=0.02)),
        _tensor("ln1.g", np.ones(hidden, np.float32)), _tensor("ln1.b", np.zeros(hidden, np.float32)),
        _tensor("ln2.g", np.ones(hidden, np.float32)), _tensor("ln2.b", np.zeros(hidden, np.float32)),
        _tensor("scale", np.array(hidden**-0.5, np.float32)),
        _tensor("one", np.array(1.0, np.float32)), _tensor("neg", np.array(-10000.0, np.float32)),
        _tensor("axis1", np.array([1], np.int64)),
    ]
    mk = helper.make_node
    nodes = [
        mk("Gather", ["emb", "input_ids"], ["h0"], axis=0),  # [b,s,H]; ids index the embedding (range [0,vocab))
        mk("MatMul", ["h0", "wq"], ["q0"]), mk("Add", ["q0", "bq"], ["q"]),
        mk("MatMul", ["h0", "wk"], ["k0"]), mk("Add", ["k0", "bk"], ["k"]),
        mk("MatMul", ["h0", "wv"], ["v0"]), mk("Add", ["v0", "bv"], ["v"]),
        mk("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        mk("MatMul", ["q", "kt"], ["s0"]), mk("Mul", ["s0", "scale"], ["s1"]),  # [b,s,s]
        mk("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
        mk("Sub", ["one", "mf"], ["inv"]), mk("Mul", ["inv", "neg"], ["madd0"]),
        mk("Unsqueeze", ["madd0", "axis1"], ["madd"]),  # [b,1,s]: -1e4 on masked keys
        mk("Add", ["s1", "madd"], ["s2"]), mk("Softmax", ["s2"], ["p"], axis=-1),
        mk("MatMul", ["p", "v"], ["ctx"]),
        mk("MatMul", ["ctx", "wo"], ["o0"]), mk("Add", ["o0", "bo"], ["o"]),
        mk("Add", ["h0", "o"], ["res1"]),
        mk("LayerNormalization", ["res1", "ln1.g", "ln1.b"], ["h1"], axis=-1, epsilon=1e-5),
        mk("MatMul", ["h1", "w1"], ["f0"]), mk("Add", ["f0", "b1"], ["f1"]), mk("Relu", ["f1"], ["f2"]),
        mk("MatMul", ["f2", "w2"], ["f3"]), mk("Add", ["f3", "b2"], ["f4"]),
        mk("Add", ["h1", "f4"], ["res2"]),
        mk("LayerNormalization", ["res2", "ln2.g", "ln2.b"], ["last_hidden_state"], axis=-1, epsilon=1e-5),
    ]
    graph = helper.make_graph(
        nodes, "tiny_bert",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden])],
        initializer=inits,
    )
    return _finish(graph)


_GENERATORS: dict[str, Callable[[], bytes]] = {
    "tiny-cnn": _tiny_cnn,
    "tiny-cnn-fixed": lambda: _tiny_cnn(batch=1),
    "tiny-bert": _tiny_bert,
}

__all__ = [
    "GENERATOR_VERSION", "ZOO_PREFIX", "ZooEntry", "cache_dir", "entries", "list_models", "resolve", "zoo_name",
]
