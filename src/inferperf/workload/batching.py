"""Make a model whose inputs have a fixed leading dim of 1 accept a batch (graph rewrite, ``onnx`` only).

Many exported models fix the batch at 1. Often the graph itself is batch
agnostic and only the declared shapes say 1: renaming the leading dim of the
inputs and outputs to a symbol (``batch``) and dropping the intermediate
``value_info`` shapes makes it batchable. A graph that bakes the batch into a
constant ``Reshape`` target (e.g. ``[1, 2048]`` before a classifier) cannot
be fixed that way; :func:`batch_blockers` names those nodes. A rewrite is only
trusted after a run shows batched outputs equal per-sample outputs (done in
``inferperf.measure.batching``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..fsutil import atomic_path

BATCH_SYMBOL = "batch"


def _constant_values(model: Any) -> dict[str, Any]:
    from onnx import numpy_helper

    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(a.t)
    return values


def batch_blockers(model: Any) -> list[str]:
    """Nodes that hard-code a batch of 1: ``Reshape`` with a constant target shape whose first entry is 1.

    Args:
        model: an ``onnx.ModelProto``.

    Returns:
        One description per blocking node, e.g. ``"Reshape node 'n173' to [1, 2048]"``.
    """
    consts = _constant_values(model)
    out = []
    for node in model.graph.node:
        if node.op_type == "Reshape" and len(node.input) > 1 and node.input[1] in consts:
            target = [int(x) for x in consts[node.input[1]].reshape(-1)]
            if target and target[0] == 1:
                out.append(f"Reshape node '{node.name or node.output[0]}' to {target}")
    return out


def fixed_batch_inputs(model: Any) -> list[str]:
    """Names of graph inputs (not initializers) whose leading dim is the fixed value 1."""
    init = {t.name for t in model.graph.initializer}
    names = []
    for vi in model.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if vi.name not in init and dims and dims[0].HasField("dim_value") and dims[0].dim_value == 1:
            names.append(vi.name)
    return names


def make_batch_dynamic(src: Path, dst: Path) -> list[str]:
    """Write a copy of ``src`` whose fixed-1 leading dims (inputs and outputs) become the symbol ``batch``.

    Intermediate ``value_info`` shapes are dropped so the runtime re-infers them.

    Returns:
        The input names changed.

    Raises:
        ValueError: no input has a fixed leading dim of 1, or a blocker exists (see :func:`batch_blockers`).
    """
    import onnx

    model = onnx.load(str(src))
    names = fixed_batch_inputs(model)
    if not names:
        raise ValueError("no input has a fixed leading dim of 1")
    blockers = batch_blockers(model)
    if blockers:
        raise ValueError("; ".join(blockers))
    for vi in list(model.graph.input) + list(model.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value") and dims[0].dim_value == 1:
            dims[0].Clear()
            dims[0].dim_param = BATCH_SYMBOL
    del model.graph.value_info[:]
    dst.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dst) as tmp:
        onnx.save(model, str(tmp))
    return names
