"""Batch a fixed-batch model for ``--batch-size N``: rewrite, then verify by a run, or refuse naming why.

Verification (the rewrite is only used if it passes): N distinct seeded
inputs run once as one batch and once one by one through the same backend;
every output must agree within ``rtol=1e-4, atol=1e-5`` (float32 GEMM
blocking may change with the batch; the bounds allow that and nothing more).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..backends.base import create_backend
from ..config import SessionOptions
from ..errors import UsageError
from ..workload.batching import batch_blockers, fixed_batch_inputs, make_batch_dynamic
from ..workload.data import build_workload
from ..zoo import cache_dir

RTOL, ATOL = 1e-4, 1e-5


def needs_batching(model_path: Path, batch_size: int | None) -> bool:
    """True when ``batch_size`` > 1 meets an input whose leading dim is fixed at 1."""
    if not batch_size or batch_size <= 1:
        return False
    import onnx

    return bool(fixed_batch_inputs(onnx.load(str(model_path), load_external_data=False)))


def make_batchable(model_path: Path, sha256: str, batch_size: int, backend: str, session: SessionOptions) -> tuple[Path, str]:
    """Return a verified batchable copy of ``model_path`` (cached by the source's sha256) and how it was made.

    Raises:
        UsageError: a blocker node hard-codes batch 1, the rewritten model does not run at this
            batch, or batched outputs differ from per-sample outputs (each names why).
    """
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    blockers = batch_blockers(model)
    if blockers:
        raise UsageError(
            f"--batch-size {batch_size}: {model_path.name} fixes its batch at 1 in {blockers[0]}"
            f"{f' (and {len(blockers) - 1} more)' if len(blockers) > 1 else ''}: re-export it with a dynamic batch"
            " dim, or use --batch-size 1 with --concurrency for parallel queries"
        )
    dst = cache_dir() / "derived" / f"{sha256[:16]}-dynbatch.onnx"
    if not dst.exists():
        make_batch_dynamic(model_path, dst)
    b = create_backend(backend, session)
    try:
        b.load(dst)
        inputs = b.inputs()
        batched = build_workload(inputs, batch_size=batch_size, pool_size=1, seed=12345).feeds[0]
        run = b.runner()
        together = run(batched)
        singles = [run({k: v[i : i + 1] for k, v in batched.items()}) for i in range(batch_size)]
    except UsageError:
        raise
    except Exception as e:  # the runtime refused the rewritten graph at this batch
        dst.unlink(missing_ok=True)
        raise UsageError(
            f"--batch-size {batch_size}: {model_path.name} has a fixed batch of 1 and does not run batched"
            f" ({type(e).__name__}: {str(e).splitlines()[0][:200]}): re-export it with a dynamic batch dim"
        ) from e
    finally:
        b.close()
    worst = 0.0
    for j, out in enumerate(together):
        per = np.concatenate([np.asarray(s[j]) for s in singles], axis=0)
        out = np.asarray(out)
        if out.shape != per.shape or not np.allclose(out, per, rtol=RTOL, atol=ATOL):
            dst.unlink(missing_ok=True)
            raise UsageError(
                f"--batch-size {batch_size}: {model_path.name} made batchable gives batched outputs that differ"
                f" from per-sample outputs (output {j}): its graph mixes samples; re-export with a dynamic batch"
            )
        if out.size:
            worst = max(worst, float(np.max(np.abs(out.astype(np.float64) - per.astype(np.float64)))))
    how = (
        f"made-dynamic: leading dim 1 -> '{'batch'}' in a cached copy of {model_path.name}; verified at batch"
        f" {batch_size}: batched outputs equal per-sample outputs (max abs diff {worst:.3g})"
    )
    return dst, how
