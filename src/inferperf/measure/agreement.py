"""Output agreement between two runtimes on the same inputs: max/mean absolute error and cosine.

Built on :mod:`inferperf.stats`'s agreement functions (shared with optimize). Outputs are matched by position (PyTorch has no
output names); a shape or count mismatch is reported, not raised. A runtime
"agrees" when every output's max absolute error is <= ``atol + rtol * max|reference|``
and its cosine similarity is >= ``min_cosine`` (the cosine is waived when every error is
below ``atol``: for outputs of tiny magnitude it measures noise).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import stats


def compare_arrays(ref: np.ndarray, got: np.ndarray) -> dict[str, Any]:
    """Errors of ``got`` against ``ref`` (same shape), computed in float64 by :mod:`inferperf.stats`.

    Returns:
        ``max_abs_error``, ``mean_abs_error``, ``cosine`` (1.0 for two all-zero arrays), ``snr_db``,
        ``ref_max_abs``; or ``{"mismatch": reason}`` when shapes differ or ``got`` has NaN/Inf
        where ``ref`` has none.
    """
    if ref.shape != got.shape:
        return {"mismatch": f"shape {list(got.shape)} vs reference {list(ref.shape)}"}
    bad = stats.nonfinite_count(got) - stats.nonfinite_count(ref)
    if bad > 0:
        return {"mismatch": f"{bad} NaN/Inf values the reference does not have"}
    a = np.nan_to_num(np.asarray(ref, dtype=np.float64))
    b = np.nan_to_num(np.asarray(got, dtype=np.float64))
    return {
        "max_abs_error": stats.max_abs_error(a, b),
        "mean_abs_error": stats.mean_abs_error(a, b),
        "cosine": stats.cosine_similarity(a, b),
        "snr_db": stats.snr_db(a, b),
        "ref_max_abs": float(np.abs(a).max()) if a.size else 0.0,
    }


def agreement(
    reference: Sequence[Sequence[np.ndarray]],
    candidate: Sequence[Sequence[np.ndarray]],
    rtol: float = 1e-3,
    atol: float = 1e-5,
    min_cosine: float = 0.999,
) -> dict[str, Any]:
    """Agreement of a candidate runtime with the reference over several feeds.

    Args:
        reference, candidate: per feed, the list of output arrays (same feeds, same order).
        rtol: max abs error allowed, relative to the reference's largest magnitude.
        atol: absolute floor of the allowed error.
        min_cosine: the lowest acceptable cosine similarity per output.

    Returns:
        ``feeds``, ``outputs``, ``max_abs_error`` (max over feeds and outputs), ``mean_abs_error``
        (mean over feeds and outputs), ``cosine_min``, ``agrees`` (bool), ``per_output`` (list of
        dicts), ``mismatch`` (reason or None), and the tolerances used.
    """
    per_output: list[dict[str, Any]] = []
    mismatch = None
    for f, (ref_outs, got_outs) in enumerate(zip(reference, candidate, strict=False)):
        if len(ref_outs) != len(got_outs):
            mismatch = f"{len(got_outs)} outputs vs reference {len(ref_outs)}"
        for k, (r, g) in enumerate(zip(ref_outs, got_outs, strict=False)):
            c = compare_arrays(np.asarray(r), np.asarray(g))
            if "mismatch" in c:
                mismatch = mismatch or f"output {k}: {c['mismatch']}"
                continue
            per_output.append({"feed": f, "output": k, **c})
    out: dict[str, Any] = {
        "feeds": min(len(reference), len(candidate)),
        "outputs": max((len(x) for x in reference), default=0),
        "rtol": rtol,
        "atol": atol,
        "min_cosine": min_cosine,
        "mismatch": mismatch,
    }
    if not per_output:
        out.update(max_abs_error=None, mean_abs_error=None, cosine_min=None, agrees=False, per_output=[])
        return out
    max_abs = max(p["max_abs_error"] for p in per_output)
    # np.allclose-style bound on the worst element; the cosine is required too unless the errors are all below
    # atol (outputs of tiny magnitude, e.g. a near-empty probability map, make the cosine mostly noise)
    ok = mismatch is None and all(
        p["max_abs_error"] <= atol + rtol * p["ref_max_abs"] and (p["cosine"] >= min_cosine or p["max_abs_error"] <= atol)
        for p in per_output
    )
    out.update(
        max_abs_error=max_abs,
        mean_abs_error=float(np.mean([p["mean_abs_error"] for p in per_output])),
        cosine_min=min(p["cosine"] for p in per_output),
        agrees=bool(ok),
        per_output=per_output,
    )
    return out
