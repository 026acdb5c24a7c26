"""``run_pipeline()``: build the stages, warm up, measure, measure each stage alone, analyse, make the Result.

Steps: read the source's items (a generator's first ``pool_size`` items, or a folder's files), build every
stage's workers (imports and sessions: a bad function or model fails here, before anything runs, exit 2),
measure (``warmup`` items first fill the pipeline, their inputs copied per stage for the standalone runs), under the
stop rule (closed loop ``concurrency`` or open loop ``request_rate``), then each stage alone with the same
workers on the inputs it saw (its standalone capacity), then optionally the same pipeline again with other
queue sizes (``queue_sizes``: 2 = a double buffer, ``recommended`` = the buffer rule per queue,
``unbounded``), one Result each. Workers (threads, processes, sessions) live through all runs and are
closed however the run ends.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..measure import arrivals
from ..measure.energy import DEFAULT_IDLE_S, EnergyMeter, EnergyWindow, energy_block, measure_idle
from ..results.model import Result
from ..system import collect_system
from . import analysis as an
from .engine import StageRuntime, StopRule, cycle, run
from .options import PipelineOptions
from .result import assemble
from .spec import PipelineSpec, QueueSpec, StageSpec, resolve_callable
from .trace import Trace
from .workers import ProcessWorker, ThreadWorker, build_stage

CAPTURE = 16  # inputs copied per stage in the warm-up, replayed to measure the stage alone


def apply_overrides(spec: PipelineSpec, opts: PipelineOptions) -> PipelineSpec:
    """The spec with the command line's per-stage workers, executors and queue sizes applied.

    Raises:
        UsageError: an override names a stage the file does not have, or an invalid value.
    """
    names = [s.name for s in spec.stages]
    for what, table in (("--workers", opts.workers), ("--executor", opts.executors),
                        ("--queue-size", opts.queue_sizes_by_stage)):
        for n in table:
            if n not in names:
                raise UsageError(f"{what} {n}=...: no stage {n!r} in the pipeline (stages: {', '.join(names)})")
    stages = []
    for s in spec.stages:
        upd: dict[str, Any] = {}
        if s.name in opts.workers:
            upd["workers"] = opts.workers[s.name]
        if s.name in opts.executors:
            upd["executor"] = opts.executors[s.name]
        q = spec.queue_of(s)
        if s.name in opts.queue_sizes_by_stage:
            q = QueueSpec(size=opts.queue_sizes_by_stage[s.name], policy=q.policy)
        if opts.queue_policy:
            q = QueueSpec(size=q.size, policy=opts.queue_policy)
        upd["queue"] = q
        stages.append(StageSpec(**{**s.model_dump(), **upd}))
    return spec.model_copy(update={"stages": stages})


def source_items(spec: PipelineSpec, pool_size: int) -> list[Any]:
    """The items the source cycles through: a generator's first ``pool_size``, or every file of the folder.

    Raises:
        UsageError: the generator cannot be imported or yields nothing; the folder is missing or empty.
    """
    src = spec.source
    if src.generator:
        gen = resolve_callable(src.generator, spec.base_dir, "source generator")
        try:
            it = iter(gen(**src.args))
        except TypeError as e:
            raise UsageError(f"source generator {src.generator!r}: {e}: check 'args' in the pipeline file") from None
        try:
            items = [x for _, x in zip(range(pool_size), it)]
        except Exception as e:  # noqa: BLE001 - the user's generator
            raise UsageError(f"source generator {src.generator!r} raised {type(e).__name__}: {e}") from None
        if not items:
            raise UsageError(f"source generator {src.generator!r} yielded no items")
        return items
    folder = Path(src.files or "")
    folder = folder if folder.is_absolute() else Path(spec.base_dir) / folder
    if not folder.is_dir():
        raise UsageError(f"source files {str(folder)!r}: not a folder: point 'files:' at a folder of inputs")
    files = sorted(p for p in folder.glob(src.glob) if p.is_file())[:max(pool_size, 1)]
    if not files:
        raise UsageError(f"source files {str(folder)!r}: no file matches {src.glob!r}")
    return [{"name": p.name, "path": str(p), "bytes": p.read_bytes()} for p in files]


class Stages:
    """Every stage's live workers; :meth:`close` stops processes and sessions (a context manager)."""

    def __init__(self, spec: PipelineSpec) -> None:
        self.runtimes: list[StageRuntime] = []
        self.infos: dict[str, dict[str, Any]] = {}
        self._close: list[Callable[[], None]] = []
        try:
            for st in spec.stages:
                if st.executor == "processes":
                    ws = []
                    for _ in range(st.workers):
                        w = ProcessWorker(st, spec.base_dir)
                        self._close.append(w.close)
                        ws.append(w)
                    self.infos[st.name] = ws[0].info
                else:
                    fn, info, close = build_stage(st, spec.base_dir)
                    self._close.append(close)
                    ws = [ThreadWorker(fn) for _ in range(st.workers)]
                    self.infos[st.name] = info
                self.runtimes.append(StageRuntime(st.name, st.kind, st.executor, ws))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close every worker and session (each at most once)."""
        while self._close:
            try:
                self._close.pop()()
            except Exception:  # noqa: BLE001 - closing must not hide the run's own error
                pass

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _process_cpu_s() -> float:
    """CPU seconds of this process and its children still running (stage processes)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for c in me.children(recursive=True):
        try:
            total += sum(c.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def default_concurrency(spec: PipelineSpec) -> int:
    """Every worker busy plus one item waiting in each queue."""
    return sum(s.workers for s in spec.stages) + len(spec.stages)


def measure(stages: Stages, spec: PipelineSpec, items: list[Any], opts: PipelineOptions,
            sizes: list[int | None] | None = None, on_progress: Callable[[int], None] | None = None,
            capture: int = 0) -> tuple[Trace, list[list[Any]]]:
    """One measured run: ``warmup`` items fill the pipeline, then the window (see :func:`~.engine.run`); the
    trace (with the CPU seconds this process and its stage processes used in the window) and the inputs
    each stage received from warm-up items (``capture`` per stage)."""
    schedule = None
    if opts.request_rate is not None:
        schedule = arrivals.from_arrival(opts.arrival, opts.request_rate, seed=opts.seed)
    qs = [spec.queue_of(s) for s in spec.stages]
    n_warm = opts.warmup if opts.warmup is not None else max(4, 2 * default_concurrency(spec))
    return run(stages.runtimes, cycle(items), sizes=sizes or [q.size for q in qs], policies=[q.policy for q in qs],
               stop=opts.stop, concurrency=None if schedule else (opts.concurrency or default_concurrency(spec)),
               schedule=schedule, fail_fast=opts.fail_fast, keep_outputs=opts.keep_outputs, on_progress=on_progress,
               warmup=n_warm, capture=capture, cpu_probe=_process_cpu_s)


def standalone(stages: Stages, captured: list[list[Any]], seconds: float,
               limits: StopRule | None = None) -> dict[str, dict[str, Any]]:
    """Each stage alone, same workers, on copies of the inputs it received in the warm-up: items/s, mean
    service (ms), CPU per wall time. A stage that received nothing is left out. ``limits``: the run's
    ``max_duration_s`` and ``drain_timeout_s`` cap each standalone run too."""
    out: dict[str, dict[str, Any]] = {}
    lim = limits or StopRule()
    for st, inputs in zip(stages.runtimes, captured, strict=True):
        if not inputs:
            continue
        w = len(st.workers)
        tr, _ = run([st], cycle(inputs), sizes=[None], policies=["block"], concurrency=2 * w,
                    stop=StopRule(min_items=max(2 * w, 5), min_duration_s=seconds,
                                  max_duration_s=min(max(4 * seconds, 10), lim.max_duration_s),
                                  drain_timeout_s=lim.drain_timeout_s))
        fig = an.stage_figures(tr, 0)
        out[st.name] = {"items_per_s": tr.throughput(), "items": tr.completions_in_window(), "workers": w,
                        "service_ms_mean": fig["service_ms"]["mean"] if fig["service_ms"] else None,
                        "cpu_per_wall": fig["cpu_per_wall"], "cpu_cores": fig["cpu_cores"],
                        "errors": fig["errors"]["count"]}
    return out


def run_pipeline(spec: PipelineSpec, opts: PipelineOptions | None = None, *, command: list[str] | None = None,
                 on_progress: Callable[[str, int], None] | None = None, source: str = "",
                 on_result: Callable[[Result], None] | None = None) -> list[Result]:  # fmt: skip
    """Measure ``spec`` and return its Results: the main one first, then one per extra queue size.

    Args:
        spec: the pipeline (from :func:`~.spec.load`), before overrides.
        opts: how to drive it (:class:`PipelineOptions`).
        command: argv recorded in the Results.
        on_progress: called as ``(phase, items sent)``.
        source: the pipeline file's path (recorded).
        on_result: called with each Result as soon as its run is assembled (the CLI writes it then, so Ctrl-C or
            SIGTERM during a later run keeps it); the main one is complete (its ``queue_sizes`` rows) only in
            the returned list.

    Raises:
        UsageError: refused options (:meth:`PipelineOptions.check`), bad overrides, source, function or model
            (before anything is measured).
        RuntimeFailure: ``fail_fast`` and a stage raised.
    """
    opts = (opts or PipelineOptions()).check()
    spec = apply_overrides(spec, opts)
    items = source_items(spec, opts.pool_size)
    check = resolve_callable(spec.check, spec.base_dir, "check") if spec.check else None
    system = collect_system(refresh=True)  # the CPUs this process has now (an earlier pin may be cached)
    prog = (lambda phase: (lambda n: on_progress(phase, n))) if on_progress else (lambda phase: None)
    meter = EnergyMeter.open()
    idle = measure_idle(meter, DEFAULT_IDLE_S) if meter.domains else None  # before the models load
    with closing(meter), Stages(spec) as stages:
        with EnergyWindow(meter) as window:
            trace, captured = measure(stages, spec, items, opts, on_progress=prog("measure"), capture=CAPTURE)
        alone = standalone(stages, captured, opts.standalone_s, opts.stop) if opts.standalone else {}
        main = assemble(trace, spec, opts, system, stages.infos, alone, check=check, command=command, source=source)
        main.metrics.energy = _energy(meter, idle, window, main)
        results = [main]
        if on_result is not None:
            on_result(main)
        rule = {n: b["rule_size"] for n, b in main.run["pipeline"]["buffers"].items()}
        rows = [_sweep_row("as configured", trace, main)]
        for setting in opts.queue_sizes:
            sizes = _sizes(setting, spec, rule)
            with EnergyWindow(meter) as window:
                tr, _ = measure(stages, spec, items, opts, sizes=sizes, on_progress=prog(f"queues {setting}"))
            r = assemble(tr, spec, opts, system, stages.infos, alone, check=check, command=command, source=source,
                         queue_setting=str(setting))
            r.metrics.energy = _energy(meter, idle, window, r)
            results.append(r)
            if on_result is not None:
                on_result(r)
            rows.append(_sweep_row(str(setting), tr, r))
        if opts.queue_sizes:
            main.run["pipeline"]["queue_sizes"] = rows
    return results


def _energy(meter: EnergyMeter, idle: Any, window: EnergyWindow, r: Result) -> dict[str, Any]:
    """``metrics.energy`` of one pipeline run: the metered window covers its warm-up items too, so the
    inferences are every item it completed (measured + warm-up)."""
    done = r.metrics.latency_ms.count + r.config.warmup.iterations
    return energy_block(meter, idle, DEFAULT_IDLE_S, window.window_s, done)


def _sizes(setting: int | str, spec: PipelineSpec, rule: dict[str, int]) -> list[int | None]:
    """Queue sizes for one extra run: all at N, all unbounded, or each at its buffer rule (the first queue,
    fed by the source, keeps its configured size)."""
    if setting == "unbounded":
        return [None] * len(spec.stages)
    if setting == "recommended":
        first = spec.queue_of(spec.stages[0]).size
        return [first, *[rule.get(s.name, 2) for s in spec.stages[1:]]]
    n = int(setting)
    if n < 1:
        raise UsageError(f"--queue-sizes {setting}: a queue holds at least 1 item")
    return [n] * len(spec.stages)


def _sweep_row(setting: str, tr: Trace, r: Result) -> dict[str, Any]:
    """One row of the queue-size comparison."""
    lat = r.metrics.latency_ms
    return {"queues": setting, "sizes": tr.queue_sizes, "items_per_s": r.metrics.throughput.queries_per_s,
            "p50_ms": lat.p50, "p99_ms": lat.p99, "rss_peak_bytes": r.metrics.resources.rss_peak_bytes if r.metrics.resources else None,
            "max_occupancy": max((s["queue"]["max"] for s in (r.metrics.stages or {}).values()), default=0),
            "errors": r.metrics.errors.count}


def parse_queue_sizes(text: str) -> list[int | str]:
    """``--queue-sizes 2,recommended,unbounded`` -> ``[2, 'recommended', 'unbounded']``.

    Raises:
        UsageError: an entry that is neither an integer >= 1 nor one of the two words.
    """
    out: list[int | str] = []
    if not text.strip(", "):
        raise UsageError("--queue-sizes is empty: list sizes, e.g. 2,recommended,unbounded")
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part in ("recommended", "unbounded"):
            out.append(part)
        elif part.isdigit() and int(part) >= 1:
            out.append(int(part))
        else:
            raise UsageError(f"--queue-sizes {part!r}: use integers >= 1, 'recommended' or 'unbounded'")
    return out


__all__ = ["PipelineOptions", "Stages", "apply_overrides", "default_concurrency", "measure", "parse_queue_sizes",
           "run_pipeline", "source_items", "standalone"]
