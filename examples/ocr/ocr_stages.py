"""PP-OCRv4 as a pipeline of stages: decode -> det -> boxes -> cls -> orient -> rec -> ctc.

The stage functions of ``examples/ocr/pipeline.yaml`` (each takes one item, a dict, and returns it) and the
generator of its inputs (``text_images``): white images with black lines of text drawn by Pillow, PNG-encoded,
so decoding is real work and the ground truth is known.

Post-processing is written with numpy, scipy and Pillow (inferperf's core dependencies) instead of OpenCV and
pyclipper (RapidOCR's): the example then runs on a plain install, and every step is visible here. DB's
"unclip" (pyclipper offsetting a polygon by ``area * unclip_ratio / perimeter``) is exact for the axis-aligned
boxes that connected components give; rotated text would need a minimum-area rectangle (cv2.minAreaRect).
Pre- and post-processing constants are RapidOCR's (``rapidocr_onnxruntime/config.yaml``, PP-OCRv4): det
normalisation (x / 255 - 0.5) / 0.5, DB thresh 0.3, box_thresh 0.5, unclip_ratio 1.6, cls input 3x48x192 with
labels 0/180 (rotate when '180' scores over 0.9), rec input 3x48xW, CTC greedy decode over
``['blank'] + dictionary + [' ']`` (the dictionary is the rec model's ``character`` metadata).
"""

from __future__ import annotations

import io
import math
from typing import Any, Iterator

import numpy as np

DET_MAX_SIDE = 960  # RapidOCR's limit_side_len 736 with limit_type min would upscale these small images 3x
DET_THRESH, BOX_THRESH, UNCLIP_RATIO, MIN_SIZE = 0.3, 0.5, 1.6, 3
CLS_SHAPE, CLS_THRESH = (3, 48, 192), 0.9
REC_HEIGHT, REC_MIN_WIDTH = 48, 320

WORDS = ["invoice", "total", "amount", "latency", "server", "batch", "model", "queue", "stage", "python",
         "report", "order", "price", "number", "delivery", "account", "window", "metric", "sample", "buffer"]


