"""``inferperf pipeline FILE.yaml``: measure a pipeline of stages (functions and models) joined by bounded
queues; per-stage figures, the bottleneck, buffer and worker advice (library: :mod:`inferperf.pipeline`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from ..errors import GateFailed, Interrupted, UsageError
from ..interrupt import STOP
from . import app
from .options import Debug, FailOnInvalid, JsonOut
from .outputs import check_writable

Opt = typer.Option


def parse_stage_values(entries: list[str] | None, flag: str, cast: Any) -> dict[str, Any]:
    """``--workers det=2,rec=3`` (repeatable, comma lists) -> ``{"det": 2, "rec": 3}``.

    Raises:
        UsageError: an entry that is not STAGE=VALUE, or a value ``cast`` refuses.
    """
    out: dict[str, Any] = {}
    for entry in entries or []:
        for part in (p.strip() for p in entry.split(",") if p.strip()):
            name, sep, value = part.partition("=")
            if not sep or not name.strip():
                raise UsageError(f"malformed {flag} {part!r}: use STAGE=VALUE, e.g. {flag} det=2")
            if name.strip() in out:
                raise UsageError(f"{flag} names stage {name.strip()!r} twice: give each stage one value")
            try:
                out[name.strip()] = cast(value.strip())
            except (ValueError, UsageError) as e:
                raise UsageError(f"{flag} {part!r}: {e}") from None
    return out


def _int(v: str, what: str) -> int:
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"{v!r} is not an integer: {what}") from None


def _workers(v: str) -> int:
    n = _int(v, "use a worker count >= 1")
    if n < 1:
        raise ValueError("a stage needs at least 1 worker")
    return n


def _executor(v: str) -> str:
    if v not in ("threads", "processes"):
        raise ValueError("use threads or processes")
    return v


def _queue_size(v: str) -> int | None:
    if v == "unbounded":
        return None
    n = _int(v, "use an integer >= 1 or 'unbounded'")
    if n < 1:
        raise ValueError(f"a queue holds at least 1 item (a size of {n} holds nothing): use an integer >= 1 or"
                         f" 'unbounded'")
    return n


@app.command("pipeline")
def pipeline_command(
    file: Annotated[Path, typer.Argument(help="pipeline YAML file (source, stages, queues); see docs/pipeline.md")],
    concurrency: Annotated[Optional[int], Opt(help="closed loop: items in flight (default: every worker busy"
                                                    " + one waiting per queue)")] = None,
    request_rate: Annotated[Optional[float], Opt(help="open loop: items/s sent on the --arrival schedule")] = None,
    arrival: Annotated[str, Opt(help="open loop schedule: constant | poisson | trace:FILE")] = "constant",
    items: Annotated[int, Opt(help="minimum measured items")] = 100,
    duration_s: Annotated[float, Opt(help="minimum measured seconds")] = 5.0,
    max_duration_s: Annotated[float, Opt(help="cap on measured seconds")] = 60.0,
    warmup: Annotated[Optional[int], Opt(help="warm-up items, never counted (default 2 x concurrency)")] = None,
    drain_timeout_s: Annotated[float, Opt(help="wait at most this long for items in flight at the end")] = 60.0,
    workers: Annotated[Optional[list[str]], Opt(help="STAGE=N workers (repeatable or comma list)")] = None,
    executor: Annotated[Optional[list[str]], Opt(help="STAGE=threads|processes")] = None,
    queue_size: Annotated[Optional[list[str]], Opt(help="STAGE=N|unbounded: the stage's input queue")] = None,
    queue_policy: Annotated[Optional[str], Opt(help="every queue's policy when full: block | reject")] = None,
    queue_sizes: Annotated[Optional[str], Opt(help="also run with every queue at these sizes, e.g."
                                                    " 2,recommended,unbounded (one Result each)")] = None,
    no_standalone: Annotated[bool, Opt("--no-standalone", help="skip measuring each stage alone")] = False,
    standalone_s: Annotated[float, Opt(help="seconds each stage runs alone")] = 1.5,
    pool_size: Annotated[int, Opt(help="items taken from a generator source (cycled)")] = 64,
    seed: Annotated[int, Opt(help="seed of the Poisson schedule")] = 0,
    fail_fast: Annotated[bool, Opt("--fail-fast", help="stop at the first stage error (exit 1)")] = False,
    output: Annotated[Optional[Path], Opt("--output", "-o", help="result file (.json) or folder")] = None,
    json_out: JsonOut = False,
    fail_on_invalid: FailOnInvalid = False,
    debug: Debug = False,
) -> int:
    """Measure a pipeline stage by stage: service time, utilisation, queue occupancy, blocked and starved
    time per stage; end-to-end throughput and latency; the bottleneck and what removing it would give."""
    from ..pipeline.engine import StopRule
    from ..pipeline.options import PipelineOptions, gate_message
    from ..pipeline.run import parse_queue_sizes, run_pipeline
    from ..pipeline.spec import load

    opts = PipelineOptions(
        concurrency=concurrency, request_rate=request_rate, arrival=arrival, warmup=warmup, seed=seed,
        stop=StopRule(items, duration_s, max_duration_s, drain_timeout_s),
        workers=parse_stage_values(workers, "--workers", _workers),
        executors=parse_stage_values(executor, "--executor", _executor),
        queue_sizes_by_stage=parse_stage_values(queue_size, "--queue-size", _queue_size), queue_policy=queue_policy,
        queue_sizes=parse_queue_sizes(queue_sizes) if queue_sizes else [], standalone=not no_standalone,
        standalone_s=standalone_s, fail_fast=fail_fast, pool_size=pool_size, fail_on_invalid=fail_on_invalid).check()
    spec = load(file)
    if output is not None:
        check_writable(output)
    Console(stderr=True).print(f"pipeline {spec.name}: {' -> '.join(s.name for s in spec.stages)}", highlight=False)
    kept = _Kept(output, spec.name)
    try:  # each run written as it ends: Ctrl-C or SIGTERM during a later one keeps it
        results = run_pipeline(spec, opts, command=["inferperf", *sys.argv[1:]], source=str(file),
                               on_progress=lambda phase, n: None, on_result=kept)
    except KeyboardInterrupt:
        raise Interrupted(kept.line(STOP.signal_name), STOP.exit_code) from None
    written = _save(results, output, spec.name)
    if json_out:
        sys.stdout.write(results[0].model_dump_json(indent=1) + "\n")
    else:
        from .pipeline_view import print_pipeline

        out = Console()
        print_pipeline(results, out if out.is_terminal else Console(width=200), written)
    gate = gate_message(opts, results)
    if gate:
        raise GateFailed(gate)
    return 0


class _Kept:
    """Each run's Result written as it ends (``on_result``), and the one line an interrupted command ends with."""

    def __init__(self, output: Path | None, name: str) -> None:
        self.output, self.name = output, name
        self.done: list[Any] = []
        self.kept: list[str] = []

    def __call__(self, r: Any) -> None:
        self.done.append(r)
        self.kept.extend(_save([r], self.output, self.name, len(self.done) - 1))

    def line(self, signal_name: str) -> str:
        """What Ctrl-C or SIGTERM left: the finished runs' files (a run in progress is measured whole: dropped)."""
        kept, done = self.kept, self.done
        what = (f"kept {len(kept)} finished run(s) in {', '.join(kept)}" if kept else
                f"{len(done)} finished run(s) not written (no -o)" if done else "no run had finished: nothing kept")
        return (f"interrupted by {signal_name}: {what}; the run in progress is dropped (a pipeline run is measured"
                " whole)")


def _save(results: list[Any], output: Path | None, name: str, first: int = 0) -> list[str]:
    """Write the Results (``first``: the index of ``results[0]`` among the run's): ``--output X.json`` (extra
    queue runs beside it as X.queues-S.json), or a folder (NAME.json, NAME.queues-S.json)."""
    from ..results.io import save

    if output is None:
        return []
    base = output if output.suffix.lower() == ".json" else output / f"{name}.json"
    out = []
    for i, r in enumerate(results, start=first):
        path = base if i == 0 else base.with_name(f"{base.stem}.queues-{r.run['pipeline']['queue_setting']}.json")
        out.append(str(save(r, path)))
    return out


__all__ = ["parse_stage_values", "pipeline_command"]
