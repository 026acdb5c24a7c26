"""Small PyTorch models with seeded weights, for comparing runtimes on the same network.

``seeded_cnn`` returns ``(module, example_inputs)``, the ``module:function``
contract of the torch backend: ``tests.models:seeded_cnn`` runs in PyTorch, and
its ``torch.onnx.export`` runs in ONNX Runtime and OpenVINO. Weights come from
``torch.manual_seed(0)``, so outputs depend on the inputs (unlike the onnx
package's constant-weight light models).
"""

from __future__ import annotations

from typing import Any


def seeded_cnn() -> tuple[Any, tuple[Any, ...]]:
    """Conv-BN-ReLU x2, global pool, linear head: input ``x`` [batch, 3, 32, 32] float32 -> [batch, 10]."""
    import torch
    from torch import nn

    class SmallCnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            )
            self.head = nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.body(x).mean(dim=(2, 3)))

    torch.manual_seed(0)
    m = SmallCnn()
    with torch.no_grad():  # non-trivial BN statistics so they matter in every runtime
        for bn in (m.body[1], m.body[4]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
    return m.eval(), (torch.randn(1, 3, 32, 32),)


def two_input_mlp() -> tuple[Any, dict[str, Any]]:
    """Two named inputs ``a`` [batch, 8] and ``b`` [batch, 8] -> two outputs ([batch, 4], [batch, 8])."""
    import torch
    from torch import nn

    class TwoIn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 4)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.tanh(self.fc(torch.cat([a, b], dim=1))), a * b

    torch.manual_seed(1)
    return TwoIn().eval(), {"a": torch.randn(1, 8), "b": torch.randn(1, 8)}


def seeded_mlp_onnx(path: Any, batch: int | str = "batch", seed: int = 0) -> Any:
    """ONNX MLP with seeded weights: ``x`` [batch, 32] float32 -> ``y`` [batch, 16] (tanh) and ``s`` [batch, 1]
    (row sums of ``x``). ``batch`` may be a symbol or a fixed int (1 = a model whose batch is fixed at 1)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(seed)
    w1, w2 = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m"]), helper.make_node("Tanh", ["m"], ["y"]),
             helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1)]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2 / 8, "w2"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, [batch, 1])], initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    save(model, str(path))
    return path
