"""HTTP Results in the report (kinds ``load`` and ``serve``): their labels and their test setup.

A load Result is measured by a client (the load generator) against a server, often on one machine with
the two pinned to disjoint CPUs. Its ``system`` block and ``config.placement`` describe the *client*: the
generator's own CPU pinning is not the environment the model ran in, and its connections are not threads.
So the report labels a load step by its load (``2 connections``, ``50 req/s``), never as in-process
streams, and describes the server (CPUs, instances, batching, threads per instance) and the client
(generator CPUs, workers, connections, its CPU use) apart, from:

* ``run.placement`` (``generator_cpus``, ``server_cpus``), written when ``inferperf load MODEL`` served the
  model itself;
* the ``serve`` Result that run wrote beside the client's (same folder): ``metrics.server.options``
  (``instance_count``, ``max_batch_size``, ``dynamic_batching``, ``max_queue_delay_us``) and the session's
  threads;
* ``run.server`` (name and version an external server reported) otherwise.

Reads Results only.
"""

from __future__ import annotations

from typing import Any

from ..analysis.points import format_cpulist, point, workload_label
from ..results.model import Result
from .collect import Entry

#: Result kinds measured over HTTP by a client (their ``system`` is the client's machine view).
CLIENT_KINDS = ("load",)
#: Result kinds of HTTP serving (a load step, a server's own Result): neither describes in-process runs.
HTTP_KINDS = ("load", "serve")


def mode(r: Result) -> str:
    """How a load step was driven: ``closed loop``, ``open loop``, plus ``stress``, ``find-max-rate`` or ``soak``."""
    c = r.metrics.client or {}
    loop = "open loop" if r.config.scenario == "server" else "closed loop"
    if c.get("soak"):
        return f"{loop}, soak"
    st = c.get("stress") or {}
    if st.get("mode"):
        return f"{loop}, {str(st['mode']).replace('_', '-')}"
    return loop


def load_text(r: Result) -> str:
    """A load step's load: ``2 connections`` (closed loop) or ``50 req/s`` (open loop; achieved for a trace)."""
    if r.config.scenario == "server":
        c = r.metrics.client or {}
        rate = r.config.request_rate or c.get("target_rate") or c.get("achieved_rate") or 0.0
        return f"{rate:g} req/s"
    n = r.config.concurrency
    return f"{n} connection{'' if n == 1 else 's'}"


def http_label(r: Result) -> str:
    """THE label of a load or serve Result: ``tiny-cnn http 1x3x32x32, 2 connections (closed loop)``,
    ``tiny-cnn served (1 instance, no batching)``."""
    if r.kind == "serve":
        return f"{workload_label(point(r), with_shapes=False)} served ({server_text(r)})"
    return f"{workload_label(point(r))}, {load_text(r)} ({mode(r)})"


def server_text(serve: Result) -> str:
    """Instances, batching and threads of a served model, from its serve Result: ``1 instance, max batch 4
    within 100 us, 1 thread each``."""
    s = serve.metrics.server or {}
    o = s.get("options") or {}
    n = o.get("instance_count") or 1
    parts = [f"{n} instance{'' if n == 1 else 's'}"]
    mb = o.get("max_batch_size") if o.get("max_batch_size") is not None else s.get("max_batch_size")
    if o.get("dynamic_batching") and mb:
        parts.append(f"dynamic batching up to {mb} rows within {o.get('max_queue_delay_us', 0):g} us")
    else:
        parts.append("no dynamic batching")
    t = serve.config.session.effective.get("intra_op_num_threads")
    if isinstance(t, int) and t > 0:
        parts.append(f"{t} intra-op thread{'' if t == 1 else 's'} each")
    return ", ".join(parts)


def _peak(conns: Any) -> int:
    """Peak open connections from ``metrics.client.connections`` (a dict, or a count from a Locust import)."""
    if isinstance(conns, dict):
        conns = conns.get("peak")
    return int(conns) if isinstance(conns, (int, float)) else 0


def _serve_beside(e: Entry, serves: list[Entry]) -> Entry | None:
    """The serve Result ``load MODEL`` wrote in the same folder as this load step (the one closest in time)."""
    near = [s for s in serves if s.path.parent == e.path.parent]
    return min(near, key=lambda s: abs(_t(s.result) - _t(e.result)), default=None)


def _t(r: Result) -> float:
    import datetime as _dt

    try:
        return _dt.datetime.fromisoformat(r.created_at).timestamp()
    except (TypeError, ValueError):
        return 0.0


def setups(entries: list[Entry]) -> list[dict[str, Any]]:
    """One block per load invocation: ``{"command", "rows": [(what, value)]}`` with the server and the client
    described apart (see the module docstring)."""
    serves = [e for e in entries if e.kind == "serve"]
    runs: dict[str, list[Entry]] = {}
    for e in entries:
        if e.kind in CLIENT_KINDS:
            runs.setdefault(e.source + "|" + str(e.path.parent), []).append(e)
    out = []
    for es in runs.values():
        es = sorted(es, key=lambda x: (x.result.config.request_rate or 0.0, x.result.config.concurrency))
        r = es[0].result
        place = r.run.get("placement") or {}
        serve = _serve_beside(es[0], serves)
        server_cpus = place.get("server_cpus") or (serve.result.system.cpu_affinity if serve else None)
        srv = r.run.get("server") or {}
        who = " ".join(str(srv[k]) for k in ("name", "version") if srv.get(k)) or "unknown server"
        if serve is not None:
            server = f"{who}, {server_text(serve.result)}"
        elif place.get("server_cpus"):
            server = who
        else:
            server = f"{who} (external: its CPUs, instances and batching are not in these Results)"
        gen = place.get("generator_cpus") or r.config.placement.cpus
        c = [x.result.metrics.client or {} for x in es]
        conns = max((_peak(x.get("connections")) for x in c), default=0)
        cpu = [x["client_cpu_percent"] for x in c if isinstance(x.get("client_cpu_percent"), (int, float))]
        workers = max((x.get("workers") or 1 for x in c), default=1)
        rows = [
            ("target", str(r.run.get("target", r.model.path))),
            ("server", server),
            ("server CPUs", f"pinned to CPUs {format_cpulist(server_cpus)}" if server_cpus
             else "not recorded"),
            ("client (load generator)", f"{workers} process(es), up to {conns} connection(s) open; connections"
             " are requests in flight, not threads"),
            ("client CPUs", (f"pinned to CPUs {format_cpulist(gen)}" if gen else "not pinned")
             + (", disjoint from the server's" if place.get("disjoint") else "")
             + (f"; its own CPU use up to {max(cpu):.0f} %" if cpu else "")),
            ("steps", f"{len(es)} ({mode(r)}): " + ", ".join(load_text(x.result) for x in es[:12])
             + (" ..." if len(es) > 12 else "")),
        ]  # fmt: skip
        out.append({"command": es[0].source, "rows": rows})
    return out


__all__ = ["CLIENT_KINDS", "HTTP_KINDS", "http_label", "load_text", "mode", "server_text", "setups"]
