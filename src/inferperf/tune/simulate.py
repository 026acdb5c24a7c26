"""A simulated evaluator: trials measured by the null backend on the fake clock, from a latency surface.

Used by the tests (and usable for trying a search strategy without a model): each run is a real
:func:`inferperf.measure.bench.run_once` of the null backend with a :class:`~inferperf.clock.FakeClock`,
its latency script drawn from a :class:`~inferperf.backends.null.LatencySurface` at the trial's
configuration. Concurrency is simulated, not run in threads (a fake clock has no parallel time): the run
measures one stream of the surface's per-query latencies, and the Result's throughput is scaled to
``concurrency`` closed-loop streams by Little's law (throughput = streams / latency); its config records
the trial's concurrency.
"""

from __future__ import annotations

from typing import Any

from ..clock import FakeClock
from ..config import BenchConfig
from ..results.model import Result


class SurfaceEvaluator:
    """Evaluator over a :class:`LatencySurface` (see the module docstring).

    Args:
        surface: the latency surface (a :class:`inferperf.backends.null.LatencySurface`; made by the caller: tune
            does not import backends).
        seed: noise seed.
        threads_default: intra-op threads when a trial does not set them.
        sleep_s: real seconds each run also waits (so several processes sharing a study overlap in time).
    """

    served = False

    def __init__(self, surface: Any, seed: int = 0, threads_default: int = 2, sleep_s: float = 0.0) -> None:
        self.surface, self.seed, self.threads_default, self.sleep_s = surface, seed, threads_default, sleep_s
        self.runs: list[dict[str, Any]] = []

    def run(self, model: str, cfg: BenchConfig, params: dict[str, Any], repeat_index: int) -> Result:
        """One simulated run of ``cfg`` (its stop rule decides the sample count, on the fake clock)."""
        import time

        from ..measure.bench import run_once

        if self.sleep_s:
            time.sleep(self.sleep_s)

        threads = cfg.session.intra_op_num_threads or self.threads_default
        batch = cfg.workload.batch_size or 1
        key = repr(sorted(params.items()))
        n = max(cfg.stop.min_iterations, 1) + cfg.warmup.iterations + 64
        script = self.surface.script(key, n, self.seed, threads, batch, cfg.concurrency, cfg.session_mode)
        one = cfg.model_copy(update={"backend": "null", "concurrency": 1, "scenario": "single-stream",
                                     "sampler": False}, deep=True)
        r = run_once("null", one, clock=FakeClock(), backend_kwargs={"latencies_s": script},
                     repeat_index=repeat_index)
        import hashlib

        r.case_key = hashlib.sha256(key.encode()).hexdigest()[:16]  # the script is in the settings: key the configuration
        c = cfg.concurrency
        tp = r.metrics.throughput
        tp.queries_per_s *= c
        tp.samples_per_s *= c
        r.config.concurrency = c
        r.config.session_mode = cfg.session_mode
        r.notes.append(f"simulated: {c} stream(s) from a latency surface on the fake clock")
        self.runs.append({"params": params, "repeat_index": repeat_index, "samples": len(r.samples.latency_ns)})
        return r
