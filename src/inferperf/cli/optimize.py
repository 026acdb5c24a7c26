"""``inferperf optimize``: fp16 / int8 / offline-optimized variants, accuracy against fp32, speed-up, verdicts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import GateFailed, UsageError
from . import app
from .options import (BatchSize, Debug, Dim, DurationS, IntraOpThreads, Iterations, MaxDurationS, Shape, Warmup,
    build_config, config_flags)

Opt = typer.Option


def _words(text: str | None) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


def _floats(text: str | None, flag: str) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"malformed {flag} {text!r}: use comma-separated numbers, e.g. 0.485,0.456,0.406") from None


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _accuracy_cell(acc: dict[str, Any] | None) -> str:
    if not acc:
        return "-"
    if acc.get("reference"):
        return "reference"
    parts = []
    if acc.get("nonfinite_count"):
        parts.append(f"[red]{acc['nonfinite_count']} NaN/Inf[/red]")
    for name, o in acc["outputs"].items():
        if "cosine" not in o:
            continue
        snr = "inf" if o.get("identical") else f"{o['snr_db']:.1f}" if o.get("snr_db") is not None else "-"
        cell = f"{name}: cos {o['cosine']:.4f} snr {snr} dB max|e| {o['max_abs_error']:.3g}"
        synthetic = "" if acc.get("predictive", True) else " (synthetic: not an accuracy)"
        if "top1" in o:
            cell += f" top1 {o['top1']:.1%}"
        if "top5" in o:
            cell += f" top5 {o['top5']:.1%}"
        if "top1" in o or "top5" in o:
            cell += synthetic
        parts.append(cell)
    tm = acc.get("task_metric")
    if tm:
        parts.append(f"{tm['name']} {tm['candidate']:.4g} (fp32 {tm['reference']:.4g})")
    if not acc.get("predictive", True):
        parts.append("[yellow]synthetic data: judged by closeness, not predictive[/yellow]")
    return "\n".join(parts)


def report_table(report: Any) -> Table:
    """variant, size, cold start, p50/p99, throughput with CI, speed-up vs fp32, accuracy, verdict."""
    from ..measure.speedup import format_ci
    from ..optimize.verdict import format_speedup

    t = Table(title=f"inferperf optimize: {report.model}", title_justify="left", show_lines=True)
    for col in ("variant", "size", "cold start ms", "p50 / p99 ms", "throughput q/s (95% CI)", "vs fp32",
                "accuracy vs fp32", "verdict"):
        t.add_column(col)
    for r in report.variants:
        res = r.result
        if res is not None:
            tp = res.metrics.throughput
            ci = format_ci(tp.per_run)  # raw, never clipped: "interval too wide (n=2)" when it reaches below 0
            ci = f" {ci}" if ci else ""
            cs = res.metrics.cold_start
            cold = f"{_ms(cs.session_create_ms)} + {_ms(cs.first_inference_ms)}" if cs else "-"
            lat = f"{_ms(res.metrics.latency_ms.p50)} / {_ms(res.metrics.latency_ms.p99)}"
            cells = [_mib(res.model.size_bytes), cold, lat, f"{tp.queries_per_s:.1f}{ci}"]
        else:
            size = r.path.stat().st_size if r.path and r.path.exists() else None
            cells = [_mib(size), "-", "-", "-"]
        speed = format_speedup(r.speed) if r.speed else ("1.00x" if r.name == "fp32" else "-")
        colour = {"FAILED": "red", "REJECT": "red", "SLOWER": "yellow", "FASTER": "green", "UNDECIDED": "yellow"}.get(r.verdict, "")
        word = f"[{colour}]{r.verdict}[/{colour}]" if colour else r.verdict
        t.add_row(r.name, *cells, speed, _accuracy_cell(r.accuracy), word)
    return t


def print_report(report: Any, console: Console) -> None:
    """The table, sensitivity top entries, auto-exclusion, notes and where files went."""
    console.print(report_table(report))
    from ..optimize.verdict import SYNTHETIC_REASON as synthetic

    for r in report.variants:
        for why in r.reasons:
            if why != synthetic:
                console.print(f"{r.name} {r.verdict}: {escape(str(why))}", highlight=False)
    if report.sensitivity:
        st = Table(title="sensitivity: quantization error added per tensor (lowest SQNR first)", title_justify="left")
        for col in ("rank", "node", "op", "tensor", "kind", "local SQNR dB", "accumulated SQNR dB"):
            st.add_column(col)
        for k, e in enumerate(report.sensitivity[:10], 1):
            acc = "-" if e["accumulated_sqnr_db"] is None else f"{e['accumulated_sqnr_db']:.1f}"
            st.add_row(str(k), e["node"], e["op_type"], e["tensor"], e["kind"], f"{e['sqnr_db']:.1f}", acc)
        console.print(st)
    if report.auto_exclude:
        a = report.auto_exclude
        state = "passes the gates" if a["passed"] else "still fails the gates"
        console.print(f"auto-exclude: {len(a['excluded_nodes'])} node(s) kept in fp32 {a['excluded_nodes']}: {state}"
                      f" after {len(a['attempts'])} attempt(s)", highlight=False)
    seen = set()
    for note in report.notes + [n for r in report.variants for n in r.build.notes]:
        if note not in seen:
            seen.add(note)
            console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    console.print(f"variants and results: {report.output}", highlight=False)


@app.command("optimize")
def optimize_command(
    model: Annotated[str, typer.Argument(help="fp32 ONNX file or zoo:NAME")],
    output: Annotated[Path, Opt("--output", "-o", help="folder for variant files, Results and the summary")],
    variants: Annotated[str, Opt(help="comma list: fp16,int8-dynamic,int8-static,ort-basic,ort-extended,ort-all")] = "fp16,int8-dynamic,int8-static",
    keep_fp32: Annotated[Optional[str], Opt(help="fp16: more op types kept in fp32 (OP,OP); 'none' = naive conversion")] = None,
    calibration_method: Annotated[str, Opt(help="int8-static: minmax | entropy | percentile")] = "minmax",
    calibration_samples: Annotated[int, Opt(help="int8-static: calibration inputs used")] = 16,
    per_channel: Annotated[Optional[bool], Opt("--per-channel/--no-per-channel", help="per-channel weight scales")] = None,
    reduce_range: Annotated[Optional[bool], Opt("--reduce-range/--no-reduce-range", help="7-bit weights (default: on without VNNI)")] = None,
    activation_type: Annotated[Optional[str], Opt(help="int8 | uint8 (default: per this CPU)")] = None,
    weight_type: Annotated[Optional[str], Opt(help="int8 | uint8 (default int8)")] = None,
    exclude_op_types: Annotated[Optional[str], Opt(help="int8: op types left in fp32 (Conv,Resize)")] = None,
    exclude_nodes: Annotated[Optional[str], Opt(help="int8: node names left in fp32")] = None,
    calibration_data: Annotated[Optional[Path], Opt(help=".npz keyed by input name, or a folder of images")] = None,
    eval_data: Annotated[Optional[Path], Opt(help=".npz keyed by input name, or a folder of images")] = None,
    eval_samples: Annotated[int, Opt(help="eval inputs compared between fp32 and each variant")] = 8,
    image_resize: Annotated[str, Opt(help="images: letterbox (keep aspect, pad) | stretch")] = "letterbox",
    scale: Annotated[float, Opt(help="images: pixel values x scale (default 1/255)")] = 1.0 / 255.0,
    mean: Annotated[Optional[str], Opt(help="images: per-channel mean subtracted after scaling")] = None,
    std: Annotated[Optional[str], Opt(help="images: per-channel std divided by")] = None,
    layout: Annotated[str, Opt(help="images: auto | nchw | nhwc")] = "auto",
    bgr: Annotated[bool, Opt("--bgr", help="images: feed channels as BGR")] = False,
    max_accuracy_drop: Annotated[Optional[list[str]], Opt(help="gate with a unit: cosine:0.01, top1:0.5%, 1%,"
                                                                                   " max_abs_error:10% (of fp32's peak); repeatable")] = None,
    metric: Annotated[Optional[str], Opt(help="task metric module:function(reference, candidate) -> float")] = None,
    fail_on_gate: Annotated[bool, Opt("--fail-on-gate", help="exit 3 when a default gate fails")] = False,
    sensitivity: Annotated[bool, Opt("--sensitivity", help="rank int8-static's nodes by the error they add")] = False,
    auto_exclude: Annotated[bool, Opt("--auto-exclude", help="keep the worst nodes in fp32 until the gates pass")] = False,
    max_auto_exclude: Annotated[int, Opt(help="most nodes --auto-exclude keeps in fp32")] = 16,
    shape: Shape = None,
    dim: Dim = None,
    batch_size: BatchSize = None,
    seed: Annotated[Optional[int], Opt(help="seed of synthetic data and round shuffling")] = None,
    intra_op_num_threads: IntraOpThreads = None,
    warmup: Warmup = None,
    iterations: Iterations = None,
    duration_s: DurationS = None,
    max_duration_s: MaxDurationS = None,
    repeat: Annotated[int, Opt(help="interleaved rounds; each variant runs once per round in a fresh process")] = 3,
    no_measure: Annotated[bool, Opt("--no-measure", help="skip the speed measurement (accuracy checks only)")] = False,
    json_out: Annotated[bool, Opt("--json", help="print the summary JSON to stdout (no table)")] = False,
    debug: Debug = False,
) -> int:
    """Build fp16 / int8 / offline-optimized variants of MODEL, check each against fp32 on the same inputs,
    measure each in its own process, and give each an honest verdict."""
    from ..optimize.report import gate_message
    from ..optimize.run import run_optimize, summary_doc
    from ..optimize.spec import OptimizeSpec, parse_accuracy_drop

    spec = OptimizeSpec(model, output, {
        "bench": build_config(config_flags(locals())),
        "gates": [parse_accuracy_drop(t) for t in max_accuracy_drop or []],
        "image": {"resize": image_resize, "scale": scale, "layout": layout, "channel_order": "bgr" if bgr else "rgb",
                  **{k: _floats(v, f"--{k}") for k, v in (("mean", mean), ("std", std)) if v is not None}},
        "variants": _words(variants), "keep_fp32": _words(keep_fp32),
        "quant": {"calibration_method": calibration_method, "per_channel": per_channel, "reduce_range": reduce_range,
                  "activation_type": activation_type, "weight_type": weight_type,
                  "exclude_op_types": _words(exclude_op_types), "exclude_nodes": _words(exclude_nodes)},
        "calibration_data": calibration_data, "eval_data": eval_data, "calibration_samples": calibration_samples,
        "eval_samples": eval_samples, "metric": metric, "fail_on_gate": fail_on_gate,
        "sensitivity": sensitivity or auto_exclude, "auto_exclude": auto_exclude, "max_auto_exclude": max_auto_exclude,
        "measure": not no_measure})
    err = Console(stderr=True)
    report = run_optimize(spec, command=["inferperf", *sys.argv[1:]],
                          progress=lambda m: err.print(f"[dim]{m}[/dim]", highlight=False))
    if json_out:
        import json

        sys.stdout.write(json.dumps(summary_doc(report), indent=1) + "\n")
    else:
        print_report(report, Console(width=max(160, Console().width)))
    gate = gate_message(report)
    if gate:
        raise GateFailed(gate)
    return 0
