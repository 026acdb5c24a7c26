"""The served signature: input/output shapes for the metadata and Triton's ``max_batch_size``, from the model's
declared inputs and the ``--shape`` / ``--dim`` / ``--max-batch-size`` flags. Pure: no runtime, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from ..config import BenchConfig
from ..errors import UsageError
from ..results.model import TensorInfo
from ..workload.shapes import is_symbolic
from .options import ServeOptions


def meta_shape(info: TensorInfo, batched: bool, given: Sequence[int] | None, dims: dict[str, int]) -> tuple[int, ...]:
    """Declared dims with free ones as -1, fixed by ``--shape`` (``given``) or ``--dim``; axis 0 is -1 if ``batched``."""
    out = []
    for axis, d in enumerate(info.shape):
        if axis == 0 and batched:
            out.append(-1)
        elif given is not None:
            out.append(int(given[axis]))
        elif not is_symbolic(d):
            out.append(int(d))  # type: ignore[arg-type]
        elif isinstance(d, str) and d in dims:
            out.append(int(dims[d]))
        else:
            out.append(-1)
    return tuple(out)


def given_shapes(inputs: list[TensorInfo], cfg: BenchConfig) -> dict[str, list[int]]:
    """``--shape`` values by input name, checked against the inputs (names, rank, fixed dims)."""
    shapes = dict(cfg.workload.shapes)
    names = [i.name for i in inputs]
    if "" in shapes:
        if len(inputs) != 1:
            raise UsageError(f"--shape without an input name needs a model with one input; this one has {names}")
        shapes[names[0]] = shapes.pop("")
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise UsageError(f"--shape names unknown input(s) {unknown}: the model's inputs are {names}")
    for info in inputs:
        given = shapes.get(info.name)
        if given is None:
            continue
        if len(given) != len(info.shape):
            raise UsageError(f"--shape {info.name} has rank {len(given)} but the input has rank {len(info.shape)}")
        for axis, (want, got) in enumerate(zip(info.shape, given, strict=True)):
            if not is_symbolic(want) and want != got:
                raise UsageError(f"--shape {info.name} contradicts fixed dim {axis} (= {want}): keep {want} there")
    return shapes


def served_max_batch_size(inputs: list[TensorInfo], options: ServeOptions) -> int:
    """Triton's ``max_batch_size`` for these inputs (auto: 4 when every leading dim is free, else 0).

    Raises:
        UsageError: a batch size asked of a model whose leading dim is fixed (other than 1 at 1 row),
            or dynamic batching without a batch dim.
    """
    batchable = bool(inputs) and all(i.shape and is_symbolic(i.shape[0]) for i in inputs)
    mbs = options.resolved_max_batch_size(batchable)
    if mbs > 0 and not batchable:
        fixed = [i for i in inputs if not i.shape or not (is_symbolic(i.shape[0]) or (mbs == 1 and i.shape[0] == 1))]
        if fixed:
            lead = fixed[0].shape[0] if fixed[0].shape else "none"
            raise UsageError(
                f"--max-batch-size {mbs}: input '{fixed[0].name}' has leading dim {lead}, not a free batch dim:"
                " serve it with --max-batch-size 0 (requests passed as they come)"
            )
    if options.dynamic_batching and mbs == 0:
        raise UsageError(
            "dynamic batching needs a batch dimension and this model has none: drop the batching flags"
            " or re-export it with a dynamic leading dim"
        )
    return mbs
