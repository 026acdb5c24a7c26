""":func:`optimize`: build variants of a model, check their accuracy against fp32, measure them.

Flow: inspect the fp32 model -> load eval (and calibration) inputs -> build each variant
(:mod:`.convert`) -> run fp32 and every variant on the same eval inputs (:mod:`.accuracy`) ->
optional sensitivity ranking and auto-exclusion (:mod:`.sensitivity`) -> measure fp32 and every
variant that runs, each in its own worker process with bench's code, in interleaved shuffled
rounds (:func:`inferperf.measure.runner.run_rounds`, pooled by ``aggregate``) -> verdicts
(:mod:`.verdict`). Writes into ``output``: each variant file ``STEM.VARIANT.onnx``, one Result
per variant ``STEM.VARIANT.result.json`` (fp32 included; ``model.variant`` names it,
``metrics.accuracy`` holds its accuracy block), ``sensitivity.json`` when asked, and
``optimize-summary.json`` (the table's rows).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import BenchConfig
from ..errors import InferperfError, UsageError
from ..fsutil import atomic_write_text
from ..results.io import save
from ..results.model import Result
from ..system import collect_system
from ..workload.signature import check_model_file
from ..zoo import resolve as zoo_resolve
from .accuracy import check_gates, compare, run_outputs
from .convert import (
    Built, ConversionFailed, convert_fp16, normalize_source, optimize_offline, preprocess, quantize_int8_dynamic, quantize_int8_static,
    recommended_quant, timed_build,
)
from .data import Inputs, load_inputs
from .spec import REFERENCE, OptimizeOptions, OptimizeSpec, check_gate_metrics
from .report import OptimizeReport, VariantReport, summary_doc
from .verdict import speedup, verdict

__all__ = ["OptimizeReport", "VariantReport", "optimize", "run_optimize", "summary_doc"]


def _inputs_of(path: Path) -> list[Any]:
    from ..backends.ort import OnnxRuntimeBackend
    from ..config import SessionOptions

    b = OnnxRuntimeBackend(SessionOptions())
    b.load(path)
    try:
        return b.inputs()
    finally:
        b.close()


def _accuracy(ref_outs: Any, path: Path, inputs: Inputs, opts: OptimizeOptions, threads: int) -> dict[str, Any]:
    acc = compare(ref_outs, run_outputs(path, inputs.feeds, threads), opts.metric)
    passed, records, reasons = check_gates(acc, opts.effective_gates(inputs.predictive))
    acc.update(data_source=inputs.source, predictive=inputs.predictive, gates=records, passed=passed, reasons=reasons,
               judged_by="accuracy gates" if inputs.predictive or opts.gates else
               "output closeness (cosine, max abs error): synthetic inputs; top-1 on them is not an accuracy")
    return acc


def _measure(cases: Sequence[tuple[str, BenchConfig]], command: list[str] | None,
             progress: Callable[[str], None]) -> list[Result | str]:
    """Interleaved rounds over all cases; if one case fails, each case is measured alone to name it."""
    from ..measure.runner import aggregate, run_rounds

    if not cases:
        return []
    cfg0 = cases[0][1]

    def on_result(i: int, r: int, res: Result) -> None:
        progress(f"measured {Path(cases[i][0]).name} round {r + 1}/{cfg0.repeat}:"
                 f" {res.metrics.throughput.queries_per_s:.1f} queries/s")

    try:
        runs = run_rounds(cases, cfg0.repeat, seed=cfg0.workload.seed, on_result=on_result, command=command)
        return [aggregate(r, cases[i][1]) for i, r in enumerate(runs)]
    except InferperfError:
        out: list[Result | str] = []
        for case in cases:
            try:
                out.append(aggregate(run_rounds([case], case[1].repeat, seed=cfg0.workload.seed, command=command)[0],
                                     case[1]))
            except InferperfError as e:
                out.append(f"measurement failed: {e}")
        return out


@dataclass
class _Job:
    """What every step of :func:`optimize` shares: the options, the fp32 source and its eval/calibration inputs."""

    opts: OptimizeOptions
    say: Callable[[str], None]
    src: Path
    out: Path
    isa: list[str]
    threads: int
    eval_in: Inputs
    calib: Inputs | None
    ref_outs: Any
    notes: list[str] = field(default_factory=list)
    pre: Path | None = None  # the quantization pre-processed model (int8 variants only)
    quant: dict[str, dict[str, Any]] = field(default_factory=dict)  # variant -> its quantization settings

    @property
    def stem(self) -> str:
        return self.src.stem

    def accuracy(self, path: Path) -> dict[str, Any]:
        return _accuracy(self.ref_outs, path, self.eval_in, self.opts, self.threads)

    def calib_feeds(self) -> list[Any]:
        return self.calib.feeds if self.calib else []


def _prepare(model: str | Path, opts: OptimizeOptions, output: Path, say: Callable[[str], None]) -> _Job:
    """Resolve the fp32 model, load the eval (and calibration) inputs, and run fp32 on the eval inputs."""
    src = check_model_file(zoo_resolve(str(model)))
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    system = collect_system()
    w = opts.bench.workload
    inputs = _inputs_of(src)
    notes: list[str] = []
    load_kw = dict(shapes=w.shapes, dims=w.dims, batch_size=w.batch_size, prep=opts.image)
    eval_in = load_inputs(opts.eval_data, inputs, n=opts.eval_samples, seed=w.seed, flag="--eval-data", **load_kw)
    if not eval_in.predictive:
        notes.append("accuracy measured on synthetic inputs: NOT predictive of real data (on noise a detector's"
                     " output is nearly all zeros and every variant looks alike); pass --eval-data")
        if not opts.gates:
            notes.append("on synthetic inputs the variants are judged by output closeness (cosine >= 0.99, max abs"
                         " error <= 10 % of fp32's peak); top-1 agreement is shown but not gated: on noise the"
                         " classes nearly tie and rounding flips them, so it is not an accuracy")
    calib = None
    if "int8-static" in opts.variants:
        calib = load_inputs(opts.calibration_data, inputs, n=opts.calibration_samples, seed=w.seed + 1,
                            flag="--calibration-data", **load_kw)
        if not calib.predictive:
            notes.append("int8-static calibrated on synthetic inputs: real-data calibration usually gives other"
                         " scales (pass --calibration-data)")
    say(f"eval inputs: {len(eval_in.feeds)} from {eval_in.source}")
    threads = max(1, system.effective_cpus)
    return _Job(opts=opts, say=say, src=src, out=out, isa=list(system.isa_flags), threads=threads, eval_in=eval_in,
                calib=calib, ref_outs=run_outputs(src, eval_in.feeds, threads), notes=notes)


def _build_int8(job: _Job, name: str, dst: Path, pre_error: str | None, pre_notes: list[str]) -> Built:
    static = name == "int8-static"
    opts = job.opts
    s, qnotes = recommended_quant(opts.quant, job.isa, static)
    job.quant[name] = s
    if job.pre is None:
        b = Built(name, None, error=pre_error or "pre-processing failed")
    elif static:
        b = timed_build(name, quantize_int8_static, job.pre, dst, s, opts.quant, job.calib_feeds())
    else:
        b = timed_build(name, quantize_int8_dynamic, job.pre, dst, s, opts.quant)
    b.settings = {**s, "exclude_op_types": opts.quant.exclude_op_types, "exclude_nodes": opts.quant.exclude_nodes,
                  **b.settings}
    if static:
        b.settings["calibration_source"] = job.calib.source if job.calib else None
        b.settings["calibration_samples"] = len(job.calib_feeds())
    b.notes += pre_notes + qnotes
    return b


def _build_variants(job: _Job, work: Path) -> list[VariantReport]:
    """fp32 (the file as given) and one row per variant asked for; a failed build is a row with its error."""
    opts = job.opts
    # converters read a normalized copy; the fp32 reference is measured from the file as given
    conv_src, norm_notes = normalize_source(job.src, work / f"{job.stem}.normalized.onnx")
    job.notes.extend(norm_notes)
    pre_error: str | None = None
    pre_notes: list[str] = []
    if any(v.startswith("int8") for v in opts.variants):
        job.say("quantization pre-processing (shape inference, basic graph optimization)")
        try:
            job.pre, pre_notes = preprocess(conv_src, work / f"{job.stem}.pre.onnx")
        except ConversionFailed as e:
            pre_error = str(e)
    rows = [VariantReport(REFERENCE, job.src, Built(REFERENCE, job.src))]
    for name in opts.variants:
        dst = job.out / f"{job.stem}.{name}.onnx"
        job.say(f"building {name}")
        if name == "fp16":
            b = timed_build(name, convert_fp16, conv_src, dst, opts.keep_fp32)
        elif name.startswith("int8"):
            b = _build_int8(job, name, dst, pre_error, pre_notes)
        else:
            level = name.split("-", 1)[1]
            b = timed_build(name, optimize_offline, job.src, dst, level)
            b.settings = {"graph_optimization_level": level, "measured_with_online_optimization": "disable"}
            if level == "all":
                b.notes.append("ort-all includes layout transforms for this CPU: the file may not suit another")
        rows.append(VariantReport(name, b.path, b))
    return rows


def _check_accuracy(job: _Job, rows: Sequence[VariantReport]) -> None:
    """Each built variant against fp32 on the eval inputs; one that fails to run becomes FAILED (file renamed)."""
    for row in rows[1:]:
        if row.path is None:
            continue
        job.say(f"accuracy of {row.name} on {len(job.eval_in.feeds)} inputs")
        try:
            row.accuracy = job.accuracy(row.path)
        except InferperfError as e:
            if isinstance(e, UsageError):
                raise
            row.build.error = str(e)
            failed = row.path.with_name(row.path.name.replace(".onnx", ".failed.onnx"))
            os.replace(row.path, failed)
            row.path = None


def _sensitivity(job: _Job, rows: list[VariantReport]) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
    """Rank int8-static's tensors (``sensitivity.json``) and, with auto-exclude, rebuild until the gates pass.

    Returns:
        (the ranking or None, the auto-exclusion record or None); a rescued model is appended to ``rows``.
    """
    opts = job.opts
    if not (opts.sensitivity or opts.auto_exclude):
        return None, None
    static_row = next((r for r in rows if r.name == "int8-static" and r.path is not None), None)
    if static_row is None or static_row.path is None or job.pre is None:
        job.notes.append("sensitivity needs a working int8-static variant: add it to --variants")
        return None, None
    from .sensitivity import auto_exclude, rank_nodes

    job.say("sensitivity: comparing fp32 and int8 activations per tensor")
    ranking = rank_nodes(job.pre, static_row.path, job.eval_in.feeds[:4])
    atomic_write_text(job.out / "sensitivity.json", json.dumps(ranking, indent=1))
    if not (opts.auto_exclude and static_row.accuracy):
        return ranking, None
    if static_row.accuracy["passed"]:
        job.notes.append("auto-exclude: int8-static already passes the gates; nothing excluded")
        return ranking, None
    dst = job.out / f"{job.stem}.int8-static-auto.onnx"
    pre, s = job.pre, job.quant["int8-static"]

    def build(excluded: list[str]) -> Path | None:
        job.say(f"auto-exclude: keeping {len(excluded)} node(s) in fp32")
        try:
            return quantize_int8_static(pre, dst, s, opts.quant, job.calib_feeds(), excluded)
        except ConversionFailed:
            return None

    path, excluded, attempts = auto_exclude(ranking, build, lambda p: bool(job.accuracy(p)["passed"]),
                                            opts.max_auto_exclude)
    auto = {"passed": path is not None, "excluded_nodes": excluded, "attempts": attempts}
    if path is None:
        dst.unlink(missing_ok=True)
        job.notes.append(f"auto-exclude: no passing model with up to {opts.max_auto_exclude} node(s) in fp32")
    else:
        b = Built("int8-static-auto", path, settings={**static_row.build.settings, "auto_excluded_nodes": excluded})
        row = VariantReport("int8-static-auto", path, b)
        row.accuracy = job.accuracy(path)
        rows.append(row)
    return ranking, auto


def _measure_rows(job: _Job, rows: Sequence[VariantReport], command: list[str] | None) -> Result | None:
    """Measure fp32 and every variant that runs, interleaved; set each row's ``result`` (or its error).

    Returns:
        fp32's pooled Result (None when not measured or it failed).
    """
    opts = job.opts
    measured = [r for r in rows if r.path is not None] if opts.measure else []
    cases = []
    for r in measured:
        cfg = opts.bench
        if r.name.startswith("ort-"):
            cfg = cfg.model_copy(update={"session": cfg.session.model_copy(update={"graph_optimization_level": "disable"})})
        cases.append((str(r.path), cfg))
    if not opts.measure:
        job.notes.append("speed not measured (--no-measure)")
    else:
        job.say(f"measuring {len(cases)} model(s), {opts.bench.repeat} interleaved round(s), each run in a fresh"
                " process")
    ref_result: Result | None = None
    for r, res in zip(measured, _measure(cases, command, job.say), strict=True):
        if isinstance(res, str):
            r.build.error = res
            continue
        r.result = res
        if r.name == REFERENCE:
            ref_result = res
    return ref_result


def _judge_and_save(job: _Job, rows: Sequence[VariantReport], ref_result: Result | None) -> None:
    """Fill each measured Result (variant, accuracy, build), give every row its verdict, write the Results."""
    ev = job.eval_in
    for r in rows:
        if r.result is not None:
            r.result.model.variant = r.name
            r.result.model.zoo_name = r.result.model.zoo_name if r.name == REFERENCE else None
            block = r.accuracy if r.name != REFERENCE else {"reference": True, "n_inputs": len(ev.feeds),
                                                             "data_source": ev.source, "predictive": ev.predictive}
            r.result.metrics.accuracy = {**(block or {}), "build": {"settings": r.build.settings,
                                                                    "build_s": r.build.build_s}}
            r.result.notes = list(dict.fromkeys(r.result.notes + r.build.notes))
            if ref_result is not None and r.name != REFERENCE:
                r.speed = speedup(ref_result, r.result)
        r.verdict, r.reasons = verdict(r.name, r.speed, r.accuracy, job.isa, r.build.error, r.build.settings)
        if r.result is not None:
            r.result.kind = "optimize"
            r.result.run["optimize"] = {"verdict": r.verdict, "reasons": r.reasons, "speedup": r.speed}
            r.result_path = save(r.result, job.out / f"{job.stem}.{r.name}.result.json")


def optimize(
    model: str | Path,
    options: OptimizeOptions | None = None,
    *,
    output: Path,
    command: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> OptimizeReport:
    """Build, check and measure the variants of ``model`` against fp32.

    Steps: prepare (model, inputs, fp32 outputs) -> build variants -> check accuracy -> sensitivity and
    auto-exclusion (when asked) -> measure (interleaved rounds) -> verdicts and Results -> summary.

    Args:
        model: an ONNX file or ``zoo:NAME`` (fp32).
        options: variants, conversion settings, data and gates (:class:`OptimizeOptions`).
        output: folder for variant files, Results and the summary (created).
        command: argv recorded in each Result.
        progress: called with one line per stage (the CLI prints them to stderr).

    Returns:
        An :class:`OptimizeReport`; rows in order fp32, then the variants asked for.

    Raises:
        UsageError / ModelError: bad model, data, shapes, metric or exclusions (exit 2).
        RuntimeFailure: fp32 itself fails on the eval inputs (exit 1).
        A variant that fails to build, load or run does not raise: its row says FAILED and why.
    """
    opts = options or OptimizeOptions()
    check_gate_metrics(opts)
    job = _prepare(model, opts, output, progress or (lambda _m: None))
    with tempfile.TemporaryDirectory(prefix="inferperf-opt-") as work:
        rows = _build_variants(job, Path(work))
        _check_accuracy(job, rows)
        sens, auto = _sensitivity(job, rows)
    ref_result = _measure_rows(job, rows, command)
    _judge_and_save(job, rows, ref_result)
    rescued = auto is not None and auto["passed"]
    gate_failed = any(r.verdict == "REJECT" and not (rescued and r.name == "int8-static") for r in rows)
    report = OptimizeReport(model=str(model), output=job.out, variants=rows, notes=job.notes, sensitivity=sens,
                            auto_exclude=auto, gate_failed=gate_failed,
                            gates_explicit=bool(opts.gates) or opts.fail_on_gate, isa_flags=job.isa)
    atomic_write_text(job.out / "optimize-summary.json", json.dumps(summary_doc(report), indent=1))
    return report


def run_optimize(spec: OptimizeSpec, *, command: list[str] | None = None,
                 progress: Callable[[str], None] | None = None) -> OptimizeReport:
    """Check ``spec`` and build, check and measure its variants (:func:`optimize`).

    Raises:
        UsageError: as :meth:`OptimizeSpec.check` and :func:`optimize`.
        ModelError, RuntimeFailure: as :func:`optimize`.
    """
    spec.check()
    assert isinstance(spec.options, OptimizeOptions)
    return optimize(spec.model, spec.options, output=spec.output, command=command, progress=progress)
