"""The descriptive sections: test environment, method, and the raw-data table (with its CSV).

Everything here reads Result documents only and returns plain data (lists of
rows, strings) that both the HTML and the Markdown renderers print.
"""

from __future__ import annotations

import csv
import io
import shlex
from typing import Any

import numpy as np

from ..analysis.points import format_cpulist
from ..results.model import Result
from .collect import Entry
from .http import HTTP_KINDS, setups


def _mib(b: int | float | None) -> str:
    return "-" if b is None else f"{b / 2**20:.0f} MiB" if b < 2**30 else f"{b / 2**30:.1f} GiB"




def _machine_key(r: Result) -> tuple:
    s = r.system
    return (s.cpu_model, s.logical_cores, s.effective_cpus, s.os, s.memory_bytes, s.python)


def _machines(entries: list[Entry]) -> list[list[Entry]]:
    """Entries by machine. A load step's ``system`` is its client's (the generator's own pinning lowers its
    effective CPUs), so it joins the block of the same machine (CPU, cores, OS, memory, Python) when one
    holds in-process Results, and its pinning never counts as that machine's."""
    blocks: dict[tuple, list[Entry]] = {}
    for e in entries:
        if e.kind not in HTTP_KINDS:
            blocks.setdefault(_machine_key(e.result), []).append(e)
    for e in entries:
        if e.kind in HTTP_KINDS:
            k = _machine_key(e.result)
            same = next((key for key in blocks if key[:2] + key[3:] == k[:2] + k[3:] and key[-1] != "http"), None)
            blocks.setdefault(same or (*k, "http"), []).append(e)
    return list(blocks.values())


def environment(entries: list[Entry]) -> list[dict[str, Any]]:
    """One block per distinct machine: ``{"rows": [(what, value)], "warnings": [...], "results": n, "setups":
    [...]}``; ``setups`` describe each load test's server and client apart (:func:`~.http.setups`)."""
    serves = [e for e in entries if e.kind == "serve"]
    out = []
    for es in _machines(entries):
        rs = [e.result for e in es]
        inproc = [e.result for e in es if e.kind not in HTTP_KINDS]
        s = (inproc or rs)[0].system
        caches = ", ".join(f"{k.replace('_bytes', '')} {_mib(v) if v >= 2**20 else f'{v // 1024} KiB'}"
                           for k, v in (s.caches or {}).items())
        pkgs = ", ".join(f"{k} {v}" for k, v in sorted(s.packages.items()))
        pinned = sorted({format_cpulist(r.config.placement.cpus) for r in inproc if r.config.placement.cpus})
        numa = sorted({str(r.config.placement.numa_node) for r in inproc if r.config.placement.numa_node is not None})
        eff = (f"{s.effective_cpus} (affinity {format_cpulist(s.cpu_affinity)}; cgroup quota "
               f"{s.cgroup_cpu_limit if s.cgroup_cpu_limit is not None else 'none'})") if inproc else (
               f"{s.logical_cores} logical; HTTP Results record the CPUs of the client and server processes (see the load tests)")
        placement = (f"pinned to CPUs {'; '.join(pinned)}" + (f", NUMA node {', '.join(numa)}" if numa else "")
                     if pinned else "not pinned (the OS scheduler placed threads)" if inproc
                     else "load tests: server and client apart, below")
        rows = [
            ("CPU", s.cpu_model or "unknown"),
            ("cores", f"{s.physical_cores or '?'} physical, {s.logical_cores} logical, SMT "
                      f"{ {True: 'on', False: 'off', None: 'unknown'}[s.smt_active] }"),
            ("effective CPUs", eff),
            ("NUMA nodes", ", ".join(f"{k}: {format_cpulist(v)}" for k, v in (s.numa_nodes or {}).items()) or "-"),
            ("caches", caches or "-"),
            ("ISA flags", " ".join(s.isa_flags) or "-"),
            ("frequency", f"{s.cpu_mhz['current']:.0f} MHz, governor {s.governor or 'unknown'}" if s.cpu_mhz
             else f"governor {s.governor or 'unknown'}"),
            ("memory", _mib(s.memory_bytes)),
            ("GPUs", ", ".join(f"{g.name} ({_mib(g.memory_bytes)})" for g in s.gpus) or "none"),
            ("OS", s.os),
            ("Python", s.python),
            ("packages", pkgs or "-"),
            ("placement", placement),
        ]  # fmt: skip
        loads = [e for e in es if e.kind == "load"]
        out.append({"rows": rows, "warnings": machine_warnings(rs), "results": len(rs),
                    "setups": setups(loads + serves) if loads else []})
    return out


