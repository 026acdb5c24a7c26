"""Accuracy of a variant against fp32: the same eval inputs through both, outputs compared.

Per output (pooled over the N eval inputs): max and mean absolute error (the output's unit),
cosine similarity, SNR in dB (:mod:`inferperf.stats`), the worst per-input cosine, and for
classification-like outputs (float, rank 2 ``[N, classes]``, classes >= 2) top-1 agreement and,
with more than 5 classes, top-5 agreement (fp32's top-1 class among the variant's top 5).
Non-finite values (NaN/Inf) in a variant's output are counted and fail the variant; they are
never compared as numbers. A task metric (``--metric module:function``) scores the variant's
outputs against fp32's: ``fn(reference, candidate) -> float`` (higher is better), fp32 scoring
``fn(reference, reference)``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import stats
from ..errors import RuntimeFailure, UsageError
from .spec import AGREEMENT_METRICS, CLOSENESS_METRICS, Gate

Outputs = list[dict[str, np.ndarray]]


def run_outputs(path: Path, feeds: Sequence[dict[str, np.ndarray]], threads: int | None = None) -> Outputs:
    """Run ``feeds`` through an ONNX Runtime CPU session of ``path``; one ``{output: array}`` per feed.

    Raises:
        RuntimeFailure: the session cannot be created or a run fails (one line).
    """
    import onnxruntime as ort

    from ..backends.ort import _first_line

    so = ort.SessionOptions()
    so.log_severity_level = 4
    if threads:
        so.intra_op_num_threads = threads
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        return [dict(zip(names, sess.run(None, feed), strict=True)) for feed in feeds]
    except Exception as e:
        raise RuntimeFailure(f"{Path(path).name} failed on the eval inputs: {_first_line(e)[:300]}") from e


def load_metric(spec: str) -> Callable[[Outputs, Outputs], float]:
    """Import ``module:function`` (the module must be importable: on ``sys.path`` or installed).

    Raises:
        UsageError: malformed spec, module not importable, or no such callable.
    """
    mod_name, sep, fn_name = spec.partition(":")
    if not sep or not mod_name or not fn_name:
        raise UsageError(f"malformed --metric {spec!r}: use module:function, e.g. mytask.metrics:text_iou")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise UsageError(f"--metric {spec}: cannot import {mod_name!r} ({e}): put it on PYTHONPATH") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise UsageError(f"--metric {spec}: {mod_name} has no function {fn_name!r}")
    return fn


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def compare_output(refs: Sequence[np.ndarray], cands: Sequence[np.ndarray]) -> dict[str, Any]:
    """Agreement of one output over the eval inputs (arrays in input order).

    Returns:
        ``elements``, ``nonfinite`` (count in the candidate), and when that is 0: ``max_abs_error``,
        ``mean_abs_error``, ``cosine``, ``cosine_min_per_input``, ``snr_db`` (None when the outputs are
        identical: infinite), ``identical``; ``top1``/``top5`` where they apply.
    """
    ref_flat = [np.asarray(r) for r in refs]
    cand_flat = [np.asarray(c) for c in cands]
    shapes_r = [r.shape for r in ref_flat]
    shapes_c = [c.shape for c in cand_flat]
    if shapes_r != shapes_c:
        return {"elements": int(sum(r.size for r in ref_flat)), "nonfinite": 0,
                "error": f"shape differs from fp32: {list(shapes_c[0])} vs {list(shapes_r[0])}"}
    nonfinite = sum(stats.nonfinite_count(c) for c in cand_flat)
    out: dict[str, Any] = {"elements": int(sum(r.size for r in ref_flat)), "nonfinite": int(nonfinite),
                           "reference_nonfinite": int(sum(stats.nonfinite_count(r) for r in ref_flat))}
    if nonfinite or out["reference_nonfinite"] or ref_flat[0].dtype.kind not in "fiub":
        return out
    r = np.concatenate([x.astype(np.float64).ravel() for x in ref_flat])
    c = np.concatenate([x.astype(np.float64).ravel() for x in cand_flat])
    snr = stats.snr_db(r, c)
    out.update(
        reference_peak_abs=float(np.max(np.abs(r))) if r.size else 0.0,
        max_abs_error=stats.max_abs_error(r, c),
        mean_abs_error=stats.mean_abs_error(r, c),
        cosine=stats.cosine_similarity(r, c),
        cosine_min_per_input=min(stats.cosine_similarity(a, b) for a, b in zip(ref_flat, cand_flat, strict=True)),
        snr_db=_finite_or_none(snr),
        identical=bool(snr == math.inf),
    )
    first = ref_flat[0]
    if first.dtype.kind == "f" and first.ndim == 2 and first.shape[-1] >= 2:
        rr = np.concatenate(ref_flat, axis=0)
        cc = np.concatenate(cand_flat, axis=0)
        out["top1"] = stats.topk_agreement(rr, cc, 1)
        if first.shape[-1] > 5:
            out["top5"] = stats.topk_agreement(rr, cc, 5)
    return out


def compare(reference: Outputs, candidate: Outputs, metric: str | None = None) -> dict[str, Any]:
    """Compare a variant's outputs with fp32's on the same inputs (lists in input order).

    Returns:
        ``{"n_inputs", "outputs": {name: compare_output(...)}, "nonfinite_count",
        "task_metric": {"name", "reference", "candidate"} | None}``.

    Raises:
        UsageError: the task metric cannot be imported or raises.
    """
    names = list(reference[0]) if reference else []
    outputs = {n: compare_output([r[n] for r in reference], [c[n] for c in candidate]) for n in names}
    doc: dict[str, Any] = {
        "n_inputs": len(reference),
        "outputs": outputs,
        "nonfinite_count": int(sum(o["nonfinite"] for o in outputs.values())),
        "task_metric": None,
    }
    if metric:
        fn = load_metric(metric)
        try:
            doc["task_metric"] = {"name": metric.split(":")[-1], "reference": float(fn(reference, reference)),
                                  "candidate": float(fn(reference, candidate))}
        except Exception as e:
            raise UsageError(f"--metric {metric} raised {type(e).__name__}: {e}") from e
    return doc


def _values(acc: dict[str, Any], metric: str) -> list[tuple[str, float, float]]:
    """(where, reference score, candidate score) of ``metric`` in an accuracy block."""
    found = []
    if metric in AGREEMENT_METRICS:
        for name, o in acc["outputs"].items():
            if metric in o:
                found.append((f"output '{name}'", 1.0, float(o[metric])))
    tm = acc.get("task_metric")
    if tm and metric == tm["name"]:
        found.append(("task metric", tm["reference"], tm["candidate"]))
    return found


def _check_closeness(acc: dict[str, Any], gate: Gate, records: list[dict[str, Any]], reasons: list[str]) -> None:
    """A closeness gate (``max_abs_error``): the error must stay at or under the budget (``abs``: the output's
    unit; ``rel``: percent of the fp32 output's largest magnitude) on every output that has it."""
    checked = 0
    for name, o in acc["outputs"].items():
        if gate.metric not in o:
            continue
        checked += 1
        value = float(o[gate.metric])
        peak = float(o.get("reference_peak_abs") or 0.0)
        limit = gate.amount if gate.kind == "abs" else gate.amount / 100.0 * peak
        ok = value <= limit + 1e-12
        records.append({"gate": gate.describe(), "metric": gate.metric, "where": f"output '{name}'",
                        "reference": peak, "value": value, "limit": limit, "passed": ok, "explicit": gate.explicit})
        if not ok:
            of = f" ({gate.amount:g} % of fp32's peak {peak:.6g})" if gate.kind == "rel" else ""
            reasons.append(f"{gate.metric} {value:.6g} > {limit:.6g}{of} on output '{name}'")
    if not checked and gate.explicit and not acc["nonfinite_count"]:
        reasons.append(f"gate '{gate.describe()}' applies to no output of this model (no numeric output)")


def check_gates(acc: dict[str, Any], gates: Sequence[Gate]) -> tuple[bool, list[dict[str, Any]], list[str]]:
    """Apply the gates (and the non-finite rule) to an accuracy block.

    A gate on a metric that no output has (top-1 on a detector) does not apply; an explicit
    gate that applies nowhere is itself a failure (it could never pass).

    Returns:
        (passed, one record per gate and place checked, one-line reasons for each failure).
    """
    reasons: list[str] = []
    records: list[dict[str, Any]] = []
    for gate in [g for g in gates if g.metric in CLOSENESS_METRICS]:
        _check_closeness(acc, gate, records, reasons)
    gates = [g for g in gates if g.metric not in CLOSENESS_METRICS]
    if acc["nonfinite_count"]:
        reasons.append(f"{acc['nonfinite_count']} non-finite output values (NaN/Inf)")
    for name, o in acc["outputs"].items():
        if "error" in o:
            reasons.append(f"output '{name}': {o['error']}")
    tm = acc.get("task_metric")
    for gate in gates:
        metrics = [gate.metric] if gate.metric != "*" else [*AGREEMENT_METRICS, *([tm["name"]] if tm else [])]
        checked = 0
        for metric in metrics:
            for where, ref, cand in _values(acc, metric):
                checked += 1
                drop = ref - cand
                limit = gate.amount if gate.kind == "abs" else gate.amount / 100.0 * abs(ref)
                ok = drop <= limit + 1e-12
                records.append({"gate": gate.describe(), "metric": metric, "where": where, "reference": ref,
                                "value": cand, "drop": drop, "passed": ok, "explicit": gate.explicit})
                if not ok:
                    floor = ref - limit
                    reasons.append(f"{metric} {cand:.6g} < {floor:.6g} on {where} ({gate.describe()})")
        if not checked and gate.explicit and not acc["nonfinite_count"]:
            reasons.append(f"gate '{gate.describe()}' applies to no output of this model: use cosine or --metric")
    return not reasons, records, reasons
