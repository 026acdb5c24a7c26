"""Rebuild this example model repository (``python examples/repository/build.py``; the files are committed).

Three small models with seeded weights, served by ``inferperf serve --model-repository examples/repository``:

- ``mlp`` (inferperf layout): ``mlp/model.onnx`` (x [batch, 32] FP32 -> y [batch, 16], s [batch, 1]) and
  ``mlp/model.yaml`` (dynamic batching, at most 8 rows a call, 1 ms queue delay, one intra-op thread).
- ``scale`` (inferperf layout): ``scale/model.onnx`` (x [batch, 4] FP32 -> y = 2x) and ``scale/model.yaml``.
- ``mlp_triton`` (Triton's layout): ``mlp_triton/config.pbtxt`` and two versions ``1/model.onnx``,
  ``2/model.onnx`` (other seeds), version policy ``all``; the config also sets a field inferperf ignores
  (``model_warmup``), which the server names in a warning line.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/models.py holds the seeded MLP builder

MLP_YAML = """\
# inferperf's settings-file format (as `inferperf serve --config`): BenchConfig fields plus serve:
session:
  intra_op_num_threads: 1
serve:
  max_batch_size: 8
  max_queue_delay_us: 1000
"""

SCALE_YAML = """\
session:
  intra_op_num_threads: 1
serve:
  max_batch_size: 4
"""

TRITON_CONFIG = """\
name: "mlp_triton"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 32 ] } ]
output [
  { name: "y" data_type: TYPE_FP32 dims: [ 16 ] },
  { name: "s" data_type: TYPE_FP32 dims: [ 1 ] }
]
dynamic_batching { max_queue_delay_microseconds: 500 preferred_batch_size: [ 4 ] }
instance_group [ { count: 2 kind: KIND_CPU } ]
version_policy: { all: { } }
model_warmup [ { name: "zeros" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 32 ] zero_data: true } } } ]
"""


def scale_onnx(path: Path) -> Path:
    """x [batch, 4] FP32 -> y = 2 * x."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    two = numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two")
    g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["y"])], "scale",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], initializer=[two])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    save(model, str(path))
    return path


def main() -> None:
    """Write every file of the example repository next to this script."""
    from tests.models import seeded_mlp_onnx

    for folder in ("mlp", "scale", "mlp_triton/1", "mlp_triton/2"):
        (HERE / folder).mkdir(parents=True, exist_ok=True)
    seeded_mlp_onnx(HERE / "mlp" / "model.onnx", seed=0)
    (HERE / "mlp" / "model.yaml").write_text(MLP_YAML)
    scale_onnx(HERE / "scale" / "model.onnx")
    (HERE / "scale" / "model.yaml").write_text(SCALE_YAML)
    (HERE / "mlp_triton" / "config.pbtxt").write_text(TRITON_CONFIG)
    for version in (1, 2):
        seeded_mlp_onnx(HERE / "mlp_triton" / str(version) / "model.onnx", seed=version)
    print(f"wrote {HERE}")


if __name__ == "__main__":
    main()
