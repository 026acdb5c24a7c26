"""A model served in a child process on a free 127.0.0.1 port, pinned apart from the load that drives it.

``loadgen`` never imports ``serve`` (DESIGN's layering), so what composes the two (``inferperf load MODEL``,
the served trials of ``inferperf tune --serve``, ``inferperf plan --validate``) starts its server through
:func:`own_server` here.
The server runs in a *spawned* child (a fresh interpreter: no shared interpreter lock with the load
generator, and a fresh runtime per trial), pinned to the CPUs :func:`split_cpus` gives it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import MeasurementError, UsageError


def split_cpus(cpus: list[int]) -> tuple[list[int], list[int]]:
    """(generator CPUs, server CPUs), disjoint: the generator gets a quarter (at least one), the server the rest.
    With one CPU both get it (noted in the Result)."""
    if len(cpus) < 2:
        return list(cpus), list(cpus)
    n_gen = max(1, len(cpus) // 4)
    return cpus[-n_gen:], cpus[:-n_gen]


def _serve_child(model: str, cpus: list[int], cfg_doc: dict[str, Any] | None, opts_doc: dict[str, Any] | None,
                 conn: Any, allow_client_shm: bool = False) -> None:
    """Child process: serve ``model`` pinned to ``cpus``; report the port; stop on request; send the serve Result.

    It ignores SIGINT: a terminal's Ctrl-C reaches the whole process group, and the parent, which owns this
    server's lifetime, stops it gracefully and keeps its Result (issue 23 item 7)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.sched_setaffinity(0, cpus)
        from ..config import BenchConfig
        from .options import ServeOptions
        from .result import serve_result
        from .server import serving

        cfg = BenchConfig.model_validate(cfg_doc) if cfg_doc else BenchConfig()
        opts = ServeOptions.model_validate({**(opts_doc or {}), "cpus": cpus})
        with serving(model, cfg, opts, host="127.0.0.1", port=0) as h:
            if allow_client_shm:
                h.app.allow_client_shm()
            conn.send(("ready", h.url, next(iter(h.app.models))))
            conn.recv()  # any message: stop
        conn.send(("result", serve_result(h.app, model, cfg, command=["inferperf", "serve", model]).model_dump()))
    except BaseException as e:  # noqa: BLE001 - one line to the parent
        conn.send(("error", e if isinstance(e, UsageError) else MeasurementError(f"server failed: {e}")))


@contextmanager
def own_server(model: str, server_cpus: list[int], cfg: Any = None, opts: dict[str, Any] | None = None,
               allow_client_shm: bool = False) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    """Start ``inferperf serve MODEL`` in a child process; yields (url, model name, stop) where ``stop()``
    stops it gracefully and returns its Result (kind serve) or None; ``stop.pid`` is the server's process id
    (its threads' CPU time: :mod:`inferperf.measure.threads`).

    Args:
        cfg: the BenchConfig of the served sessions (threads, backend, shapes); defaults if None.
        opts: ServeOptions fields (batching, instances); ``cpus`` is set to ``server_cpus``.
        allow_client_shm: serve Triton's system shared memory (``serve --allow-client-shm``), for a load with
            ``--shared-memory system``.

    Raises:
        UsageError: unknown or unloadable model, bad serving settings (the server's own one-line error).
        MeasurementError: the server did not become ready in 600 s.
    """
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    cfg_doc = cfg.model_dump(mode="json") if cfg is not None else None
    proc = ctx.Process(target=_serve_child, args=(model, server_cpus, cfg_doc, opts, there, allow_client_shm),
                       daemon=True)
    proc.start()
    there.close()
    state: dict[str, Any] = {"result": None, "stopped": False}

    def stop() -> Any:
        """Ask the server to stop; its Result (or None)."""
        if not state["stopped"]:
            state["stopped"] = True
            from ..results.model import Result

            here.send("stop")
            if here.poll(120):
                kind, payload = here.recv()
                state["result"] = Result.model_validate(payload) if kind == "result" else None
        return state["result"]

    try:
        if not here.poll(600):
            raise MeasurementError(f"inferperf serve {model} did not become ready within 600 s")
        kind, *rest = here.recv()
        if kind == "error":
            raise rest[0]
        stop.pid = proc.pid  # type: ignore[attr-defined]
        yield rest[0], rest[1], stop
        stop()
    finally:
        if not state["stopped"]:  # left early (an error, Ctrl-C): ask it to stop rather than wait out the join
            state["stopped"] = True
            try:
                here.send("stop")
            except (OSError, ValueError):
                pass
        proc.join(30)
        if proc.is_alive():
            proc.kill()
            proc.join(10)