def machine_warnings(rs: list[Result]) -> list[str]:
    """SMT oversubscription, CPU steal, quota below the cores, a noisy machine (unstable windows, spread runs)."""
    inproc = [r for r in rs if r.kind not in ("pipeline", *HTTP_KINDS)]  # HTTP connections are not threads
    s = (inproc or rs)[0].system
    w = []
    physical = s.physical_cores or s.logical_cores
    over = [r for r in inproc if s.smt_active and _threads(r) * max(1, r.config.concurrency) > physical]
    if over:
        w.append(f"SMT oversubscription: {len(over)} case(s) ran more threads than the {physical} physical cores;"
                 " SMT siblings share execution units, so those figures understate per-core speed")
    beyond = [r for r in inproc if _threads(r) * max(1, r.config.concurrency) > s.effective_cpus]
    if beyond:
        w.append(f"{len(beyond)} case(s) ran more threads x streams than the {s.effective_cpus} effective CPUs"
                 " (oversubscribed: threads wait for a CPU)")
    steal = [r.metrics.resources.steal_percent for r in rs if r.metrics.resources and r.metrics.resources.steal_percent]
    if steal and max(steal) >= 1.0:
        w.append(f"CPU steal up to {max(steal):.1f} % (mean {np.mean(steal):.1f} %): the hypervisor gave CPU time"
                 " to other guests during measurement")
    if s.cgroup_cpu_limit is not None and s.cgroup_cpu_limit < s.logical_cores:
        w.append(f"a cgroup CPU quota of {s.cgroup_cpu_limit:g} CPUs caps this container below its"
                 f" {s.logical_cores} logical cores")
    invalid = [r for r in rs if not r.validity.valid]
    noisy = [r for r in invalid if any(x.startswith("unstable") for x in r.validity.reasons)]
    lost = [r for r in invalid if (r.metrics.client or {}).get("target_lost")]
    if noisy:  # only instability speaks of the machine; a lost target or a refusal is the target's
        w.append(f"noisy machine: {len(noisy)} of {len(rs)} Result(s) INVALID as unstable (e.g. {noisy[0].validity.reasons[0]})")
    if lost:
        w.append(f"target lost: {len(lost)} load step(s) (e.g. {lost[0].validity.reasons[0]})")
    other = [r for r in invalid if r not in noisy and r not in lost]
    if other:
        w.append(f"{len(other)} of {len(rs)} Result(s) INVALID"
                 + (f" (e.g. {other[0].validity.reasons[0]})" if other[0].validity.reasons else ""))
    spread = [float(np.std(r.metrics.throughput.per_run, ddof=1) / np.mean(r.metrics.throughput.per_run) * 100)
              for r in rs if len(r.metrics.throughput.per_run) >= 2 and np.mean(r.metrics.throughput.per_run) > 0]
    if spread and max(spread) > 10.0:
        w.append(f"throughput varies between runs of one case by up to {max(spread):.0f} % (CV over runs):"
                 " use more --repeat before calling small differences")
    return w


def _threads(r: Result) -> int:
    eff = r.config.session.effective
    for key in ("intra_op_num_threads", "INFERENCE_NUM_THREADS"):
        v = eff.get(key)
        if isinstance(v, int) and v > 0:
            return v
    return max(1, r.system.effective_cpus)


def reproduce(r: Result) -> str:
    """An ``inferperf bench`` command line that measures this one case again (a pipeline, a profile, a load
    step or a server: the command that made it)."""
    if r.kind in ("pipeline", "profile", *HTTP_KINDS):  # measured by their own command, not by bench
        return " ".join(r.command) or f"inferperf {r.kind} {r.model.path}"
    model = f"zoo:{r.model.zoo_name}" if r.model.zoo_name and r.model.variant == "fp32" else r.model.path
    c = r.config
    argv = ["inferperf", "bench", model, "--backend", c.backend]
    t = c.session.effective.get("intra_op_num_threads")
    if isinstance(t, int) and c.backend == "onnxruntime":
        argv += ["--intra-op-num-threads", str(t)]
    sc = c.session.requested.get("session_config")
    for k, v in (sc if isinstance(sc, dict) else {}).items():
        argv += ["--session-config", f"{k}={v}"]
    for name, dims in c.workload.shapes.items():
        argv += ["--shape", f"{name}:{'x'.join(map(str, dims))}"]
    if c.concurrency > 1:
        argv += ["--concurrency", str(c.concurrency), "--session-mode", c.session_mode]
    if c.scenario == "offline":
        argv += ["--scenario", "offline"]
    argv += ["--warmup", str(c.warmup.iterations), "--iterations", str(c.stop.min_iterations),
             "--duration-s", f"{c.stop.min_duration_s:g}", "--max-duration-s", f"{c.stop.max_duration_s:g}",
             "--seed", str(c.workload.seed), "--repeat", str(c.repeat)]
    if c.percentile_method != "linear":
        argv += ["--percentile-method", c.percentile_method]
    if c.placement.cpus:
        argv += ["--cpus", format_cpulist(c.placement.cpus)]
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in c.env.items())
    return (env + " " if env else "") + " ".join(shlex.quote(a) for a in argv)


