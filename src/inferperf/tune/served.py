"""Served trials: each run starts a fresh ``inferperf serve`` with the trial's batching and instances, and drives
closed-loop ``inferperf load`` at it from disjoint CPUs.

The server (a spawned child, :func:`inferperf.serve.child.own_server`) gets the trial's session settings
(intra-op threads per instance), ``max_batch_size``, ``max_queue_delay_us`` and ``instance_count``; the
generator runs ``concurrency`` closed-loop streams with Triton's binary tensors (so JSON parsing does not
stand in for the model) and stops after the stage's sample count (``requests``). The Result is the load
step's (kind load: latency from the client, the server's queue/compute split in ``metrics.server``).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from ..config import BenchConfig
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
