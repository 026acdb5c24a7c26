"""Compare runtimes on one model: the same inputs, the same measurement, side by side.

``compare_runtimes(model, cfg, ["onnxruntime", "openvino", "torch=m.pt2"])``:

1. Outputs first (fails fast on a runtime that cannot load the model): the
   reference runtime (the first one) runs a few seeded feeds in a fresh
   process; every other runtime runs *those same arrays* in its own process;
   agreement (max/mean abs error, cosine) is computed against the reference.
2. Measurement: each runtime is a case run in its own fresh worker process,
   ``repeat`` interleaved rounds in a shuffled order (:func:`inferperf.measure.runner.run_rounds`),
   integer ranges pinned to the reference's so every runtime draws the same inputs.
3. Each runtime's runs are pooled (:func:`inferperf.measure.runner.aggregate`); the
   agreement lands in each Result's ``metrics.accuracy``.

Backend entries are ``NAME`` or ``NAME=MODEL`` (a per-runtime model: the
``.pt2`` of the same network for torch). A ``package.module:function`` model
runs as is in torch and is exported to ONNX (``torch.onnx.export``,
``dynamo=False``) for ONNX Runtime and OpenVINO.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends import check_available
from ..backends.base import backend_names, canonical_name
from ..backends.torch_spec import is_callable_spec, spec_sha256
from ..config import BenchConfig
from ..errors import UsageError
from ..results.model import Result
from ..zoo import with_default_shapes
from .agreement import agreement
from .outputs import outputs_in_worker
from .runner import aggregate, run_rounds
from .speedup import speedup_of

#: runtimes that read ONNX files
ONNX_RUNTIMES = ("onnxruntime", "openvino")


@dataclass
class RuntimeComparison:
    """What a runtime comparison produced.

    Attributes:
        backends: runtime names in the order asked for; ``backends[0]`` is the reference.
        models: runtime -> the model it ran (path, ``zoo:NAME`` or ``module:function``).
        results: runtime -> its pooled Result (``repeat`` runs).
        agreement: runtime -> agreement with the reference (see :func:`inferperf.measure.agreement.agreement`).
        repeat, shuffle_seed: rounds and the seed of their order.
        model: the model as given (before per-runtime resolution and export).
    """

    backends: list[str]
    models: dict[str, str]
    results: dict[str, Result] = field(default_factory=dict)
    agreement: dict[str, dict[str, Any]] = field(default_factory=dict)
    repeat: int = 1
    shuffle_seed: int = 0
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the Results as JSON-able dicts)."""
        return {
            "model": self.model,
            "backends": self.backends,
            "reference": self.backends[0],
            "models": self.models,
            "repeat": self.repeat,
            "shuffle_seed": self.shuffle_seed,
            "agreement": {k: {kk: vv for kk, vv in v.items() if kk != "per_output"} for k, v in self.agreement.items()},
            "vs_reference": {k: speedup_of(self.results[self.backends[0]], r)
                             for k, r in self.results.items() if k != self.backends[0]},
            "results": {k: r.model_dump(mode="json") for k, r in self.results.items()},
        }


def parse_backends(spec: str | Sequence[str]) -> list[tuple[str, str | None]]:
    """``"onnxruntime,openvino,torch=m.pt2"`` -> [(name, model or None), ...] with names canonical.

    Raises:
        UsageError: an unknown runtime, the null backend, a repeated runtime, or fewer than two.
    """
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    out: list[tuple[str, str | None]] = []
    for item in items:
        name, sep, model = item.partition("=")
        key = canonical_name(name)
        if key not in backend_names() or key == "null":
            known = ", ".join(n for n in backend_names() if n != "null")
            raise UsageError(f"--backend {item!r}: unknown runtime for a comparison (choose from {known})")
        if any(key == k for k, _ in out):
            raise UsageError(f"--backend lists {key!r} twice: give each runtime once")
        out.append((key, model.strip() if sep and model.strip() else None))
    if len(out) < 2:
        raise UsageError("a runtime comparison needs at least two runtimes, e.g. --backend onnxruntime,openvino")
    return out


def _export_for_onnx(spec: str) -> str:
    """The ONNX export of ``module:function``, cached by the spec and its module's source hash."""
    from ..backends.torch_backend import export_onnx
    from ..zoo import cache_dir

    sha, _ = spec_sha256(spec)
    path = cache_dir() / "exports" / f"{hashlib.sha256(sha.encode()).hexdigest()[:16]}.onnx"
    if not path.is_file():
        export_onnx(spec, path)
    return str(path)


