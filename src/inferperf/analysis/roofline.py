"""Roofline hint: FLOPs and bytes per heavy node from its shapes, against measured machine peaks (pure).

Estimates are rough (stated in the output): fp32 (4 bytes/element), every input/weight read once and every
output written once (no cache reuse beyond that), Conv as 2*N*Cout*Hout*Wout*(Cin/group)*Kh*Kw FLOPs,
MatMul/Gemm as 2*M*N*K, elementwise and pooling as one FLOP per output element (pooling: per window element).
"""

from __future__ import annotations

from math import prod
from typing import Any

ROUGHNESS = ("rough estimate: fp32, each tensor moved once (no cache reuse), FLOPs from shapes only; "
             "a node near the ridge point may be either")
_ELEMENTWISE = {"Add", "Mul", "Sub", "Div", "Relu", "Sigmoid", "HardSigmoid", "HardSwish", "Clip", "Tanh",
                "LeakyRelu", "BatchNormalization", "Pow", "Sqrt", "Erf", "Gelu", "FusedGelu", "QuickGelu"}
_POOL = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}


def node_cost(op: str, input_shapes: list[list[int]], output_shapes: list[list[int]],
              bytes_per_element: int = 4) -> dict[str, float] | None:
    """FLOPs and bytes moved by one node, or None for ops this estimate does not cover.

    Args:
        op: ONNX/ORT op type (``Conv``, ``FusedConv``, ``MatMul``, ``Gemm``, elementwise, pooling).
        input_shapes: shapes of the inputs in order (Conv: X, W[, B]; MatMul: A, B).
        output_shapes: shapes of the outputs.
    """
    if not output_shapes or not input_shapes:
        return None
    out = output_shapes[0]
    moved = bytes_per_element * (sum(prod(s) for s in input_shapes) + sum(prod(s) for s in output_shapes))
    if op in ("Conv", "FusedConv", "NhwcFusedConv", "ConvTranspose") and len(input_shapes) >= 2:
        w = input_shapes[1]
        flops = 2.0 * prod(out) * prod(w[1:])  # per output element: Cin/group * Kh * Kw MACs
    elif op in ("MatMul", "FusedMatMul", "Gemm") and len(input_shapes) >= 2:
        k = input_shapes[0][-1] if input_shapes[0] else 1
        flops = 2.0 * prod(out) * k
    elif op in _ELEMENTWISE:
        flops = float(prod(out))
    elif op in _POOL and input_shapes:
        flops = float(prod(input_shapes[0]))
    else:
        return None
    return {"flops": flops, "bytes": float(moved), "intensity": flops / moved if moved else 0.0}


def classify(nodes: list[dict[str, Any]], peak_flops_per_s: float, peak_bytes_per_s: float) -> list[dict[str, Any]]:
    """Add ``flops``, ``bytes``, ``intensity`` (FLOP/byte), ``bound`` (compute or memory, by the ridge point
    peak_flops/peak_bytes) and ``attained_gflops_per_s`` to each node dict (``op``, ``input_shapes``,
    ``output_shapes``, ``mean_ms``) that :func:`node_cost` covers; others are left out.
    """
    ridge = peak_flops_per_s / peak_bytes_per_s if peak_bytes_per_s > 0 else float("inf")
    out = []
    for n in nodes:
        c = node_cost(n["op"], n.get("input_shapes", []), n.get("output_shapes", []))
        if c is None:
            continue
        secs = n.get("mean_ms", 0.0) / 1e3
        out.append({**n, **c, "bound": "compute" if c["intensity"] >= ridge else "memory",
                    "attained_gflops_per_s": c["flops"] / secs / 1e9 if secs > 0 else None,
                    "roof_gflops_per_s": min(peak_flops_per_s, c["intensity"] * peak_bytes_per_s) / 1e9})
    return out