def inputs_text(r: Result) -> str:
    """Where a Result's inputs came from, as recorded: the timed inputs (``config.workload.data_source``) and,
    for optimize and runtime comparisons, the inputs outputs were compared on (``metrics.accuracy``)."""
    w = r.config.workload
    if w.data_source == "locust":  # an import: Locust's CSV names the users, not the payloads they sent
        users = ((r.run or {}).get("locust") or {}).get("users", r.config.concurrency)
        text = f"timed: Locust's {users} users (its CSV records no payload pool or seed)"
    else:
        text = f"timed: {w.data_source}, pool of {w.input_pool_size}, seed {w.seed}"
    acc = r.metrics.accuracy if isinstance(r.metrics.accuracy, dict) else {}
    src = acc.get("data_source") or (acc.get("output_agreement") or {}).get("data_source")
    if src:
        n = acc.get("n_inputs")
        text += f"; accuracy compared on {src}" + (f" ({n} input(s))" if n else "")
    return text


def _uniq(vals: list[Any]) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in vals))


def _bench_rows(rs: list[Result]) -> list[tuple[str, str]]:
    """How an in-process Result (bench, sweep, optimize, runtimes, tune, profile, pipeline) was measured."""
    shuffle = _uniq([run.get("shuffle_seed") for r in rs for run in r.run.get("runs", []) if "shuffle_seed" in run])
    pipe = rs[0].kind == "pipeline"
    unit = "items" if pipe else "queries"

    def scenario(r: Result) -> str:
        if pipe:  # items in flight through the stages, not streams of one session
            return (f"open loop, {r.config.request_rate:g} items/s" if r.config.scenario == "server"
                    else f"closed loop, {r.config.concurrency} items in flight")
        return r.config.scenario + (f" x{r.config.concurrency} ({r.config.session_mode})"
                                    if r.config.concurrency > 1 else "")

    return [
        ("scenarios", _uniq([scenario(r) for r in rs])),
        ("backends", "-" if pipe else _uniq([r.config.backend for r in rs])),
        ("warm-up", _uniq([f"{r.config.warmup.iterations} {unit} and {r.config.warmup.duration_s:g} s, not counted"
                           for r in rs])),
        ("stop rule", _uniq([f">= {r.config.stop.min_iterations} {unit} and >= {r.config.stop.min_duration_s:g} s,"
                             f" at most {r.config.stop.max_duration_s:g} s" for r in rs])),
        ("repeats", _uniq([f"{r.config.repeat} run(s), each in a fresh process" for r in rs])
         + ("; interleaved shuffled rounds" if any(r.config.repeat > 1 for r in rs) else "")),
        ("percentiles", _uniq([r.metrics.latency_ms.percentile_method for r in rs]) + " (pooled samples of all runs)"),
        ("inputs", _uniq([inputs_text(r) for r in rs])),
        ("round-order seed", shuffle or "-"),
        ("validity rule", _uniq([f"window-median CV <= {r.validity.rules.get('max_window_cv_percent', '?')} % over"
                                 f" >= {r.validity.rules.get('min_windows', '?')} windows" for r in rs])),
    ]  # fmt: skip


def _load_rows(rs: list[Result]) -> list[tuple[str, str]]:
    """How HTTP load steps were driven and timed (load warms up and stops by seconds, per step)."""
    from .http import load_text, mode

    def stop(r: Result) -> str:
        st = r.config.stop
        if st.min_iterations:
            return f">= {st.min_iterations} requests, at most {st.max_duration_s:g} s"
        if st.min_duration_s and st.min_duration_s == st.max_duration_s:
            return f"{st.min_duration_s:g} s measured"
        return f"windows until stable, at most {st.max_duration_s:g} s"

    open_loop = [r for r in rs if r.config.scenario == "server"]
    return [
        ("mode", _uniq([mode(r) for r in rs])),
        ("steps", ", ".join(load_text(r) for r in sorted(rs, key=lambda r: (r.config.request_rate or 0,
                                                                             r.config.concurrency)))),
        ("target", _uniq([r.run.get("target", r.model.path) for r in rs])),
        ("protocol", _uniq([getattr(r.config.workload, "protocol", None) or "json" for r in rs])),
        ("warm-up", _uniq([f"{r.config.warmup.duration_s:g} s per step (--warmup-s), not counted" for r in rs])),
        ("stop rule", _uniq([stop(r) for r in rs])),
        ("latency", "from each request's scheduled send time (open loop: coordinated omission corrected)"
         if open_loop else "from each request's send to its last response byte, client side"),
        ("percentiles", _uniq([r.metrics.latency_ms.percentile_method for r in rs]) + " (client-side samples)"),
        ("inputs", _uniq([inputs_text(r) for r in rs])),
    ]  # fmt: skip


