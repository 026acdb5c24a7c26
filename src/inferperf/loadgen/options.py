"""Load-generation settings: the flags of ``inferperf load`` as one pydantic model.

Names follow perf_analyzer and wrk2 (``concurrency``, ``request_rate``,
``measurement_interval_ms``, ``stability_percentage``, ``max_trials``); units
live in the field names. Plain data: defining these imports no HTTP client.

Part L1 (closed/open loop) reads the target, payload, step, window and client
fields; the stress/capacity and soak fields are read by ``loadgen.stress`` and
``loadgen.soak`` (issue 13 items 5 and 6).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Defaults stated once (``--help`` prints them).
DEFAULT_WARMUP_S = 2.0
DEFAULT_MEASUREMENT_INTERVAL_MS = 5000
DEFAULT_STABILITY_PERCENTAGE = 10.0
DEFAULT_MAX_TRIALS = 10
DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_MAX_CONNECTIONS = 256
#: Leak thresholds (issue 13 item 6): flagged only when significant *and* above these.
DEFAULT_LEAK_BYTES_PER_HOUR = 1024 * 1024
DEFAULT_LEAK_BYTES_PER_1000_REQUESTS = 1024


class LoadConfig(BaseModel):
    """How ``inferperf load`` drives one target (all steps of one run).

    Target and payload:

    - ``url``: base URL of a KServe v2 server (``http://127.0.0.1:8000``; ``grpc://HOST:PORT`` for its gRPC
      service, :mod:`inferperf.loadgen.grpc_client`) or, with ``body``, any HTTP URL that is POSTed as given.
    - ``model``: model name on the KServe v2 server (``None`` with ``body``).
    - ``protocol``: ``json`` or ``binary`` (Triton's binary tensor extension); a ``grpc://`` target always sends
      raw contents. ``streaming``: a ``grpc://`` target's ModelStreamInfer (one stream per connection).
    - ``shapes``: ``--shape`` values (``name:1x3x224x224`` or ``1x3x224x224``); several make a mix.
    - ``shape_weights``: relative weights of ``shapes`` (same length; default equal).
    - ``input_data``: an NPZ file of inputs (arrays keyed by input name; leading axis = samples).
    - ``body`` / ``headers``: plain-URL mode: body file POSTed as is, ``K:V`` headers.
    - ``input_pool_size``: distinct seeded payloads built up front.
    - ``shared_memory``: ``system`` sends inputs and asks outputs through Triton's system shared memory (a server
      on this machine; :mod:`inferperf.loadgen.shm_client`), ``output_shared_memory_size`` bytes per output
      (perf_analyzer's flags and default).
    - ``sequence_length`` (mean, default 20 on a sequence model), ``sequence_length_variation`` (percent),
      ``sequence_id_range`` (``START:END``): how the closed loop's streams send whole sequences to a model whose
      configuration has ``sequence_batching`` (perf_analyzer's flags; :mod:`inferperf.loadgen.sequence_load`).

    Steps: exactly one of ``concurrency`` (closed loop, scenario Concurrent) or
    ``request_rate`` (open loop, scenario Server, req/s) is a non-empty list.
    ``arrival`` is ``constant``, ``poisson``, ``mmpp`` (bursty: 1 s spells at 2/3 and 4/3 of the rate,
    :func:`inferperf.policy.arrivals.bursty`, the planner's ``--arrival mmpp``) or ``trace:FILE``; ``trace_speed``
    scales a trace (2 = twice as fast).

    Time: ``warmup_s`` (never counted), ``duration_s`` (measured time of one
    step; windows then only report stability), ``requests`` (stop after N
    measured requests), windows of ``measurement_interval_ms`` until throughput
    and p99 are within ``stability_percentage`` over 3 consecutive windows, at
    most ``max_trials`` windows.

    Client: ``max_connections`` (open loop grows connections up to this),
    ``workers`` (processes; one global schedule), ``timeout_ms`` per request,
    ``strict_rate`` (achieved rate short of target -> exit 3), ``fail_on_invalid`` (an INVALID step -> exit 3
    after every step ran; OVERLOADED does not count), ``seed``, ``energy_idle_s`` (idle power read before each
    step when this machine's energy counters meter the target; 0 = none; :mod:`inferperf.loadgen.energy`).

    Stress/capacity (L2): ``stress``, ``slo_p99_ms``, ``max_error_rate``
    (fraction 0..1), ``find_max_rate``, ``stress_gain_percent``.
    Token streams (``api`` ``openai-chat`` / ``openai-completions``; docs/generate.md): ``stream`` (False: one
    JSON answer, end-to-end only), ``max_tokens``, ``ignore_eos``, prompts of ``input_tokens`` (mean) drawn
    ``fixed``/``normal``/``uniform`` (``input_tokens_std``, ``input_tokens_min``, ``input_tokens_max``),
    ``tokenizer`` (a local tokenizer.json, the ``tokenizers`` library), ``dataset`` (JSONL of ``prompt``, optional
    ``output_tokens`` and ``timestamp_ms``: the prompts in order instead of synthetic ones), goodput SLOs ``slo_ttft_ms`` and
    ``slo_tpot_ms``.
    Soak (L2): ``soak_s``, ``soak_interval_s``, ``server_pid``, ``fail_on_leak``,
    ``leak_bytes_per_hour``, ``leak_bytes_per_1000_requests``.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    # target and payload
    url: str = "http://127.0.0.1:8000"
    model: str | None = None
    protocol: Literal["json", "binary"] = "json"
    shapes: list[str] = Field(default_factory=list)
    shape_weights: list[float] | None = None
    input_data: str | None = None
    body: str | None = None
    headers: list[str] = Field(default_factory=list)
    input_pool_size: int = Field(default=16, ge=1)
    streaming: bool = False
    shared_memory: Literal["none", "system"] = "none"
    output_shared_memory_size: int = Field(default=102400, ge=1)
    sequence_length: int | None = Field(default=None, ge=1)
    sequence_length_variation: float = Field(default=20.0, ge=0, lt=100)
    sequence_id_range: str | None = None

    # steps
    concurrency: list[int] = Field(default_factory=list)
    request_rate: list[float] = Field(default_factory=list)
    arrival: str = "constant"
    trace_speed: float = Field(default=1.0, gt=0)

    # time and windows
    warmup_s: float = Field(default=DEFAULT_WARMUP_S, ge=0)
    duration_s: float | None = None
    requests: int | None = None
    measurement_interval_ms: int = Field(default=DEFAULT_MEASUREMENT_INTERVAL_MS, ge=1)
    stability_percentage: float = Field(default=DEFAULT_STABILITY_PERCENTAGE, gt=0)
    max_trials: int = Field(default=DEFAULT_MAX_TRIALS, ge=1)

    # client
    max_connections: int = Field(default=DEFAULT_MAX_CONNECTIONS, ge=1)
    workers: int = Field(default=1, ge=1)
    timeout_ms: int = Field(default=DEFAULT_TIMEOUT_MS, ge=1)
    strict_rate: bool = False
    fail_on_invalid: bool = False
    seed: int = 0
    energy_idle_s: float = Field(default=1.0, ge=0)

    # stress and capacity (L2 fills the semantics)
    stress: bool = False
    slo_p99_ms: float | None = None
    max_error_rate: float | None = None
    find_max_rate: bool = False
    stress_gain_percent: float = 5.0

    # token streams (issue 30; docs/generate.md): an OpenAI-compatible API instead of KServe v2
    api: Literal["kserve", "openai-chat", "openai-completions", "triton-generate"] = "kserve"
    stream: bool = True
    max_tokens: int | None = Field(default=None, ge=1)
    ignore_eos: bool = False
    input_tokens: int = Field(default=128, ge=1)
    input_tokens_std: float = Field(default=0.0, ge=0)
    input_tokens_min: int = Field(default=1, ge=1)
    input_tokens_max: int | None = Field(default=None, ge=1)
    input_distribution: Literal["fixed", "normal", "uniform"] = "fixed"
    tokenizer: str | None = None
    dataset: str | None = None
    slo_ttft_ms: float | None = Field(default=None, gt=0)
    slo_tpot_ms: float | None = Field(default=None, gt=0)

    # soak (L2 fills the semantics)
    soak_s: float | None = None
    soak_interval_s: float = 10.0
    server_pid: int | None = None
    fail_on_leak: bool = False
    leak_bytes_per_hour: float = DEFAULT_LEAK_BYTES_PER_HOUR
    leak_bytes_per_1000_requests: float = DEFAULT_LEAK_BYTES_PER_1000_REQUESTS

    @field_validator("concurrency")
    @classmethod
    def _positive_concurrency(cls, v: list[int]) -> list[int]:
        if any(c < 1 for c in v):
            raise ValueError(f"--concurrency {v}: each value must be >= 1 (e.g. --concurrency 1,4,16)")
        return v

    @field_validator("request_rate")
    @classmethod
    def _positive_rate(cls, v: list[float]) -> list[float]:
        if any(not (r > 0) for r in v):
            raise ValueError(f"--request-rate {v}: each rate must be > 0 req/s (e.g. --request-rate 50,100)")
        return v

    @field_validator("arrival")
    @classmethod
    def _arrival_kind(cls, v: str) -> str:
        if v in ("constant", "poisson", "mmpp") or (v.startswith("trace:") and len(v) > len("trace:")):
            return v
        raise ValueError(f"--arrival {v!r}: use constant, poisson, mmpp or trace:FILE")

    @model_validator(mode="after")
    def _rules(self) -> LoadConfig:
        if self.duration_s is not None and not self.duration_s > 0:
            raise ValueError(f"--duration-s {self.duration_s}: must be > 0 seconds")
        if self.requests is not None and self.requests < 1:
            raise ValueError(f"--requests {self.requests}: must be >= 1")
        if self.soak_s is not None and not self.soak_s > 0:
            raise ValueError(f"--soak-s {self.soak_s}: must be > 0 seconds (a soak needs a duration)")
        if self.fail_on_leak and self.soak_s is None:
            raise ValueError("--fail-on-leak needs --soak-s N (a soak without a duration)")
        if self.concurrency and self.request_rate:
            raise ValueError("pass --concurrency or --request-rate, not both")
        if self.shape_weights is not None:
            if len(self.shape_weights) != len(self.shapes):
                raise ValueError(
                    f"--shape-weights has {len(self.shape_weights)} values for {len(self.shapes)} --shape values:"
                    " give one weight per shape"
                )
            if any(w < 0 for w in self.shape_weights) or not sum(self.shape_weights) > 0:
                raise ValueError("--shape-weights must be >= 0 with a positive sum")
        if self.max_error_rate is not None and not 0 <= self.max_error_rate <= 1:
            raise ValueError(f"--max-error-rate {self.max_error_rate}: a fraction between 0 and 1")
        if self.find_max_rate and self.slo_p99_ms is None and self.slo_ttft_ms is None and self.slo_tpot_ms is None:
            raise ValueError("--find-max-rate needs --slo-p99-ms X (the p99 the rate must meet; token streams:"
                             " or --slo-ttft-ms / --slo-tpot-ms)")
        if self.find_max_rate and (self.stress or self.concurrency or self.soak_s is not None):
            raise ValueError("--find-max-rate searches open-loop rates: drop --stress, --concurrency and --soak-s")
        grpc = self.url.lower().startswith("grpc://")
        if self.streaming and not grpc:
            raise ValueError("--streaming is gRPC's ModelStreamInfer: give a grpc://HOST:PORT target")
        if grpc and (self.body is not None or self.api != "kserve"):
            raise ValueError("a grpc:// target speaks KServe v2 inference: drop --body and --api")
        if self.shared_memory == "system" and (self.body is not None or self.api != "kserve"):
            raise ValueError("--shared-memory system carries KServe v2 tensors: drop --body and --api")
        if self.shared_memory == "system" and self.protocol == "binary":
            raise ValueError("--protocol binary puts the tensors in the body; --shared-memory system puts them in "
                             "regions (the body is JSON naming them): drop one")
        if grpc and self.protocol == "binary":
            raise ValueError("--protocol binary is HTTP's binary tensors: a grpc:// target always sends raw contents")
        if self.stress and self.soak_s is not None:
            raise ValueError("pass --stress or --soak-s, not both")
        if self.slo_p99_ms is not None and not self.slo_p99_ms > 0:
            raise ValueError(f"--slo-p99-ms {self.slo_p99_ms}: must be > 0 ms")
        if self.api == "kserve" and (self.max_tokens is not None or self.tokenizer is not None
                                     or self.dataset is not None
                                     or self.slo_ttft_ms is not None or self.slo_tpot_ms is not None):
            raise ValueError("--max-tokens, --tokenizer, --dataset, --slo-ttft-ms and --slo-tpot-ms need --api"
                             " openai-chat, openai-completions or triton-generate")
        if not self.stream and (self.slo_ttft_ms is not None or self.slo_tpot_ms is not None):
            raise ValueError("--slo-ttft-ms and --slo-tpot-ms judge a token stream: --no-stream answers in one piece "
                             "(no first token, no time per token); drop them or --no-stream")
        if self.input_tokens_max is not None and self.input_tokens_max < self.input_tokens_min:
            raise ValueError(f"--input-tokens-max {self.input_tokens_max} is under --input-tokens-min"
                             f" {self.input_tokens_min}")
        if not self.stress_gain_percent > 0:
            raise ValueError(f"--stress-gain-percent {self.stress_gain_percent}: must be > 0")
        return self

    @property
    def wire(self) -> str:
        """What the requests travel as: ``json`` / ``binary`` (HTTP), ``grpc`` or ``grpc-stream``; ``+shm`` when
        the tensors travel through system shared memory (``json+shm``: a JSON body naming the regions)."""
        if self.url.lower().startswith("grpc://"):
            base = "grpc-stream" if self.streaming else "grpc"
        else:
            base = self.protocol
        return f"{base}+shm" if self.shared_memory == "system" else base

    @property
    def mode(self) -> Literal["closed", "open"]:
        """``open`` when ``request_rate``, a trace arrival or ``find_max_rate`` (a search over rates) is given,
        else ``closed``."""
        return "open" if self.request_rate or self.find_max_rate or self.arrival.startswith("trace:") else "closed"

    @property
    def steps(self) -> list[float]:
        """The step values in order: concurrencies (closed) or rates (open; one step for a trace, whose
        rate is its own); ``[1]`` closed by default."""
        if self.arrival.startswith("trace:"):
            return list(self.request_rate[:1]) or [0.0]
        if self.request_rate:
            return list(self.request_rate)
        return list(self.concurrency) if self.concurrency else [1]
