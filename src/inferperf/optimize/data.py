"""Calibration and evaluation inputs: an ``.npz`` of tensors, an image folder, or synthetic.

* ``.npz`` keyed by input name: each array is one feed (the input's shape) or a stack of
  feeds (one extra leading axis); checked by :func:`inferperf.workload.data.build_workload`.
* a folder of images: one documented preprocessing (:class:`~inferperf.optimize.spec.ImagePrep`)
  for a model with one image-like float input ([N, C, H, W] or [N, H, W, C], C in {1, 3});
  each image becomes one feed with batch 1 (or is repeated along a larger batch).
* nothing: seeded standard-normal inputs (numpy PCG64). Accuracy on them says little about
  real inputs (a detector's output on noise is almost all zeros), so every figure computed
  from them is flagged ``predictive: false``.

:func:`make_text_images` writes seeded images with text drawn on varied backgrounds (Pillow):
the fixtures the tests and ``benchmarks/optimize.py`` use for text detectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..results.model import TensorInfo
from ..workload.data import build_workload
from ..workload.shapes import resolve_shapes
from .spec import ImagePrep

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff")


@dataclass
class Inputs:
    """Feeds for calibration or evaluation.

    Attributes:
        feeds: one dict (input name -> array of the resolved shape and the input's dtype) per sample.
        source: ``synthetic (seed S)``, ``npz:PATH`` or ``images:PATH``.
        predictive: False for synthetic data: accuracy computed on it is not predictive of real inputs.
    """

    feeds: list[dict[str, np.ndarray]]
    source: str
    predictive: bool


def _image_input(inputs: Sequence[TensorInfo], resolved: Mapping[str, list[int]], prep: ImagePrep) -> tuple[str, str]:
    floats = [i for i in inputs if i.dtype.startswith("float")]
    if len(inputs) != 1 or not floats:
        raise UsageError(
            f"an image folder feeds a model with one float image input; this one has {[i.name for i in inputs]}:"
            " pass an .npz keyed by input name instead"
        )
    spec = floats[0]
    shape = resolved[spec.name]
    if len(shape) != 4:
        raise UsageError(f"input '{spec.name}' has shape {shape}, not [N,C,H,W] or [N,H,W,C]: pass an .npz instead")
    layout = prep.layout
    if layout == "auto":
        layout = "nchw" if shape[1] in (1, 3) else "nhwc" if shape[3] in (1, 3) else ""
        if not layout:
            raise UsageError(f"input '{spec.name}' shape {shape} has no 1- or 3-channel axis: pass an .npz instead")
    return spec.name, layout


def load_image(path: Path, height: int, width: int, channels: int, prep: ImagePrep) -> np.ndarray:
    """One image as float32 [H, W, C] after the documented preprocessing (see :class:`ImagePrep`).

    Raises:
        UsageError: Pillow cannot read the file, or mean/std lengths do not match the channels.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im = im.convert("L" if channels == 1 else "RGB")
            if prep.resize == "stretch":
                im = im.resize((width, height), Image.Resampling.BILINEAR)
                arr = np.asarray(im, dtype=np.float32)
            else:
                ratio = min(width / im.width, height / im.height)
                w, h = max(1, round(im.width * ratio)), max(1, round(im.height * ratio))
                im = im.resize((w, h), Image.Resampling.BILINEAR)
                arr = np.full((height, width, channels) if channels > 1 else (height, width), prep.pad_value,
                              dtype=np.float32)
                arr[:h, :w] = np.asarray(im, dtype=np.float32)
    except (UnidentifiedImageError, OSError) as e:
        raise UsageError(f"cannot read image '{path}' ({type(e).__name__}): remove it or convert it to PNG") from None
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if prep.channel_order == "bgr" and channels == 3:
        arr = arr[:, :, ::-1]
    mean = np.asarray(prep.mean[:channels] if len(prep.mean) >= channels else prep.mean, dtype=np.float32)
    std = np.asarray(prep.std[:channels] if len(prep.std) >= channels else prep.std, dtype=np.float32)
    if mean.size not in (1, channels) or std.size not in (1, channels):
        raise UsageError(f"--mean/--std need 1 or {channels} values (got {mean.size} and {std.size})")
    return ((arr * prep.scale - mean) / std).astype(np.float32)


def _from_images(
    folder: Path, inputs: Sequence[TensorInfo], resolved: Mapping[str, list[int]], n: int, prep: ImagePrep, flag: str
) -> list[dict[str, np.ndarray]]:
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not files:
        raise UsageError(f"{flag} folder '{folder}' holds no images ({', '.join(IMAGE_SUFFIXES)}): add some or pass an .npz")
    name, layout = _image_input(inputs, resolved, prep)
    shape = resolved[name]
    batch = shape[0]
    c, h, w = (shape[1], shape[2], shape[3]) if layout == "nchw" else (shape[3], shape[1], shape[2])
    dtype = np.dtype(next(i.dtype for i in inputs if i.name == name))
    feeds = []
    for k in range(min(n, len(files))):
        img = load_image(files[k], h, w, c, prep)
        arr = img.transpose(2, 0, 1) if layout == "nchw" else img
        feeds.append({name: np.repeat(arr[None], batch, axis=0).astype(dtype, copy=False)})
    return feeds


def load_inputs(
    source: Path | None,
    inputs: Sequence[TensorInfo],
    *,
    n: int,
    shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    batch_size: int | None = None,
    seed: int = 0,
    prep: ImagePrep | None = None,
    flag: str = "--eval-data",
) -> Inputs:
    """Up to ``n`` feeds for ``inputs`` from ``source`` (``.npz``, image folder, or None = synthetic).

    Args:
        source: the data; None generates ``n`` seeded feeds.
        inputs: the fp32 session's inputs.
        n: how many feeds (the first ``n`` of the data; fewer if the data holds fewer).
        shapes, dims, batch_size: as ``--shape``/``--dim``/``--batch-size`` (see :func:`resolve_shapes`).
        seed: seed of synthetic data.
        prep: image preprocessing (defaults of :class:`ImagePrep`).
        flag: the flag named in errors.

    Raises:
        UsageError: a missing path, a file that is neither ``.npz`` nor a folder, data of the wrong
            dtype/shape, an image folder for a model without one image input, unreadable images.
    """
    prep = prep or ImagePrep()
    if source is None:
        w = build_workload(inputs, shapes=shapes, dims=dims, batch_size=batch_size, pool_size=n, seed=seed)
        return Inputs(feeds=w.feeds[:n], source=f"synthetic (seed {seed})", predictive=False)
    path = Path(source).expanduser()
    if not path.exists():
        raise UsageError(f"{flag} '{source}' not found: pass an .npz keyed by input name or a folder of images")
    if path.is_dir():
        resolved = resolve_shapes(inputs, shapes, dims, batch_size)
        feeds = _from_images(path, inputs, resolved, n, prep, flag)
        return Inputs(feeds=feeds, source=f"images:{path.resolve()}", predictive=True)
    if path.suffix.lower() != ".npz":
        raise UsageError(f"{flag} '{source}' must be an .npz keyed by input name or a folder of images")
    try:
        w = build_workload(inputs, shapes=shapes, dims=dims, batch_size=batch_size, pool_size=1, seed=seed,
                           input_data=path)
    except UsageError as e:
        raise UsageError(str(e).replace("--input-data", flag)) from None
    return Inputs(feeds=w.feeds[:n], source=f"npz:{path.resolve()}", predictive=True)


_WORDS = ("INVOICE", "TOTAL 42.00", "inferperf", "Quantize me", "ONNX 2024", "Hello, world", "PP-OCR det",
          "fp16 vs int8", "Lorem ipsum", "No. 12345")


def make_text_images(folder: Path, n: int, size: tuple[int, int] = (96, 96), seed: int = 0) -> list[Path]:
    """Write ``n`` PNG images (width x height = ``size``) with text lines drawn on seeded backgrounds.

    Backgrounds are a light random colour plus a gradient and noise; 1-3 lines of dark text in
    Pillow's default bitmap font, scaled up 1-3x, at random places. Same seed, same pixels.

    Returns:
        the written paths, sorted by name (``text-000.png`` ...).
    """
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    width, height = size
    paths = []
    for k in range(n):
        base = rng.integers(170, 256, size=3)
        grad = np.linspace(0, rng.integers(0, 40), width)[None, :, None]
        noise = rng.normal(0, 6, size=(height, width, 3))
        bg = np.clip(base[None, None, :] - grad + noise, 0, 255).astype(np.uint8)
        im = Image.fromarray(bg, "RGB")
        for _ in range(int(rng.integers(1, 4))):
            text = _WORDS[int(rng.integers(len(_WORDS)))]
            zoom = int(rng.integers(1, 4))
            layer = Image.new("L", (6 * len(text) + 2, 12), 0)
            ImageDraw.Draw(layer).text((1, 0), text, fill=255)
            layer = layer.resize((layer.width * zoom, layer.height * zoom), Image.Resampling.NEAREST)
            x = int(rng.integers(0, max(1, width - layer.width // 2)))
            y = int(rng.integers(0, max(1, height - layer.height)))
            ink = tuple(int(v) for v in rng.integers(0, 80, size=3))
            im.paste(Image.new("RGB", layer.size, ink), (x, y), layer)
        path = folder / f"text-{k:03d}.png"
        im.save(path)
        paths.append(path)
    return paths
