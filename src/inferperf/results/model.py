"""The Result document (schema v1): one JSON object per measured case.

Every field, with its unit, is documented in ``docs/results-schema.md``. Units
live in the field names (``_ms``, ``_s``, ``_ns``, ``_bytes``, ``_per_s``,
``_percent``). Optional blocks that a later command fills (``accuracy``,
``server``) are present as ``null`` in v1.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

SCHEMA_VERSION = 1

Scenario = Literal["single-stream", "concurrent", "offline", "server"]
#: What made a Result: the command (``server`` is a scenario, open-loop load; a server-side Result is ``serve``).
ResultKind = Literal["bench", "sweep", "optimize", "runtimes", "serve", "load", "profile", "pipeline", "tune", "plan"]
PercentileMethod = Literal["linear", "nearest-rank"]
#: A Result's verdict: VALID, INVALID (the measurement cannot be trusted), OVERLOADED (a trustworthy measurement
#: of a target that fell behind the load offered to it: open-loop ``load`` only).
Verdict = Literal["VALID", "INVALID", "OVERLOADED"]


class _Model(BaseModel):
    # Unknown fields are kept, not refused: a document from a newer minor release still loads.
    model_config = ConfigDict(extra="allow", protected_namespaces=())


class ToolInfo(_Model):
    """Which tool wrote the Result: ``name`` and ``version`` (PEP 440 string)."""

    name: str = "inferperf"
    version: str


class GpuInfo(_Model):
    """One GPU as NVML reports it: name, memory in bytes, driver version."""

    index: int
    name: str
    memory_bytes: int | None = None
    driver: str | None = None


class SystemInfo(_Model):
    """Machine inventory at measurement time.

    ``cpu_affinity`` lists the CPU ids this process may run on; ``effective_cpus``
    is the tighter of that count and the cgroup CPU quota (rounded up; the raw
    quota is in ``cgroup_cpu_limit``). Unknown values are ``null``, never guessed.
    """

    cpu_model: str | None = None
    isa_flags: list[str] = Field(default_factory=list)
    physical_cores: int | None = None
    logical_cores: int
    smt_active: bool | None = None
    numa_nodes: dict[str, list[int]] | None = None
    caches: dict[str, int] | None = None
    cpu_affinity: list[int] = Field(default_factory=list)
    cgroup_cpu_limit: float | None = None
    effective_cpus: int
    governor: str | None = None
    cpu_mhz: dict[str, float] | None = None
    memory_bytes: int | None = None
    os: str
    python: str
    packages: dict[str, str] = Field(default_factory=dict)
    gpus: list[GpuInfo] = Field(default_factory=list)


class TensorInfo(_Model):
    """A model input or output: name, numpy dtype name (``float32``), shape as declared.

    A dim is an int (fixed), a str (symbolic name) or ``null`` (unnamed).
    """

    name: str
    dtype: str
    shape: list[int | str | None]


class ModelInfo(_Model):
    """The model file measured: path, sha256 (hex), size in bytes, opset, I/O signature, variant."""

    path: str
    sha256: str
    size_bytes: int
    opset: int | None = None
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    variant: str = "fp32"
    zoo_name: str | None = None
    source_sha256: str | None = None  # the file this one was derived from (a made-batchable copy), else None


class SessionConfig(_Model):
    """Runtime session settings under the runtime's own names.

    ``requested`` is what the user (or inferperf's defaults) asked for;
    ``effective`` is what the runtime resolved them to (e.g. 0 threads -> the
    count ONNX Runtime picks).
    """

    requested: dict[str, Any] = Field(default_factory=dict)
    effective: dict[str, Any] = Field(default_factory=dict)


class WorkloadConfig(_Model):
    """Concrete inputs: resolved ``shapes`` (input name -> list of ints), batch size (rows per query),
    pool of distinct inputs cycled through, where the data came from and the seed that made it."""

    shapes: dict[str, list[int]]
    dtypes: dict[str, str] = Field(default_factory=dict)
    batch_size: int = 1
    input_pool_size: int
    data_source: str = "synthetic"
    seed: int = 0
    int_ranges: dict[str, list[int]] = Field(default_factory=dict)
    values: dict[str, float] = Field(default_factory=dict)
    batching: str | None = None


class WarmupConfig(_Model):
    """Warm-up runs until both ``iterations`` and ``duration_s`` (s) are met; never counted."""

    iterations: int
    duration_s: float


class StopConfig(_Model):
    """Measurement stops once both ``min_iterations`` and ``min_duration_s`` are met, or at ``max_duration_s``."""

    min_iterations: int
    min_duration_s: float
    max_duration_s: float


class Placement(_Model):
    """Where the measuring process ran: pinned CPU ids and NUMA node (``null`` = not pinned).

    ``memory_bound``: memory was bound to the node too (numactl), not only the CPUs.
    """

    cpus: list[int] | None = None
    numa_node: int | None = None
    memory_bound: bool | None = None


class CaseConfig(_Model):
    """Everything that defines a case; ``case_key`` hashes it with the model's sha256."""

    backend: str
    session: SessionConfig
    workload: WorkloadConfig
    scenario: Scenario = "single-stream"
    concurrency: int = 1
    request_rate: float | None = None
    warmup: WarmupConfig
    stop: StopConfig
    placement: Placement = Field(default_factory=Placement)
    env: dict[str, str] = Field(default_factory=dict)
    allocator: str = "system"  # system | jemalloc | tcmalloc (LD_PRELOAD in the worker)
    percentile_method: PercentileMethod = "linear"
    session_mode: Literal["shared", "per-stream"] = "shared"
    repeat: int = 1


class ColdStart(_Model):
    """Cold start in ms: session creation and the first inference (which is also warm-up run 1).

    ``phases`` holds sub-phases in ms (``runtime_import_ms`` in a fresh worker).
    With repeats the figures are means over runs (each run a fresh process),
    ``per_run`` lists each run's, and ``*_ci95`` are Student's t intervals.
    """

    session_create_ms: float
    first_inference_ms: float
    phases: dict[str, float] = Field(default_factory=dict)
    per_run: list[dict[str, float]] = Field(default_factory=list)
    session_create_ms_ci95: list[float] = Field(default_factory=list)
    first_inference_ms_ci95: list[float] = Field(default_factory=list)


class LatencySummary(_Model):
    """Latency statistics in milliseconds over the measured (post-warm-up) queries.

    Percentiles use ``percentile_method`` (``linear`` interpolation, numpy's
    default, or ``nearest-rank``). ``p50_ci95`` is a distribution-free 95 %
    confidence interval of the median from order statistics.
    """

    count: int
    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p95: float
    p99: float
    p999: float
    max: float
    percentile_method: PercentileMethod = "linear"
    p50_ci95: list[float] = Field(default_factory=list)

    @classmethod
    def empty(cls, percentile_method: PercentileMethod = "linear") -> LatencySummary:
        """The summary of no samples: ``count`` 0 and every figure 0.0 ms (a Result with nothing measured)."""
        zeros = dict.fromkeys(("mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max"), 0.0)
        return cls(count=0, **zeros, percentile_method=percentile_method)


class Throughput(_Model):
    """Completed queries (and samples = queries x batch rows) per second of measurement wall time.

    With repeats, ``queries_per_s`` is the mean over runs, ``per_run`` the run
    figures and ``queries_per_s_ci95`` Student's t 95 % interval over runs
    (empty for one run). ``per_stream`` is queries/s of each concurrent stream.
    """

    queries_per_s: float
    samples_per_s: float
    per_stream: list[float] = Field(default_factory=list)
    duration_s: float
    per_run: list[float] = Field(default_factory=list)
    queries_per_s_ci95: list[float] = Field(default_factory=list)
    samples_per_s_ci95: list[float] = Field(default_factory=list)


class Window(_Model):
    """One time window of a run: start offset (s), completed queries, queries/s, p50 and p99 (ms)."""

    run: int = 0
    t_s: float
    count: int
    queries_per_s: float
    p50_ms: float
    p99_ms: float


class Resources(_Model):
    """Process resource use: mean CPU % during measurement (100 = one core), peak RSS, steal %.

    ``rss_peak_bytes`` is the highest RSS the sampler saw during measurement
    (sampler on), or the process's lifetime peak (``ru_maxrss``, sampler off);
    pooled over runs it is the highest run's. ``session_rss_delta_bytes`` is
    the RSS the session added when it was created.
    """

    cpu_percent_mean: float | None = None
    rss_peak_bytes: int | None = None
    session_rss_delta_bytes: int | None = None
    steal_percent: float | None = None


class ErrorCounts(_Model):
    """Failed queries: total and by exception kind."""

    count: int = 0
    by_kind: dict[str, int] = Field(default_factory=dict)


class Metrics(_Model):
    """All measured figures; ``accuracy``, ``server``, ``client``, ``profile`` and ``stages`` are filled by the
    commands that measure them (optimize and runtimes, serve, load, profile, pipeline); null in bench.
    ``plan`` holds a capacity plan's predictions (kind ``plan``: simulated, never measured); ``generation`` a
    token-stream load step's figures (``load --api openai-chat``).
    ``energy``: RAPL / NVML energy over the measured window, per domain measured or unavailable with the reason
    (:func:`inferperf.measure.energy.energy_block`; docs/results-schema.md)."""

    cold_start: ColdStart | None = None
    latency_ms: LatencySummary
    throughput: Throughput
    windows: list[Window] = Field(default_factory=list)
    resources: Resources | None = None
    errors: ErrorCounts = Field(default_factory=ErrorCounts)
    accuracy: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    client: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    stages: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    generation: dict[str, Any] | None = None  # token streams (load --api openai-*): TTFT, ITL, TPOT, tokens
    energy: dict[str, Any] | None = None


class Samples(_Model):
    """Raw samples, the source of truth. Integer nanoseconds.

    ``latency_ns[i]`` is query i's latency; ``start_offsets_ns[i]`` its start
    relative to the measurement start. Past ~100k samples the arrays live in
    ``sidecar`` (an ``.npz`` beside the JSON) and the lists here are empty.
    """

    latency_ns: list[int] = Field(default_factory=list)
    warmup_latency_ns: list[int] = Field(default_factory=list)
    start_offsets_ns: list[int] = Field(default_factory=list)
    stream_ids: list[int] = Field(default_factory=list)
    run_ids: list[int] = Field(default_factory=list)
    sidecar: str | None = None
    timeline: dict[str, Any] | None = None


class Validity(_Model):
    """MLPerf-style verdict: ``valid``, the reasons when not, and the rules it was judged by.

    ``rules``: ``max_window_cv_percent``, ``min_windows``, ``n_windows`` (see ``ValidityOptions``); a load step's
    own thresholds (``max_error_rate``, ...). ``overloaded``: why a *valid* open-loop load step found the target
    behind the offered load (empty otherwise). ``verdict`` is derived, never set (written to JSON, ignored on
    read), so older documents, which lack both fields, load with the verdict their ``valid`` implies.
    """

    valid: bool
    reasons: list[str] = Field(default_factory=list)
    rules: dict[str, float | int] = Field(default_factory=dict)
    overloaded: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _drop_stored_verdict(cls, data: Any) -> Any:
        if isinstance(data, dict) and "verdict" in data:  # derived on every read, never trusted from a file
            data = {k: v for k, v in data.items() if k != "verdict"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict:
        """``INVALID`` when not ``valid``, else ``OVERLOADED`` when ``overloaded`` lists a reason, else ``VALID``."""
        return "INVALID" if not self.valid else "OVERLOADED" if self.overloaded else "VALID"


class Result(_Model):
    """One measured case (schema v1). See ``docs/results-schema.md`` for every field."""

    schema_version: int = SCHEMA_VERSION
    kind: ResultKind = "bench"
    tool: ToolInfo
    created_at: str
    command: list[str] = Field(default_factory=list)
    case_key: str
    run: dict[str, Any] = Field(default_factory=dict)
    system: SystemInfo
    model: ModelInfo
    config: CaseConfig
    metrics: Metrics
    samples: Samples
    validity: Validity
    notes: list[str] = Field(default_factory=list)
