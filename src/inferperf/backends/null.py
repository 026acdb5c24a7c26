"""The null backend: replays a scripted latency sequence; runs no model.

It serves two purposes: tests (with a :class:`~inferperf.clock.FakeClock` the
backend advances the clock by each scripted latency, so stop rules and
warm-up are exact), and measuring inferperf's own per-query overhead (a
latency of 0 returns at once; the harness cost is all that is left).
With the real clock a positive latency is a busy-wait, so it holds a core
like a CPU-bound runtime would.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ..config import SessionOptions
from ..errors import ModelError
from ..results.model import TensorInfo


class NullBackend:
    """Scripted-latency backend.

    Args:
        session: ignored except for recording.
        latencies_s: latency script in seconds, cycled (default: ``[0.0]``).
        clock: a FakeClock to advance (tests); None busy-waits on the real clock.
        inputs: signature to report; by default the model file's inputs (read with
            ``onnx``), else one float32 input ``x`` of shape [1].
    """

    name = "null"

    def __init__(
        self,
        session: SessionOptions,
        latencies_s: Sequence[float] = (0.0,),
        clock: Any = None,
        inputs: list[TensorInfo] | None = None,
        **_: Any,
    ) -> None:
        self._opts = session
        self._script = [float(x) for x in latencies_s] or [0.0]
        self._clock = clock
        self._inputs = inputs
        self._outputs: list[TensorInfo] = [TensorInfo(name="y", dtype="float32", shape=[1])]
        self._fetch_it: Any = None

    def load(self, model_path: Path | None) -> None:
        """Read the signature from the model file when there is one (no runtime involved).

        Raises:
            ModelError: an ``.onnx`` path that is missing, a folder or empty.
        """
        if self._inputs is None and model_path is not None and Path(model_path).suffix == ".onnx":
            import onnx

            path = Path(model_path).expanduser()
            if not path.is_file() or path.stat().st_size == 0:
                raise ModelError(f"model file '{model_path}' not found, not a file or empty: check the path")
            m = onnx.load(str(path), load_external_data=False)
            init = {t.name for t in m.graph.initializer}
            self._inputs = [_vi(v) for v in m.graph.input if v.name not in init]
            self._outputs = [_vi(v) for v in m.graph.output]
        if self._inputs is None:
            self._inputs = [TensorInfo(name="x", dtype="float32", shape=[1])]

    def inputs(self) -> list[TensorInfo]:
        """The reported signature."""
        return list(self._inputs or [])

    def outputs(self) -> list[TensorInfo]:
        """The reported outputs (nothing is computed)."""
        return list(self._outputs)

    def runner(self) -> Callable[[dict[str, Any]], Any]:
        """A callable that 'takes' the next scripted latency and returns ``None``."""
        script = self._script
        if self._clock is not None and getattr(self._clock, "is_fake", False):
            advance = self._clock.advance_ns
            it = itertools.cycle([round(s * 1e9) for s in script])

            def run_fake(feed: dict[str, Any]) -> None:
                advance(next(it))

            return run_fake
        if all(s == 0.0 for s in script):
            return _return_none
        now = time.perf_counter_ns
        it_ns = itertools.cycle([round(s * 1e9) for s in script])

        def run_spin(feed: dict[str, Any]) -> None:
            end = now() + next(it_ns)
            while now() < end:
                pass

        return run_spin

    def fetch(self, feed: dict[str, Any]) -> list[np.ndarray]:
        """One served call (``inferperf serve --backend null``: a scripted server): waits the next scripted latency
        with the GIL released (``time.sleep``, as a runtime's call releases it; it does not hold a core) and
        answers zeros of each output's dtype, its first dim the rows of the first input, other symbolic dims 1.
        On a FakeClock it advances the clock instead."""
        if self._fetch_it is None:
            self._fetch_it = itertools.cycle(self._script)
        wait = next(self._fetch_it)
        if self._clock is not None and getattr(self._clock, "is_fake", False):
            self._clock.advance_ns(round(wait * 1e9))
        elif wait > 0:
            time.sleep(wait)
        first = next(iter(feed.values()), None)
        rows = int(first.shape[0]) if first is not None and getattr(first, "ndim", 0) else 1
        return [np.zeros([rows] + [d if isinstance(d, int) and d > 0 else 1 for d in o.shape[1:]], o.dtype)
                for o in self._outputs]

    def requested_settings(self) -> dict[str, Any]:
        """The latency script (s) and the session settings as given."""
        return {"latencies_s": self._script, **self._opts.model_dump(mode="json")}

    def effective_settings(self) -> dict[str, Any]:
        """Same as requested: nothing is resolved."""
        return {"latencies_s": self._script}

    def notes(self) -> list[str]:
        """Always notes that no model ran."""
        return ["null backend: scripted latencies, no model ran"]

    def close(self) -> None:
        """Nothing to release."""


def _return_none(feed: dict[str, Any]) -> None:
    return None


def _vi(v: Any) -> TensorInfo:
    from onnx import helper

    t = v.type.tensor_type
    dims: list[int | str | None] = []
    for d in t.shape.dim:
        dims.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or None))
    dtype = helper.tensor_dtype_to_np_dtype(t.elem_type).name if t.elem_type else "float32"
    return TensorInfo(name=v.name, dtype=dtype, shape=dims)


class LatencySurface:
    """A scripted latency surface: per-query latency as a function of intra-op threads, batch, concurrency and
    session mode, with seeded log-normal noise. For testing searches (``inferperf.tune``) on the fake clock.

    Model (noise-free, ms): ``base_ms x ((1 - p) + p / threads)`` (Amdahl's law with parallel fraction
    ``p``) ``x (1 + row_cost x (batch - 1))`` ``x max(1, concurrency x threads / cpus)`` (time-sharing once
    the streams ask for more CPUs than exist) ``x shared_penalty`` when several streams share one
    session. ``c`` closed-loop streams then complete ``c x batch / latency`` samples per second
    (Little's law).

    Args:
        base_ms: one-thread batch-1 latency (ms).
        parallel_fraction: Amdahl's p in [0, 1].
        row_cost: extra latency per extra row, as a fraction of one row.
        cpus: CPUs of the simulated machine.
        shared_penalty: factor for a shared session under concurrency (>= 1: contention).
        noise_cv: spread of the log-normal noise (sigma of log latency).
        planted: ``{repr(sorted(params.items())): factor}``: the first run of that configuration draws its
            latencies x factor (a lucky draw, for validation tests).
    """

    def __init__(self, base_ms: float = 10.0, parallel_fraction: float = 0.8, row_cost: float = 0.7, cpus: int = 2,
                 shared_penalty: float = 1.15, noise_cv: float = 0.05, planted: dict[str, float] | None = None) -> None:
        self.base_ms, self.p, self.row_cost, self.cpus = base_ms, parallel_fraction, row_cost, cpus
        self.shared_penalty, self.noise_cv = shared_penalty, noise_cv
        self.planted = dict(planted or {})
        self._runs: dict[str, int] = {}

    def latency_ms(self, threads: int, batch: int = 1, concurrency: int = 1, session_mode: str = "shared") -> float:
        """Noise-free per-query latency (ms) of a configuration."""
        t = max(1, threads)
        ms = self.base_ms * ((1.0 - self.p) + self.p / t) * (1.0 + self.row_cost * (max(1, batch) - 1))
        ms *= max(1.0, concurrency * t / self.cpus)
        if concurrency > 1 and session_mode == "shared":
            ms *= self.shared_penalty
        return ms

    def samples_per_s(self, threads: int, batch: int = 1, concurrency: int = 1, session_mode: str = "shared") -> float:
        """Noise-free throughput (samples/s) of a configuration."""
        return concurrency * max(1, batch) * 1000.0 / self.latency_ms(threads, batch, concurrency, session_mode)

    def script(self, key: str, n: int, seed: int, threads: int, batch: int = 1, concurrency: int = 1,
               session_mode: str = "shared") -> list[float]:
        """``n`` latencies (s) for one run of configuration ``key``: noise seeded by (``seed``, ``key``), the
        planted factor on that configuration's first run."""
        import hashlib

        import numpy as np

        first = self._runs.get(key, 0) == 0
        self._runs[key] = self._runs.get(key, 0) + 1
        mix = int.from_bytes(hashlib.sha256(f"{seed}|{key}|{self._runs[key]}".encode()).digest()[:8], "little")
        rng = np.random.default_rng(mix)
        ms = self.latency_ms(threads, batch, concurrency, session_mode) * (self.planted.get(key, 1.0) if first else 1.0)
        return (ms / 1e3 * rng.lognormal(0.0, self.noise_cv, n)).tolist()
