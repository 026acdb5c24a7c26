"""``inferperf compare BASELINE CURRENT``: the CI performance gate (exit 3 on a regression)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import GateFailed, UsageError
from . import app
from .options import Debug

Opt = typer.Option


@app.command("compare")
def compare_command(
    baseline: Annotated[str, typer.Argument(help="baseline Result file or folder, or history:DB (the points since"
                                                  " each series' last change point in a history database)")],
    current: Annotated[Path, typer.Argument(help="current Result file or folder")],
    match: Annotated[str, Opt(help="auto | case_key | config (config ignores the model file's hash;"
                                   " auto picks it when each side holds one case or the models differ)")] = "auto",
    max_throughput_drop: Annotated[Optional[str], Opt(help="largest tolerated throughput drop (default 5%)")] = None,
    max_p50_increase: Annotated[Optional[str], Opt(help="largest tolerated p50 increase (default 5%)")] = None,
    max_p99_increase: Annotated[Optional[str], Opt(help="largest tolerated p99 increase (default 10%)")] = None,
    max_cold_start_increase: Annotated[Optional[str], Opt(help="largest tolerated cold-start increase (default 20%)")] = None,
    max_rss_increase: Annotated[Optional[str], Opt(help="largest tolerated peak-RSS increase (default 10%)")] = None,
    max_ttft_increase: Annotated[Optional[str], Opt(help="token streams: largest tolerated TTFT p50 increase (default 5%)")] = None,
    max_itl_increase: Annotated[Optional[str], Opt(help="token streams: largest tolerated ITL p50 increase (default 5%)")] = None,
    max_tokens_per_s_drop: Annotated[Optional[str], Opt(help="token streams: largest tolerated output tokens/s drop"
                                                             " (default 5%)")] = None,
    gate: Annotated[Optional[Path], Opt(help="YAML gate file (thresholds, metrics, strict, correction); flags override it")] = None,
    metrics: Annotated[Optional[str], Opt(help="comma list of throughput,p50,p99,cold_start,rss_peak (the default)"
                                               " and, for token streams, ttft_p50,itl_p50,output_tokens_per_s")] = None,
    strict: Annotated[Optional[bool], Opt("--strict/--no-strict", help="fail on inconclusive results that may be"
                                                                        " regressions (default: they pass)")] = None,
    correction: Annotated[Optional[str], Opt(help="holm (family-wise error, default) | bh (false-discovery rate)")] = None,
    fmt: Annotated[str, Opt("--format", help="markdown (a pull-request comment) | json")] = "markdown",
    output: Annotated[Optional[Path], Opt("--output", "-o", help="also write the report to this file")] = None,
    debug: Debug = False,
) -> int:
    """Compare CURRENT Results against BASELINE per case and metric; exit 3 when something regressed,
    2 on usage errors or when no case matched, 0 otherwise."""
    from ..analysis.compare import compare
    from ..analysis.compare.gate import build_gate
    from ..analysis.compare.render import headline, to_json, to_markdown

    if fmt not in ("markdown", "json"):
        raise UsageError(f"unknown --format {fmt!r}: use markdown or json")
    if baseline.startswith("history:"):  # the points since the last change point (docs/history.md)
        import tempfile

        from .history import history_baseline

        held = tempfile.TemporaryDirectory(prefix="inferperf-history-baseline-")  # removed when compare returns
        baseline = str(history_baseline(baseline[len("history:"):], current, Path(held.name)))
    thresholds = {"max-throughput-drop": max_throughput_drop, "max-p50-increase": max_p50_increase,
                  "max-p99-increase": max_p99_increase, "max-cold-start-increase": max_cold_start_increase,
                  "max-rss-increase": max_rss_increase, "max-ttft-increase": max_ttft_increase,
                  "max-itl-increase": max_itl_increase, "max-tokens-per-s-drop": max_tokens_per_s_drop}
    g = build_gate(gate, thresholds, metrics, strict, correction)
    result = compare([baseline], [current], g, match=match)  # type: ignore[arg-type]
    text = to_markdown(result) if fmt == "markdown" else to_json(result) + "\n"
    sys.stdout.write(text)
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text)
        except OSError as e:
            raise UsageError(f"cannot write '{output}' ({e.strerror or e}): choose another --output") from None
    for w in result.warnings:
        print(f"WARNING: not comparable: {w}", file=sys.stderr)
    if result.exit_code:
        worst = result.failures[0]
        raise GateFailed(f"{headline(result).replace('**', '')}; first: {worst.case} {worst.metric} "
                         f"{worst.change:+.1f} % ({worst.verdict})" if worst.change is not None else
                         headline(result).replace("**", ""))
    return 0


def ab_command(models: tuple[str, str], cfg: object, output: Path | None, repeat: int | None) -> int:
    """``bench --ab BASE CURRENT``: both models in ABBA rounds (``--repeat``, default 4), each side's
    pooled Result (and its single runs under ``runs/``) written to ``OUTPUT/base`` and ``OUTPUT/current``."""
    from rich.console import Console

    from ..measure.ab import run_ab
    from ..results.io import save
    from .outputs import output_path

    out = output or Path("inferperf-ab")
    if out.suffix.lower() == ".json":
        raise UsageError("--ab writes two sides: give --output a folder, not a .json file")
    err = Console(stderr=True)
    rounds = repeat or 4

    def on_run(side: str, round_: int, run: object) -> None:
        path = save(run, out / side / "runs" / f"{run.case_key}-run{round_}-pid{run.run.get('pid')}.json")  # type: ignore[attr-defined]
        err.print(f"round {round_ + 1}/{rounds} {side}: {run.metrics.throughput.queries_per_s:.1f} queries/s"  # type: ignore[attr-defined]
                  f" -> {path}", highlight=False)

    argv = ["inferperf", *sys.argv[1:]]
    base, current = run_ab(models[0], models[1], cfg, rounds, command=argv, on_result=on_run)  # type: ignore[arg-type]
    for side, res in (("base", base), ("current", current)):
        print(f"{side}: {save(res, output_path(out / side, res))}")
    print(f"compare with: inferperf compare {out / 'base'} {out / 'current'}")
    return 0
