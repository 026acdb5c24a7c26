"""Which nodes break int8: rank them by the quantization error they add, and keep the worst in fp32.

Ranking uses ONNX Runtime's QDQ debugging tools (``onnxruntime.quantization.qdq_loss_debug``):
both the fp32 (pre-processed) model and the QDQ model are augmented to output every
intermediate tensor, run on the same inputs, and matched by tensor name. For each quantized
activation the *local* error is the SQNR (dB) between the fp32 tensor and that same tensor
passed through its own QuantizeLinear/DequantizeLinear (the calibrated scale and zero point read
from the QDQ model): the error that quantizing this tensor adds, whatever came before it (and
unaffected by activations such as Relu that the quantizer folds into the quantization range).
Weights get the SQNR between the float and dequantized initializer. The
accumulated SQNR (fp32 tensor vs the QDQ model's tensor) is reported beside it. Lower SQNR =
more error; entries are ranked ascending.

In QDQ format an activation is quantized once for its producer and its consumers, so keeping
it in fp32 means excluding all of them: each entry lists those nodes (``exclude``).
:func:`auto_exclude` adds entries in rank order (1, 2, 4, ... entries) until the gates pass.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _reader(feeds: Sequence[dict[str, np.ndarray]]) -> Any:
    from onnxruntime.quantization import CalibrationDataReader

    class _R(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(list(feeds))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    return _R()


def _sqnr(x: Sequence[np.ndarray], y: Sequence[np.ndarray]) -> float:
    """SQNR in dB of ``y`` against ``x`` over all the paired tensors: 10 * log10(sum(x^2) / sum((x - y)^2)).

    Same figure as ONNX Runtime's ``qdq_loss_debug.compute_signal_to_quantization_noice_ratio``, but
    every tensor is flattened first, so 0-d tensors (scalar weights such as a Mul's constant) and
    tensors of different ranks do not break it. Capped at +/-200 dB (identical tensors, or an
    all-zero signal), which keeps the JSON finite.
    """
    from ..stats import snr_db

    if len(x) != len(y):
        raise ValueError(f"{len(x)} reference tensor(s) vs {len(y)} quantized: pair them one to one")
    ref = np.concatenate([np.ravel(np.asarray(a, dtype=np.float64)) for a in x]) if len(x) else np.zeros(0)
    got = np.concatenate([np.ravel(np.asarray(b, dtype=np.float64)) for b in y]) if len(y) else np.zeros(0)
    v = snr_db(ref, got)
    return float(min(200.0, max(-200.0, v)))


def rank_nodes(float_model: Path, qdq_model: Path, feeds: Sequence[dict[str, np.ndarray]]) -> list[dict[str, Any]]:
    """Rank the quantized tensors of ``qdq_model`` by the error their quantization adds.

    Args:
        float_model: the fp32 model the QDQ model was quantized from (the pre-processed file, so
            tensor and node names match).
        qdq_model: the int8-static (QDQ) model.
        feeds: inputs to run (a few are enough; each keeps every intermediate tensor in memory).

    Returns:
        Entries sorted by ``sqnr_db`` ascending (worst first): ``{"node", "op_type", "tensor",
        "kind" ("activation" | "weight"), "sqnr_db", "accumulated_sqnr_db" (activations; null for
        weights), "exclude" (node names to keep in fp32 to remove this error)}``.
    """
    import onnx
    from onnxruntime.quantization import qdq_loss_debug as dbg

    model = onnx.load(str(float_model), load_external_data=False)
    producer = {o: n for n in model.graph.node for o in n.output}
    consumers: dict[str, list[Any]] = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    inits = {t.name for t in model.graph.initializer}
    qdq = onnx.load(str(qdq_model), load_external_data=False)
    quantized_nodes = {n.name for n in qdq.graph.node}

    with tempfile.TemporaryDirectory(prefix="inferperf-sens-") as tmp, contextlib.redirect_stdout(io.StringIO()):
        aug_f, aug_q = Path(tmp) / "float_aug.onnx", Path(tmp) / "qdq_aug.onnx"
        dbg.modify_model_output_intermediate_tensors(str(float_model), str(aug_f))
        dbg.modify_model_output_intermediate_tensors(str(qdq_model), str(aug_q))
        float_acts = dbg.collect_activations(str(aug_f), _reader(feeds))
        qdq_acts = dbg.collect_activations(str(aug_q), _reader(feeds))
        matched = dbg.create_activation_matching(qdq_acts, float_acts)
        weights = dbg.create_weight_matching(str(float_model), str(qdq_model))

    def name_of(n: Any) -> str:
        return n.name or f"{n.op_type}({n.output[0]})"

    from onnx import numpy_helper

    qinits = {t.name: numpy_helper.to_array(t) for t in qdq.graph.initializer}
    qparams: dict[str, tuple[float, float, np.dtype]] = {}
    for n in qdq.graph.node:
        if n.op_type != "QuantizeLinear" or len(n.input) < 3 or n.input[1] not in qinits or n.input[2] not in qinits:
            continue
        scale, zp = qinits[n.input[1]], qinits[n.input[2]]
        if scale.size != 1:
            continue  # per-axis: weights, scored below
        tensor = n.output[0].removesuffix("_QuantizeLinear_Output")
        if tensor == n.output[0]:
            tensor = n.input[0].removesuffix("_QuantizeLinear_Input")
        qparams[tensor] = (float(scale.reshape(-1)[0]), float(zp.reshape(-1)[0]), zp.dtype)

    def simulate(x: np.ndarray, scale: float, zp: float, dtype: np.dtype) -> np.ndarray:
        info = np.iinfo(dtype)
        q = np.clip(np.round(x / scale) + zp, info.min, info.max)
        return ((q - zp) * scale).astype(np.float32)

    entries: list[dict[str, Any]] = []
    for tensor, (scale, zp, dtype) in qparams.items():
        if tensor in inits or tensor not in float_acts:
            continue
        p = producer.get(tensor)
        users = [c for c in consumers.get(tensor, []) if c.name in quantized_nodes]
        nodes = ([p] if p is not None else []) + users
        if not nodes:
            continue
        main = p if p is not None else users[0]
        f = float_acts[tensor]
        m = matched.get(tensor, {})
        acc = _sqnr(f, m["post_qdq"]) if m.get("post_qdq") else None
        entries.append({"node": name_of(main), "op_type": main.op_type, "tensor": tensor, "kind": "activation",
                        "sqnr_db": _sqnr(f, [simulate(x, scale, zp, dtype) for x in f]), "accumulated_sqnr_db": acc,
                        "exclude": list(dict.fromkeys(n.name for n in nodes if n.name))})
    for wname, m in weights.items():
        users = consumers.get(wname, [])
        if not users or "float" not in m or "dequantized" not in m:
            continue
        u = users[0]
        entries.append({"node": name_of(u), "op_type": u.op_type, "tensor": wname, "kind": "weight",
                        "sqnr_db": _sqnr([m["float"]], [m["dequantized"]]), "accumulated_sqnr_db": None,
                        "exclude": [n.name for n in users if n.name]})
    entries.sort(key=lambda e: e["sqnr_db"])
    return entries


def auto_exclude(
    ranking: Sequence[dict[str, Any]],
    build: Callable[[list[str]], Path | None],
    passes: Callable[[Path], bool],
    max_nodes: int,
) -> tuple[Path | None, list[str], list[dict[str, Any]]]:
    """Keep the worst-ranked nodes in fp32 until ``passes`` is true (or ``max_nodes`` are excluded).

    Tries the first 1, 2, 4, 8, ... ranking entries (deduplicated node lists), rebuilding with
    ``build(excluded_nodes)`` (returns the model path, or None if the build failed) and judging it
    with ``passes(path)``.

    Returns:
        (the first passing model or None, its excluded nodes (the last tried when none passed),
        one record per attempt: ``{"entries", "excluded", "passed"}``).
    """
    attempts: list[dict[str, Any]] = []
    k, last_excluded, tried = 1, [], set()
    while k <= max(1, len(ranking)):
        excluded = list(dict.fromkeys(n for e in ranking[:k] for n in e["exclude"]))[:max_nodes]
        key = tuple(excluded)
        if excluded and key not in tried:
            tried.add(key)
            path = build(excluded)
            ok = path is not None and passes(path)
            attempts.append({"entries": k, "excluded": excluded, "passed": ok})
            last_excluded = excluded
            if ok:
                return path, excluded, attempts
        if len(excluded) >= max_nodes or k >= len(ranking):
            break
        k = min(k * 2, len(ranking))
    return None, last_excluded, attempts
