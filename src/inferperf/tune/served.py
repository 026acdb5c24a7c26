"""Served trials: each run starts a fresh ``inferperf serve`` with the trial's batching and instances, and drives
closed-loop ``inferperf load`` at it from disjoint CPUs.

The server (a spawned child, :func:`inferperf.serve.child.own_server`) gets the trial's session settings
(intra-op threads per instance), ``max_batch_size``, ``max_queue_delay_us`` and ``instance_count``; the
generator runs ``concurrency`` closed-loop streams with Triton's binary tensors (so JSON parsing does not
stand in for the model) and stops after the stage's sample count (``requests``). The Result is the load
step's (kind load: latency from the client, the server's queue/compute split in ``metrics.server``).

:func:`run_load_spec` is ``inferperf load``'s library call: a URL is driven as is, a model is served here first (the
composition ``loadgen`` cannot make: it never imports ``serve``).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from ..config import BenchConfig
from ..errors import UsageError
from ..loadgen.spec import LoadOutcome, LoadSpec
from ..results.model import Result
from ..serve.child import own_server, split_cpus
from .space import serve_params

#: seconds of each served run never counted (connections opened, first batches formed)
WARMUP_S = 1.0


class ServedEvaluator:
    """Evaluator for ``inferperf tune --serve`` (see the module docstring).

    Args:
        serve_base: ServeOptions fields every trial starts from.
        protocol: ``binary`` (default) or ``json`` tensors.
    """

    served = True

    def __init__(self, serve_base: dict[str, Any] | None = None, protocol: str = "binary",
                 command: list[str] | None = None) -> None:
        self.serve_base, self.protocol, self.command = dict(serve_base or {}), protocol, command

    def run(self, model: str, cfg: BenchConfig, params: dict[str, Any], repeat_index: int) -> Result:
        """One served run: server up, ``cfg.stop.min_iterations`` measured requests at ``cfg.concurrency``, server down.

        Raises:
            UsageError: the server refuses the model or the settings; MeasurementError: it never became ready
            or stopped answering.
        """
        from ..loadgen.options import LoadConfig
        from ..loadgen.run import load

        opts = {**self.serve_base, **serve_params(params)}
        cpus = sorted(os.sched_getaffinity(0))
        gen, srv = split_cpus(cpus)
        server_cfg = cfg.model_copy(update={"concurrency": 1, "scenario": "single-stream", "repeat": 1})
        shapes = [f"{k}:{'x'.join(map(str, v))}" if k else "x".join(map(str, v)) for k, v in cfg.workload.shapes.items()]
        with own_server(model, srv, server_cfg, opts) as (url, name, stop):
            lc = LoadConfig(url=url, model=name, protocol=self.protocol, shapes=shapes, concurrency=[cfg.concurrency],
                            requests=cfg.stop.min_iterations, warmup_s=WARMUP_S, seed=cfg.workload.seed)
            before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, gen)
            try:
                r = load(lc, command=self.command)[0]
            finally:
                os.sched_setaffinity(0, before)
            stop()
        doc = {"model": model, "config": server_cfg.model_dump(mode="json", include={"backend", "session", "workload"}),
               "serve": opts, "concurrency": cfg.concurrency}
        r.case_key = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]  # not the port
        r.run.update(serve_options=opts, placement={"generator_cpus": gen, "server_cpus": srv,
                                                     "disjoint": not set(gen) & set(srv)}, repeat_index=repeat_index)
        return r


def run_load_spec(spec: LoadSpec, *, command: list[str] | None = None, **hooks: Any) -> LoadOutcome:
    """Check ``spec`` and run it: a URL driven as :func:`inferperf.loadgen.spec.run_load` drives it; an ONNX file or ``zoo:NAME``
    served first on a free 127.0.0.1 port by a child ``inferperf serve`` pinned to CPUs disjoint from the
    generator's (both recorded: ``placement``), loaded (its zoo shapes unless told), then stopped gracefully: its
    own Result (kind serve) is ``outcome.server``. ``hooks``: :func:`inferperf.loadgen.spec.run_steps`'s callbacks.

    Raises:
        UsageError: as :meth:`~inferperf.loadgen.spec.LoadSpec.check`; the server refuses the model.
        MeasurementError: the server never became ready. Interrupted, GateFailed: as ``run_steps``.
    """
    from ..loadgen.spec import run_steps, served_shapes

    if spec.check().cfg is None or spec.target is None:
        raise UsageError("run_load_spec runs a load: a Locust import is inferperf.loadgen.locust_import")
    if spec.is_url:
        return run_steps(spec.cfg, command=command, **hooks)
    gen, srv = split_cpus(sorted(os.sched_getaffinity(0)))
    placement = {"generator_cpus": gen, "server_cpus": srv, "disjoint": not set(gen) & set(srv)}
    with own_server(spec.target, srv, allow_client_shm=spec.cfg.shared_memory == "system") as (url, name, stop):
        cfg = spec.cfg.model_copy(update={"url": url, "model": spec.cfg.model or name,
                                          "shapes": served_shapes(spec.target, spec.cfg)})
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, gen)
        try:
            outcome = run_steps(cfg, command=command, placement=placement, **hooks)
            outcome.server = stop()
        finally:
            os.sched_setaffinity(0, before)
    if outcome.server is not None:
        outcome.server.run["placement"] = placement
    return outcome
