"""``inferperf bench MODEL --backend a,b,c``: runtimes side by side, with output agreement.

Thin over :func:`inferperf.measure.runtimes.compare_runtimes`; renders one
table (throughput with CI, p50/p99, cold start with its phases, peak memory,
agreement with the reference) and saves one pooled Result per runtime plus
``comparison.json`` when ``--output DIR`` is given.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..config import BenchConfig
from ..errors import GateFailed
from ..fsutil import atomic_write_text
from ..measure.speedup import format_ci, sig
from ..results.io import save
from ..results.model import Result


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def verdict(r: Result, ref: Result) -> str:
    """Throughput ratio to the reference: faster/slower only when the 95 % intervals over runs separate;
    otherwise "within noise" or, under 3 runs, "too few runs to decide" with the rounds paired
    (``0.16x (too few runs to decide: slower in 2 of 2 rounds; use --repeat >= 3)``)."""
    from ..measure.speedup import describe, speedup_of

    if r is ref:
        return "reference"
    return describe(speedup_of(ref, r))


def comparison_table(comp: Any) -> Table:
    """One column per runtime, one row per figure; the first runtime is the reference for ratios and agreement."""
    ref = comp.results[comp.backends[0]]
    name = comp.model or (f"zoo:{ref.model.zoo_name}" if ref.model.zoo_name else ref.model.path)
    shapes = ", ".join(f"{k}:{'x'.join(map(str, v))}" for k, v in ref.config.workload.shapes.items())
    t = Table(title=f"inferperf runtimes: {name}  ({shapes}; {ref.config.scenario}; {comp.repeat} interleaved"
                    f" round(s), a fresh process per run)", title_justify="left")
    t.add_column("", style="bold")
    for b in comp.backends:
        t.add_column(b + (" (ref)" if b == comp.backends[0] else ""), justify="right")
    rows: dict[str, list[str]] = {k: [] for k in (
        "queries/s", "95 % CI", "vs reference", "p50 ms", "p99 ms", "session create ms", "  phases ms",
        "first inference ms", "runtime import ms", "peak RSS MiB", "max abs error", "cosine (min)", "outputs")}
    for b in comp.backends:
        r = comp.results[b]
        tp, lat, cs = r.metrics.throughput, r.metrics.latency_ms, r.metrics.cold_start
        phases = dict(cs.phases) if cs else {}
        imp = phases.pop("runtime_import_ms", None)
        rss = r.metrics.resources.rss_peak_bytes if r.metrics.resources else None
        a = comp.agreement.get(b, {})
        rows["queries/s"].append(f"{tp.queries_per_s:.1f}")
        rows["95 % CI"].append(format_ci(tp.per_run) or "-")  # raw: never an interval clipped at 0
        rows["vs reference"].append(verdict(r, ref))
        rows["p50 ms"].append(_ms(lat.p50))
        rows["p99 ms"].append(_ms(lat.p99))
        rows["session create ms"].append(_ms(cs.session_create_ms) if cs else "-")
        rows["  phases ms"].append(", ".join(f"{k.removesuffix('_ms')} {_ms(v)}" for k, v in phases.items()) or "-")
        rows["first inference ms"].append(_ms(cs.first_inference_ms) if cs else "-")
        rows["runtime import ms"].append(_ms(imp))
        rows["peak RSS MiB"].append(f"{rss / 2**20:.0f}" if rss else "-")
        rows["max abs error"].append(sig(a.get("max_abs_error"), 3))
        rows["cosine (min)"].append("-" if a.get("cosine_min") is None else f"{a['cosine_min']:.6f}")
        rows["outputs"].append("reference" if b == comp.backends[0] else (
            "[green]agree[/green]" if a.get("agrees") else f"[red]DIFFER[/red] {a.get('mismatch') or ''}".rstrip()))
    for label, cells in rows.items():
        t.add_row(label, *cells)
    return t


def compare_command(model: str, backends: str, cfg: BenchConfig, output: Path | None, json_out: bool,
                    fail_on_invalid: bool) -> int:
    """Run the comparison, print it (or its JSON), save the Results; returns the exit code.

    Raises:
        GateFailed: with ``--fail-on-invalid``, a runtime's result is INVALID or its outputs disagree.
    """
    from ..measure.runtimes import compare_runtimes

    err = Console(stderr=True)
    argv = ["inferperf", *sys.argv[1:]]

    def on_agreement(name: str, a: dict[str, Any]) -> None:
        if a.get("reference_backend") != name:
            ok = "agrees" if a.get("agrees") else "DIFFERS"
            cos = a.get("cosine_min")
            err.print(f"outputs: {name} {ok} with {a.get('reference_backend')} (max abs err {sig(a.get('max_abs_error'), 3)},"
                      f" cosine {'-' if cos is None else f'{cos:.6f}'})", highlight=False)

    def on_result(name: str, round_: int, run: Result) -> None:
        err.print(f"round {round_ + 1}/{cfg.repeat}: {name} {run.metrics.throughput.queries_per_s:.1f} queries/s"
                  f" (pid {run.run.get('pid')})", highlight=False)

    comp = compare_runtimes(model, cfg, backends, command=argv, on_result=on_result, on_agreement=on_agreement)
    written: list[str] = []
    if output is not None:
        folder = output if output.suffix.lower() != ".json" else output.with_suffix("")
        for b, r in comp.results.items():
            written.append(str(save(r, folder / f"{b}-{r.case_key}.json")))
        summary = comp.to_dict()
        summary["results"] = {b: str(folder / f"{b}-{r.case_key}.json") for b, r in comp.results.items()}
        atomic_write_text(folder / "comparison.json", json.dumps(summary, indent=1, default=str))
        written.append(str(folder / "comparison.json"))
    if json_out:
        sys.stdout.write(json.dumps(comp.to_dict(), default=str) + "\n")
    else:
        console = Console()
        console.print(comparison_table(comp))
        notes: dict[str, list[str]] = {}
        for b in comp.backends:
            for note in comp.results[b].notes:
                notes.setdefault(note, []).append(b)
        for note, who in notes.items():
            whom = "" if len(who) == len(comp.backends) else f" ({', '.join(who)})"
            console.print(f"[yellow]note{whom}:[/yellow] {escape(note)}", highlight=False)
        for b in comp.backends:
            if not comp.results[b].validity.valid:
                console.print(f"[red]{b} INVALID:[/red] {'; '.join(comp.results[b].validity.reasons)}", highlight=False)
        for path in written:
            console.print(f"result: {path}", highlight=False)
    bad = [b for b in comp.backends if not comp.results[b].validity.valid or not comp.agreement[b].get("agrees")]
    if fail_on_invalid and bad:
        raise GateFailed(f"runtime(s) {bad} INVALID or disagreeing with {comp.backends[0]} and --fail-on-invalid is set")
    return 0
