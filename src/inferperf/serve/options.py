"""Serving settings: the ``serve:`` section of the settings file and the flags of ``inferperf serve``.

Names and meanings follow Triton's model configuration (``max_batch_size``,
``dynamic_batching { max_queue_delay_microseconds, preferred_batch_size,
default_queue_policy { max_queue_size } }``, ``instance_group { count }``).
Plain data: defining these imports no runtime and no web stack.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Default body limit: 64 MiB.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

#: Triton's ``default-max-batch-size`` for auto-completed configs (used when ``max_batch_size`` is None
#: and the model's leading dim is free).
AUTO_MAX_BATCH_SIZE = 4


class ServeOptions(BaseModel):
    """How one model is served (Triton's names and defaults).

    - ``max_batch_size``: the most rows one model call may take; ``0`` = the
      model has no batch dimension (requests are passed as they come).
      ``None`` = auto, as Triton's auto-complete does: ``AUTO_MAX_BATCH_SIZE`` (4)
      when the model's leading dim is free (or made batchable), else 0.
    - ``dynamic_batching``: Triton's ``dynamic_batching {}``; off unless set, or
      implied by giving ``max_queue_delay_us``, ``preferred_batch_size`` or
      ``max_queue_size``.
    - ``max_queue_delay_us``: how long (us) the oldest waiting request may wait
      for more rows (Triton default 0).
    - ``preferred_batch_size``: row counts that dispatch at once when reached.
    - ``max_queue_size``: requests waiting beyond this are refused with 503
      (``0`` = unbounded, Triton's default).
    - ``instance_count``: model instances executing batches in parallel.
    - ``max_body_bytes``: request bodies over this are refused with 413.
    - ``cpus``: CPU ids the instances are pinned to (``None`` = not pinned).
    - ``metrics``: keep Prometheus metrics (``False``: no per-request hooks, ``/metrics`` answers 404).
    - ``request_timeout_ms``: a request still queued this long after it arrived gets 504 at that moment
      and is never run (Triton's ``default_queue_policy { default_timeout_microseconds, timeout_action:
      REJECT }``; 0 = no deadline).
    - ``json_nonfinite``: what a JSON answer does with NaN/+-Inf outputs. ``"error"`` (default): refused
      with 500 naming the output and the binary alternative, so every JSON answer is valid JSON (RFC 8259);
      ``"literal"``: written as the tokens ``NaN``, ``Infinity``, ``-Infinity``, as Triton's server does
      (rapidjson's ``kWriteNanAndInfFlag``): not valid JSON, but read by Triton's clients (perf_analyzer's
      ``--output-tensor-format json``), rapidjson and Python's ``json``. Never ``null``.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    max_batch_size: int | None = Field(default=None, ge=0)
    dynamic_batching: bool = False
    max_queue_delay_us: int = Field(default=0, ge=0)
    preferred_batch_size: list[int] = Field(default_factory=list)
    max_queue_size: int = Field(default=0, ge=0)
    instance_count: int = Field(default=1, ge=1)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024)
    cpus: list[int] | None = None
    metrics: bool = True
    json_nonfinite: Literal["error", "literal"] = "error"
    request_timeout_ms: int = Field(default=0, ge=0)

    @field_validator("preferred_batch_size")
    @classmethod
    def _positive_sizes(cls, v: list[int]) -> list[int]:
        if any(x < 1 for x in v):
            raise ValueError("--preferred-batch-size takes row counts >= 1")
        return sorted(set(v))

    @model_validator(mode="after")
    def _batching_rules(self) -> ServeOptions:
        implied = {"max_queue_delay_us", "preferred_batch_size", "max_queue_size"} & self.model_fields_set
        if implied and "dynamic_batching" not in self.model_fields_set:
            self.dynamic_batching = True
        if self.max_batch_size == 0 and self.dynamic_batching:
            raise ValueError(
                "dynamic batching needs a batch dimension: pass --max-batch-size N (N >= 1) or drop the batching flags"
            )
        if self.max_batch_size and any(p > self.max_batch_size for p in self.preferred_batch_size):
            raise ValueError(
                f"--preferred-batch-size {self.preferred_batch_size} exceeds --max-batch-size {self.max_batch_size}:"
                " lower it or raise --max-batch-size"
            )
        return self

    def resolved_max_batch_size(self, batchable: bool) -> int:
        """``max_batch_size`` with auto (None) resolved: 4 when ``batchable`` (leading dim free), else 0."""
        if self.max_batch_size is not None:
            return self.max_batch_size
        return AUTO_MAX_BATCH_SIZE if batchable else 0


class ConnectionLimits(BaseModel):
    """Server-wide connection settings handed to uvicorn (``inferperf serve`` flags), checked on construction.

    - ``request_receipt_timeout_s``: a request's bytes must all arrive within this many seconds of its first
      byte, else 408 and the connection is closed (httptools stack; 0 = no deadline; >= 0). Default 30.
    - ``timeout_keep_alive_s``: an idle keep-alive connection is closed after this long (uvicorn's; >= 1).
      Default 30.
    - ``limit_concurrency``: connections + requests in progress beyond which uvicorn answers 503 (0 = none).

    Raises:
        pydantic.ValidationError: a value out of range (the message names the flag).
    """

    model_config = ConfigDict(extra="forbid")

    request_receipt_timeout_s: float = 30.0
    timeout_keep_alive_s: int = 30
    limit_concurrency: int = 0

    @model_validator(mode="after")
    def _ranges(self) -> ConnectionLimits:
        if not self.request_receipt_timeout_s >= 0:
            raise ValueError(f"--request-receipt-timeout-s {self.request_receipt_timeout_s:g}: use seconds >= 0"
                             " (0 = no deadline)")
        if self.timeout_keep_alive_s < 1:
            raise ValueError(f"--timeout-keep-alive-s {self.timeout_keep_alive_s}: use seconds >= 1")
        if self.limit_concurrency < 0:
            raise ValueError(f"--limit-concurrency {self.limit_concurrency}: use 0 (no limit) or more")
        return self


class ListenOptions(BaseModel):
    """Where the server listens and how long it drains: ``host``, ``port`` (0..65535; 0 = any free port),
    ``grace_s`` (seconds readiness is 503 on SIGTERM/SIGINT before the server stops accepting; >= 0), ``grpc_port``
    (gRPC's port, 0 = any free one, None = gRPC off) and ``grpc_max_message_bytes`` (0 = sized from the models'
    body limit).
    :func:`inferperf.serve.server.start` and ``run_server`` check theirs with it.

    Raises:
        pydantic.ValidationError: a port outside 0..65535 or a negative grace (the message names the flag).
    """

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = 0
    grace_s: float = 0.0
    grpc_port: int | None = None
    grpc_max_message_bytes: int = 0

    @model_validator(mode="after")
    def _ranges(self) -> ListenOptions:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port {self.port} is not a TCP port: use 0..65535")
        if self.grpc_port is not None and not 0 <= self.grpc_port <= 65535:
            raise ValueError(f"--grpc-port {self.grpc_port} is not a TCP port: use 0..65535 (or --no-grpc)")
        if not 0 <= self.grpc_max_message_bytes < 2**31:
            raise ValueError(f"--grpc-max-message-bytes {self.grpc_max_message_bytes}: use 0 (sized from "
                             "--max-body-bytes) up to 2147483647")
        if not self.grace_s >= 0:
            raise ValueError(f"--grace-s {self.grace_s:g}: use seconds >= 0")
        return self