def text_images(count: int = 8, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Yield ``count`` PNG images (bytes) of 2-3 lines of words and numbers, with the lines as ``truth``.

    Items: ``{"name": "img-000", "bytes": PNG bytes, "truth": ["line 1", ...]}``; seeded (numpy default_rng).
    """
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    font = ImageFont.load_default(size=30)
    for i in range(count):
        lines = []
        for _ in range(int(rng.integers(2, 4))):
            words = [WORDS[int(k)] for k in rng.choice(len(WORDS), size=2, replace=False)]
            lines.append(f"{words[0]} {int(rng.integers(10, 9999))} {words[1]}")
        img = Image.new("RGB", (520, 60 + 56 * len(lines)), "white")
        draw = ImageDraw.Draw(img)
        for j, line in enumerate(lines):
            draw.text((24 + int(rng.integers(0, 30)), 30 + 56 * j), line, fill="black", font=font)
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        yield {"name": f"img-{i:03d}", "bytes": buf.getvalue(), "truth": lines}


def decode(item: dict[str, Any]) -> dict[str, Any]:
    """Decode the image bytes and make the detector's input.

    Sets ``image`` (uint8 [H, W, 3], RGB) and ``det_input`` (float32 [1, 3, H', W'], sides multiples of 32,
    longest side at most DET_MAX_SIDE), ``det_scale`` (H / H', W / W').
    """
    from PIL import Image

    img = Image.open(io.BytesIO(item["bytes"])).convert("RGB")
    w, h = img.size
    r = min(1.0, DET_MAX_SIDE / max(w, h))
    rw, rh = max(32, round(w * r / 32) * 32), max(32, round(h * r / 32) * 32)
    x = np.asarray(img.resize((rw, rh), Image.Resampling.BILINEAR), dtype=np.float32)
    item["image"] = np.asarray(img)
    item["det_input"] = ((x / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()
    item["det_scale"] = (h / rh, w / rw)
    return item


def boxes(item: dict[str, Any]) -> dict[str, Any]:
    """DB post-processing and crop: threshold the probability map, dilate, label connected components, score
    each box by its mean probability, expand it (unclip), map it to the original image and crop.

    Sets ``boxes`` ([N, 4] int: x0, y0, x1, y1, top-to-bottom), ``crops`` (list of uint8 [h, w, 3]) and
    ``cls_input`` (float32 [N, 3, 48, 192]).
    """
    from scipy import ndimage

    prob = np.asarray(item.pop("det_output")[0])[0, 0]
    bitmap = ndimage.binary_dilation(prob > DET_THRESH, structure=np.ones((2, 2), bool))
    labels, n = ndimage.label(bitmap)
    sy, sx = item["det_scale"]
    H, W = item["image"].shape[:2]
    found = []
    for k, sl in enumerate(ndimage.find_objects(labels), 1):
        if sl is None:
            continue
        y0, y1, x0, x1 = sl[0].start, sl[0].stop, sl[1].start, sl[1].stop
        h, w = y1 - y0, x1 - x0
        if min(h, w) < MIN_SIZE or float(prob[sl].mean()) < BOX_THRESH:
            continue
        d = h * w * UNCLIP_RATIO / (2 * (h + w))
        bx = (max(0, int((x0 - d) * sx)), max(0, int((y0 - d) * sy)),
              min(W, int(math.ceil((x1 + d) * sx))), min(H, int(math.ceil((y1 + d) * sy))))
        found.append(bx)
    found.sort(key=lambda b: (b[1], b[0]))
    item["boxes"] = np.asarray(found, dtype=np.int64).reshape(-1, 4)
    item["crops"] = [item["image"][y0:y1, x0:x1] for x0, y0, x1, y1 in found]
    item["cls_input"] = np.stack([_fit(c, CLS_SHAPE[1], CLS_SHAPE[2]) for c in item["crops"]]) if found else \
        np.zeros((0, *CLS_SHAPE), np.float32)
    del item["det_input"]
    return item


def orient(item: dict[str, Any]) -> dict[str, Any]:
    """Direction classification's post-processing and the recogniser's input: rotate crops the classifier
    calls '180' (score > 0.9), then resize each to height 48 and pad to the batch's widest ratio.

    Sets ``rotated`` (list of bool) and ``rec_input`` (float32 [N, 3, 48, W], W >= 320).
    """
    crops = item["crops"]
    rotated = []
    if crops:
        probs = np.asarray(item.pop("cls_output")[0])
        for i, p in enumerate(probs):
            flip = int(np.argmax(p)) == 1 and float(p[1]) > CLS_THRESH
            rotated.append(flip)
            if flip:
                crops[i] = crops[i][::-1, ::-1]
        ratio = max(c.shape[1] / max(1, c.shape[0]) for c in crops)
        width = max(REC_MIN_WIDTH, int(math.ceil(REC_HEIGHT * ratio)))
        item["rec_input"] = np.stack([_fit(c, REC_HEIGHT, width) for c in crops])
    else:
        item.pop("cls_output", None)
        item["rec_input"] = np.zeros((0, 3, REC_HEIGHT, REC_MIN_WIDTH), np.float32)
    item["rotated"] = rotated
    del item["cls_input"]
    return item


_CHARS: list[str] | None = None


def _characters() -> list[str]:
    """``['blank'] + the rec model's dictionary + [' ']`` (RapidOCR's CTCLabelDecode), read once per process."""
    global _CHARS
    if _CHARS is None:
        import onnx

        from inferperf.zoo import resolve

        meta = {p.key: p.value for p in onnx.load(str(resolve("zoo:ppocr-rec")), load_external_data=False).metadata_props}
        _CHARS = ["blank", *meta["character"].splitlines(), " "]
    return _CHARS


def ctc(item: dict[str, Any]) -> dict[str, Any]:
    """CTC greedy decoding of the recogniser's output [N, T, C]: argmax per step, merge repeats, drop blanks.

    Sets ``text`` (list of str, one per box, top to bottom) and ``scores`` (mean probability of kept steps);
    drops the images and tensors so the finished item is small.
    """
    chars = _characters()
    texts, scores = [], []
    if item["crops"]:
        probs = np.asarray(item.pop("rec_output")[0])
        for p in probs:
            idx = p.argmax(axis=1)
            keep = np.ones(idx.shape, bool)
            keep[1:] = idx[1:] != idx[:-1]
            keep &= idx != 0
            texts.append("".join(chars[i] for i in idx[keep]).strip())
            scores.append(float(p.max(axis=1)[keep].mean()) if keep.any() else 0.0)
    else:
        item.pop("rec_output", None)
    for k in ("image", "crops", "rec_input", "bytes"):
        item.pop(k, None)
    item["text"], item["scores"] = texts, scores
    return item


def _fit(crop: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize ``crop`` to ``height`` keeping its aspect ratio (at most ``width`` wide), scale to [-1, 1], pad
    right with zeros: float32 [3, height, width] (PaddleOCR's resize_norm_img)."""
    from PIL import Image

    h, w = crop.shape[:2]
    rw = min(width, max(1, int(math.ceil(height * w / max(1, h)))))
    img = Image.fromarray(np.ascontiguousarray(crop)).resize((rw, height), Image.Resampling.BILINEAR)
    x = np.asarray(img, np.float32)
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :rw] = ((x / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)
    return out


def char_accuracy(truth: list[str], text: list[str]) -> float:
    """1 - (Levenshtein edit distance / characters) between the true lines and the recognised ones, joined
    by newlines (0 when nothing matches)."""
    a, b = "\n".join(truth), "\n".join(text)
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return max(0.0, 1.0 - prev[-1] / max(1, len(a)))


def check(item: dict[str, Any]) -> dict[str, float]:
    """The pipeline's check: character accuracy of the recognised lines against the drawn ones."""
    return {"char_accuracy": char_accuracy(item.get("truth", []), item.get("text", []))}


__all__ = ["boxes", "char_accuracy", "check", "ctc", "decode", "orient", "text_images"]