def _serve_rows(rs: list[Result]) -> list[tuple[str, str]]:
    from .http import server_text

    return [
        ("server", _uniq([server_text(r) for r in rs])),
        ("warm-up", _uniq([f"{r.config.warmup.iterations} warm-up queries before ready, not counted" for r in rs])),
        ("window", _uniq([f"{(r.metrics.server or {}).get('window_s', 0):.1f} s served" for r in rs])),
        ("percentiles", "server side, per request (queue, compute) and per model call"),
    ]


def method(sources: dict[str, list[Entry]]) -> list[dict[str, Any]]:
    """One block per command invocation (every kind of Result): what ran and how it was measured."""
    out = []
    for src, es in sources.items():
        rs = [e.result for e in es]
        kind = es[0].kind
        rows = [("kind", kind), ("cases" if kind not in HTTP_KINDS else "Results", str(len(rs)))]
        rows += _load_rows(rs) if kind == "load" else _serve_rows(rs) if kind == "serve" else _bench_rows(rs)
        out.append({"command": src, "rows": rows})
    return out


COLUMNS = [
    ("label", "case"), ("kind", "kind"), ("variant", "variant"), ("backend", "backend"), ("shapes", "shapes"),
    ("batch", "batch"), ("threads", "threads"), ("concurrency", "streams"), ("queries_per_s", "queries/s"),
    ("queries_per_s_ci95", "95 % CI"), ("samples_per_s", "samples/s"), ("p50_ms", "p50 ms"), ("p90_ms", "p90 ms"),
    ("p99_ms", "p99 ms"), ("p999_ms", "p99.9 ms"), ("max_ms", "max ms"), ("count", "queries"), ("runs", "runs"),
    ("cpu_percent", "CPU %"), ("rss_peak_mib", "peak RSS MiB"), ("valid", "valid"), ("notes", "notes"),
]  # fmt: skip


def _batch(r: Any) -> float | int | None:
    """Rows per model call: the workload's batch, or for a serve Result the measured mean (inference count /
    execution count; its ``batch_size`` is the server's ``max_batch_size``, a limit, not what ran)."""
    if r.kind != "serve":
        return r.config.workload.batch_size
    s = r.metrics.server or {}
    calls = s.get("execution_count")
    return s.get("inference_count", 0) / calls if calls else None


def case_row(label: str, e: Entry) -> dict[str, Any]:
    """One row of the raw-data table (numbers unrounded; the renderers format them)."""
    r = e.result
    tp, lat, res = r.metrics.throughput, r.metrics.latency_ms, r.metrics.resources
    marks = r.run.get("marks") or []
    notes = list(r.validity.reasons) + list(r.notes) + ([f"marks: {', '.join(marks)}"] if marks else [])
    return {
        "label": label, "kind": e.kind, "variant": r.model.variant, "backend": r.config.backend,
        "shapes": " ".join(f"{k}:{'x'.join(map(str, v))}" for k, v in r.config.workload.shapes.items()),
        "batch": _batch(r), "threads": None if r.kind == "load" else _threads(r),
        # a load step: connections (its client has no runtime threads); a server has clients, not streams
        "concurrency": None if r.kind == "serve" else r.config.concurrency,
        "queries_per_s": tp.queries_per_s,
        "queries_per_s_ci95": (f"{tp.queries_per_s_ci95[0]:.1f}..{tp.queries_per_s_ci95[1]:.1f}"
                               if tp.queries_per_s_ci95 else ""),
        "samples_per_s": tp.samples_per_s, "p50_ms": lat.p50, "p90_ms": lat.p90, "p99_ms": lat.p99,
        "p999_ms": lat.p999, "max_ms": lat.max, "count": lat.count, "runs": r.config.repeat,
        "cpu_percent": res.cpu_percent_mean if res and res.cpu_percent_mean is not None else None,
        "rss_peak_mib": res.rss_peak_bytes / 2**20 if res and res.rss_peak_bytes else None,
        "valid": r.validity.valid, "notes": "; ".join(notes), "case_key": r.case_key,
        "reproduce": reproduce(r), "made_by": " ".join(r.command), "file": str(e.path),
    }  # fmt: skip


def csv_text(rows: list[dict[str, Any]]) -> str:
    """The table as CSV (every column, plus case_key, reproduce, made_by, file)."""
    if not rows:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()
