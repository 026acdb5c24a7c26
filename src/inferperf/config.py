"""Plain-data settings for a measurement (pydantic), layered defaults < file < CLI.

Session settings keep ONNX Runtime's names (``intra_op_num_threads``,
``execution_mode``, ...). Defining a config imports no runtime: the backend
named in ``BenchConfig.backend`` is imported only when a session is created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .results.model import PercentileMethod, Placement, Scenario

ExecutionMode = Literal["sequential", "parallel"]
GraphOptimizationLevel = Literal["disable", "basic", "extended", "all"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class SessionOptions(_Config):
    """Runtime session settings, under ONNX Runtime's ``SessionOptions`` names.

    ``intra_op_num_threads=None`` means inferperf's default: the effective CPUs
    of this process (affinity and cgroup quota), set explicitly. ``0`` means
    ONNX Runtime's own default. ``session_config`` holds any
    ``session.*``/``optimization.*`` config entry (``add_session_config_entry``).
    """

    intra_op_num_threads: int | None = Field(default=None, ge=0)
    inter_op_num_threads: int | None = Field(default=None, ge=0)
    execution_mode: ExecutionMode = "sequential"
    graph_optimization_level: GraphOptimizationLevel = "all"
    enable_mem_pattern: bool = True
    enable_cpu_mem_arena: bool = True
    providers: list[str] = Field(default_factory=lambda: ["CPUExecutionProvider"])
    session_config: dict[str, str] = Field(default_factory=dict)


class WorkloadOptions(_Config):
    """How inputs are made: dims, pool, data source and seed.

    ``shapes`` maps an input name (or ``""`` for "the only input") to its full
    shape; ``dims`` sets a symbolic dim by name wherever it appears;
    ``batch_size`` sets the leading symbolic dim (rows per query).
    ``int_ranges`` are inclusive ``[lo, hi]``; ``values`` fill an input with
    one constant. ``max_pool_fraction_of_ram`` guards memory unless ``force``.
    """

    shapes: dict[str, list[int]] = Field(default_factory=dict)
    dims: dict[str, int] = Field(default_factory=dict)
    batch_size: int | None = Field(default=None, ge=1)
    input_pool_size: int = Field(default=16, ge=1)
    seed: int = Field(default=0, ge=0)
    int_ranges: dict[str, tuple[int, int]] = Field(default_factory=dict)
    values: dict[str, float] = Field(default_factory=dict)
    input_data: Path | None = None
    force: bool = False
    max_pool_fraction_of_ram: float = Field(default=0.25, gt=0, le=1)


class WarmupOptions(_Config):
    """Warm-up: runs until both ``iterations`` and ``duration_s`` (s) are reached. Never counted."""

    iterations: int = Field(default=10, ge=1)
    duration_s: float = Field(default=0.0, ge=0)


class StopOptions(_Config):
    """Stop rule: both ``min_iterations`` and ``min_duration_s`` (s) must be met, capped by ``max_duration_s`` (s)."""

    min_iterations: int = Field(default=100, ge=1)
    min_duration_s: float = Field(default=5.0, ge=0)
    max_duration_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _cap_above_minimum(self) -> StopOptions:
        if self.max_duration_s < self.min_duration_s:
            raise ValueError(
                f"max_duration_s ({self.max_duration_s}) is below min_duration_s ({self.min_duration_s}):"
                " raise --max-duration-s or lower --duration-s"
            )
        return self


class ValidityOptions(_Config):
    """Validity rules: the most a window median may vary (CV %, across >= ``min_windows`` windows)."""

    max_window_cv_percent: float = Field(default=10.0, gt=0)
    min_windows: int = Field(default=5, ge=2)
    n_windows: int = Field(default=10, ge=2)


#: short names accepted wherever a backend is named; configs store the canonical name
BACKEND_ALIASES = {"ort": "onnxruntime", "ov": "openvino", "pytorch": "torch"}


def canonical_backend(name: str) -> str:
    """``onnxruntime``, ``openvino`` or ``torch`` for a name or alias (``ort``, ``ov``, ``pytorch``; any case);
    other names lower-cased and otherwise unchanged (the registry rejects unknown ones)."""
    key = name.strip().lower()
    return BACKEND_ALIASES.get(key, key)


class BenchConfig(_Config):
    """One bench case: backend, session, workload, scenario and measurement rules.

    ``scenario``: ``single-stream`` (one query at a time), ``concurrent``
    (``concurrency`` closed-loop streams; ``session_mode`` shared = one session
    for all, per-stream = one each) or ``offline`` (batches of
    ``workload.batch_size`` back to back; samples/s). ``concurrency`` > 1
    implies concurrent (an explicit ``single-stream`` with it is refused). ``repeat`` > 1 runs the case that many times, each in a
    fresh worker process. ``env`` is set in the worker process only (e.g.
    ``OMP_WAIT_POLICY``, ``LD_PRELOAD`` of an allocator). ``sampler`` samples CPU/RSS at ``1/sampler_interval_s`` Hz.
    ``energy_idle_s``: seconds of idle power measured before warm-up when an energy counter is readable (RAPL,
    NVML; :mod:`inferperf.measure.energy`), subtracted from the measured window's energy; 0 = none.
    ``allocator``: ``system`` (glibc malloc), or ``jemalloc`` / ``tcmalloc`` LD_PRELOAD-ed into the worker process
    (:mod:`inferperf.measure.allocator`; a non-system allocator always runs in a worker).
    """

    backend: str = "onnxruntime"
    session: SessionOptions = Field(default_factory=SessionOptions)
    workload: WorkloadOptions = Field(default_factory=WorkloadOptions)
    scenario: Scenario = "single-stream"
    concurrency: int = Field(default=1, ge=1)
    warmup: WarmupOptions = Field(default_factory=WarmupOptions)
    stop: StopOptions = Field(default_factory=StopOptions)
    validity: ValidityOptions = Field(default_factory=ValidityOptions)
    session_mode: Literal["shared", "per-stream"] = "shared"
    env: dict[str, str] = Field(default_factory=dict)
    placement: Placement = Field(default_factory=Placement)
    percentile_method: PercentileMethod = "linear"
    sampler: bool = True
    sampler_interval_s: float = Field(default=0.1, gt=0)
    energy_idle_s: float = Field(default=1.0, ge=0)
    allocator: Literal["system", "jemalloc", "tcmalloc"] = "system"
    repeat: int = Field(default=1, ge=1)
    worker_timeout_s: float | None = Field(default=None, gt=0)
    null_latency_ms: list[float] = Field(default_factory=lambda: [0.0])

    @field_validator("null_latency_ms")
    @classmethod
    def _non_negative(cls, v: list[float]) -> list[float]:
        if not v or any(x < 0 or x != x for x in v):
            raise ValueError("--null-latency-ms takes latencies >= 0 ms")
        return v

    @field_validator("backend")
    @classmethod
    def _canonical(cls, v: str) -> str:
        return canonical_backend(v)  # `ov` and `openvino` are one case: one case_key, one code path

    @model_validator(mode="after")
    def _scenario_rules(self) -> BenchConfig:
        if self.concurrency > 1 and self.scenario == "single-stream":
            if "scenario" in self.model_fields_set:  # asked for by name (flag or file), not the default
                raise ValueError(f"--scenario single-stream contradicts --concurrency {self.concurrency}: drop one")
            object.__setattr__(self, "scenario", "concurrent")
        if self.scenario == "offline" and self.concurrency > 1:
            raise ValueError("offline runs one stream of large batches: drop --concurrency or use concurrent")
        if self.scenario == "offline" and not self.workload.batch_size:
            raise ValueError("offline needs --batch-size N (rows per query)")
        if self.scenario == "server":
            raise ValueError("the server scenario (open-loop arrivals) comes with `inferperf load`; use concurrent")
        return self


def load_mapping(path: str | Path, source: str, expect: str, *, empty_ok: bool = False) -> dict[str, Any]:
    """The mapping a YAML settings file holds (JSON too: YAML's subset): the one loader of the settings files
    (sweep matrices, tune spaces, pipelines, gate files, mock profiles, repository ``model.yaml``).

    Args:
        path: the file. source: how an error names it (``--matrix 'm.yaml'``). expect: what it must hold, said
            when it holds something else (``a mapping with a models: key, e.g. ...``).
        empty_ok: an empty file is ``{}`` (else it is refused as not a mapping).

    Raises:
        UsageError: one line naming ``source``: a missing or unreadable file, YAML that does not parse (with its
            line), or anything but a mapping.
    """
    import yaml

    from .errors import UsageError

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{source} not found (or not a file): check the path")
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{source} cannot be read ({type(e).__name__}): check the file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UsageError(f"{source} is not valid YAML{at}: {problem}") from None
    if doc is None and empty_ok:
        return {}
    if not isinstance(doc, dict):
        raise UsageError(f"{source} must be {expect}")
    return doc