def resolve_models(model: str, entries: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    """The model each runtime runs.

    Raises:
        UsageError: torch asked to run an ONNX file with no ``torch=MODEL`` given, or an ONNX runtime
            asked to run a PyTorch file.
    """
    models: dict[str, str] = {}
    for name, own in entries:
        m = own or model
        if name in ONNX_RUNTIMES and is_callable_spec(m):
            m = _export_for_onnx(m)
        elif name in ONNX_RUNTIMES and Path(m).suffix.lower() in (".pt", ".pt2", ".ts", ".jit", ".pth"):
            raise UsageError(f"{name} reads ONNX, not {Path(m).name}: pass the ONNX file as MODEL and"
                             f" the PyTorch one as torch={m}")
        elif name == "torch" and not is_callable_spec(m) and (m.lower().endswith(".onnx") or m.lower().startswith("zoo:")):
            raise UsageError(
                f"torch does not run ONNX ({m}): pass the same network for PyTorch as --backend ...,torch=MODEL.pt2,"
                " or give MODEL as package.module:function (exported to ONNX for the other runtimes)"
            )
        models[name] = m
    return models


def compare_runtimes(
    model: str,
    cfg: BenchConfig,
    backends: str | Sequence[str],
    *,
    repeat: int | None = None,
    agreement_feeds: int = 4,
    command: list[str] | None = None,
    on_result: Callable[[str, int, Result], None] | None = None,
    on_agreement: Callable[[str, dict[str, Any]], None] | None = None,
) -> RuntimeComparison:
    """Measure ``model`` on each runtime in its own worker processes, interleaved, plus output agreement.

    Args:
        model: ONNX path, ``zoo:NAME`` or ``package.module:function``.
        cfg: the case settings shared by every runtime (each runtime reads its own entries of
            ``session.session_config``; see :mod:`inferperf.backends.settings`).
        backends: ``"a,b,c"`` or a list of ``NAME[=MODEL]`` entries; the first is the reference.
        repeat: rounds (default ``cfg.repeat``); each round runs every runtime once, shuffled.
        agreement_feeds: seeded feeds compared across runtimes.
        command: argv recorded in every Result.
        on_result: called as ``on_result(runtime, round, run_result)`` when a run finishes.
        on_agreement: called as ``on_agreement(runtime, agreement)`` once outputs are compared.

    Returns:
        :class:`RuntimeComparison`.

    Raises:
        UsageError / ModelError / BackendUnavailable: a bad runtime list, model or missing extra (exit 2).
        RuntimeFailure / MeasurementError: a runtime failed while running (exit 1).
    """
    entries = parse_backends(backends)
    names = [n for n, _ in entries]
    check_available(names, model)  # a missing extra: one line naming it, before any export or worker
    cfg = with_default_shapes(model, cfg)
    models = resolve_models(model, entries)
    rounds = repeat or cfg.repeat
    seed = cfg.workload.seed
    out = RuntimeComparison(backends=names, models=models, repeat=rounds, shuffle_seed=seed, model=str(model))

    ref_name = names[0]
    ref_cfg = cfg.model_copy(update={"backend": ref_name, "repeat": 1})
    with tempfile.TemporaryDirectory(prefix="inferperf-agreement-") as keep:  # the reference's feeds, then removed
        ref, ref_file = outputs_in_worker(models[ref_name], ref_cfg, agreement_feeds, keep_in=Path(keep))
        outputs = {ref_name: ref}
        for name in names[1:]:
            outputs[name], _ = outputs_in_worker(models[name], cfg.model_copy(update={"backend": name, "repeat": 1}),
                                                 agreement_feeds, feeds_from=ref_file)
    for name in names:
        a = agreement(ref["outputs"], outputs[name]["outputs"])
        a["reference_backend"] = ref_name
        out.agreement[name] = a
        if on_agreement:
            on_agreement(name, a)

    workload = cfg.workload.model_copy(update={"int_ranges": {**{k: tuple(v) for k, v in ref["int_ranges"].items()},
                                                              **cfg.workload.int_ranges}})
    cases = [(models[n], cfg.model_copy(update={"backend": n, "workload": workload, "repeat": 1})) for n in names]

    def done(i: int, r: int, res: Result) -> None:
        if on_result:
            on_result(names[i], r, res)

    runs = run_rounds(cases, rounds, seed=seed, on_result=done, command=command)
    for name, (_, case_cfg), case_runs in zip(names, cases, runs, strict=True):
        pooled = aggregate(case_runs, case_cfg.model_copy(update={"repeat": rounds}))
        a = {k: v for k, v in out.agreement[name].items() if k != "per_output"}
        pooled.metrics.accuracy = {"output_agreement": a}
        pooled.run["comparison"] = {"backends": names, "reference": ref_name, "models": models}
        pooled.kind = "runtimes"
        out.results[name] = pooled
    return out
