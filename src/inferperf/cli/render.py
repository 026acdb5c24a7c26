"""Console rendering of Results (rich) and a progress display that never touches the timed loop."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..clock import SYSTEM_CLOCK
from ..analysis.points import format_cpulist
from ..measure.loop import LiveState
from ..measure.speedup import sig
from ..results.model import Result
from ..system import cpu_limit_display




def plain(v: Any) -> str:
    """A value as people read it, never Python's repr: None -> ``none``, floats to 4 significant digits
    without exponent (:func:`~inferperf.measure.speedup.sig`), ``[lo, hi]`` for sequences, ``connect 2952, timeout 3``
    for mappings."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return sig(v)
    if isinstance(v, dict):
        return ", ".join(f"{k} {plain(x)}" for k, x in v.items()) or "none"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(plain(x) for x in v) + "]"
    return str(v)


def _fmt(ms: float) -> str:
    return f"{ms:.3f}" if ms < 10 else f"{ms:.2f}" if ms < 1000 else f"{ms:.0f}"


def result_table(r: Result) -> Table:
    """A two-column table: what ran, latency percentiles (ms), throughput, cold start, validity."""
    lat = r.metrics.latency_ms
    tp = r.metrics.throughput
    cs = r.metrics.cold_start
    eff = r.config.session.effective
    shapes = ", ".join(f"{k}:{'x'.join(map(str, v))}" for k, v in r.config.workload.shapes.items())
    name = f"zoo:{r.model.zoo_name}" if r.model.zoo_name else r.model.path
    t = Table(title=f"inferperf bench: {name}", show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("value")
    scen = r.config.scenario
    if scen == "concurrent":
        scen += f" x{r.config.concurrency} ({r.config.session_mode} session)"
    threads = (f"INFERENCE_NUM_THREADS={eff.get('INFERENCE_NUM_THREADS')} NUM_STREAMS={eff.get('NUM_STREAMS')}"
               f" PERFORMANCE_HINT={eff.get('PERFORMANCE_HINT')}" if "INFERENCE_NUM_THREADS" in eff
               else f"threads intra={eff.get('intra_op_num_threads')} inter={eff.get('inter_op_num_threads')}")
    t.add_row("backend", f"{r.config.backend}  {threads}  {scen}")
    s = r.system
    smt = {True: "SMT on", False: "SMT off", None: "SMT unknown"}[s.smt_active]
    quota = f"  cgroup quota {cpu_limit_display(s.cgroup_cpu_limit)}" if s.cgroup_cpu_limit else ""
    mhz = f"  {s.cpu_mhz['current']:.0f} MHz" if s.cpu_mhz else ""
    numa = f"  NUMA {len(s.numa_nodes)}" if s.numa_nodes else ""
    t.add_row(
        "machine",
        f"{s.cpu_model or 'unknown CPU'}  {s.physical_cores or '?'} physical / {s.logical_cores} logical, {smt}{numa}"
        f"  effective CPUs {s.effective_cpus}{quota}  affinity {format_cpulist(s.cpu_affinity)}"
        f"  ISA {','.join(s.isa_flags) or '-'}  governor {s.governor or '-'}{mhz}"
        f"  RAM {(s.memory_bytes or 0) / 2**30:.1f} GiB",
    )
    if r.config.placement.cpus is not None:
        t.add_row("placement", f"pinned to CPUs {format_cpulist(r.config.placement.cpus)}"
                  + (f", NUMA node {r.config.placement.numa_node}" if r.config.placement.numa_node is not None else ""))
    t.add_row("inputs", f"{shapes}  (pool {r.config.workload.input_pool_size}, {r.config.workload.data_source})")
    t.add_row("latency ms", f"mean {_fmt(lat.mean)}  std {_fmt(lat.std)}  min {_fmt(lat.min)}  max {_fmt(lat.max)}")
    ci = f" [{_fmt(lat.p50_ci95[0])}, {_fmt(lat.p50_ci95[1])}]" if lat.p50_ci95 else ""
    t.add_row(
        f"percentiles ms ({lat.percentile_method})",
        f"p50 {_fmt(lat.p50)}{ci}  p90 {_fmt(lat.p90)}  p95 {_fmt(lat.p95)}  p99 {_fmt(lat.p99)}  p99.9 {_fmt(lat.p999)}",
    )
    tput = f"{tp.queries_per_s:.1f} queries/s  {tp.samples_per_s:.1f} samples/s  ({lat.count} queries in {tp.duration_s:.2f} s)"
    if tp.queries_per_s_ci95:
        lo, hi = tp.queries_per_s_ci95
        # the runner clips a rate's t interval at 0: such a bound was not measured, so it is not printed as one
        more = max(3, 2 * len(tp.per_run))  # advise more runs than were used
        ci = f"[{lo:.1f}, {hi:.1f}]" if lo > 0 else f"reaches 0, up to {hi:.1f} (too noisy to bound: --repeat {more})"
        tput = (f"{tp.queries_per_s:.1f} queries/s, 95 % CI {ci} over {len(tp.per_run)} runs"
                f"  {tp.samples_per_s:.1f} samples/s  ({lat.count} queries in {tp.duration_s:.2f} s)")
    t.add_row("throughput", tput)
    if ref := getattr(tp, "batch1_reference", None):  # offline: the same session at batch 1 (issue 10)
        t.add_row("batch-1 reference", f"{ref['samples_per_s']:.1f} samples/s ({ref['queries']} queries): batch"
                  f" {r.config.workload.batch_size} gives {ref['per_sample_ratio']:.2f}x the samples/s of batch 1")
    if len(tp.per_stream) > 1:
        t.add_row("per stream", "  ".join(f"{x:.1f}" for x in tp.per_stream) + " queries/s")
    if cs:
        cold = f"session create {_fmt(cs.session_create_ms)}  first inference {_fmt(cs.first_inference_ms)}"
        if cs.session_create_ms_ci95:
            cold += (f"  (means of {len(cs.per_run)} fresh processes; CI create [{_fmt(cs.session_create_ms_ci95[0])},"
                     f" {_fmt(cs.session_create_ms_ci95[1])}], first [{_fmt(cs.first_inference_ms_ci95[0])},"
                     f" {_fmt(cs.first_inference_ms_ci95[1])}])")
        t.add_row("cold start ms", cold)
    if "pids" in r.run:
        t.add_row("runs", f"{r.run['repeats']} fresh worker processes, PIDs {r.run['pids']}")
    res = r.metrics.resources
    if res and res.cpu_percent_mean is not None:
        rss = f"  peak RSS {res.rss_peak_bytes / 2**20:.0f} MiB" if res.rss_peak_bytes else ""
        if rss and getattr(res, "rss_peak_source", None) == "ru_maxrss":
            rss += " (process lifetime, model load included)"
        t.add_row("resources", f"CPU {res.cpu_percent_mean:.0f} % (100 = one core){rss}")
    if r.metrics.errors.count:
        t.add_row("errors", f"{r.metrics.errors.count}: {plain(r.metrics.errors.by_kind)}")
    if r.kind == "bench" and r.metrics.stages:  # --pre/--post: each part's own percentiles
        for name, st in r.metrics.stages.items():
            lat = st["latency_ms"]
            share = f", {100 * st['share_of_mean']:.0f} % of the mean" if st.get("share_of_mean") is not None else ""
            t.add_row(f"stage {name}", f"p50 {_fmt(lat['p50'])}  p99 {_fmt(lat['p99'])}  mean {_fmt(lat['mean'])}{share}")
    verdict = "[green]VALID[/green]" if r.validity.valid else "[red]INVALID[/red]: " + "; ".join(r.validity.reasons)
    t.add_row("validity", verdict)
    return t


def print_result(r: Result, console: Console, output: str | None = None) -> None:
    """Print the table, the notes and where the Result was written."""
    console.print(result_table(r))
    for note in r.notes:
        console.print("[yellow]note:[/yellow] ", end="", highlight=False)
        console.print(note, highlight=False, markup=False)
    if output:
        console.print(f"result: {output}", highlight=False)


@contextmanager
def live_progress(live: LiveState, min_iterations: int, min_duration_s: float, console: Console) -> Iterator[None]:
    """Show warm-up and measurement progress from a polling thread (10 Hz); the loop is never slowed by a lock."""
    if not console.is_terminal:
        yield
        return
    stop = threading.Event()
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[count]} queries"),
        TimeElapsedColumn(), console=console, transient=True,
    )
    task = progress.add_task("loading", total=1.0, count=0)

    def poll() -> None:
        while not stop.wait(0.1):
            n = len(live.samples)
            if live.phase == "measure" and live.t0_ns:
                elapsed = (SYSTEM_CLOCK.now_ns() - live.t0_ns) / 1e9  # the measure loop's clock
                frac = min(n / min_iterations, elapsed / min_duration_s if min_duration_s else 1.0)
                progress.update(task, description="measuring", completed=min(frac, 1.0), count=n)
            else:
                progress.update(task, description=live.phase, count=n)

    thread = threading.Thread(target=poll, daemon=True)
    with progress:
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
