"""Prometheus metrics of one server (a registry per server, never the global one) and the serving window.

Implements the serving core's ``Observer`` (queue depth, rejections,
cancellations, executed batches) and the app's per-request hooks (status,
request duration, decode and encode time). Durations are histograms in
seconds with buckets from 50 us, fine enough for sub-millisecond models.
Counters are cumulative and every histogram's ``+Inf`` bucket equals its count
(prometheus-client's own exposition).

Exposed names (``model`` label on all but the process ones):
``inferperf_requests_total{model,status}``,
``inferperf_request_duration_seconds``, ``inferperf_queue_duration_seconds``,
``inferperf_compute_duration_seconds``, ``inferperf_request_decode_duration_seconds``,
``inferperf_response_encode_duration_seconds`` (histograms),
``inferperf_batch_size`` (histogram of rows per model call),
``inferperf_queue_depth`` and ``inferperf_inflight_requests`` (gauges),
``inferperf_rejected_total{model,reason}``, ``inferperf_cancelled_total{model}``,
``inferperf_inference_count_total`` / ``inferperf_execution_count_total``,
and ``process_cpu_seconds_total`` / ``process_resident_memory_bytes`` ...
(prometheus-client's ProcessCollector, Linux).

The raw durations (integer ns) are also kept, up to ``max_samples`` each, for
the server-side Result (:meth:`ServerMetrics.window_summary`).
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from ..clock import SYSTEM_CLOCK, Clock
from ..stats import latency_summary

#: Duration buckets in seconds: 50 us .. 10 s (+Inf is added by the client library).
DURATION_BUCKETS_S = (
    50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
    100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
#: Batch-size buckets in rows.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTENT_TYPE = CONTENT_TYPE_LATEST
_KINDS = ("request", "queue", "compute", "decode", "encode")


class ServerMetrics:
    """Metrics of one server; implements the serving core's ``Observer``.

    Args:
        clock: the clock request timings are read from (``now_ns``); a FakeClock in tests.
        max_samples: raw durations kept per kind for the Result (later ones are counted, not kept).
        process: add prometheus-client's ProcessCollector (process CPU seconds, resident memory).
    """

    def __init__(self, clock: Clock = SYSTEM_CLOCK, max_samples: int = 1_000_000, process: bool = True) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=False)
        if process:
            ProcessCollector(registry=self.registry)
        r = self.registry
        self.requests = Counter("inferperf_requests", "Inference requests answered, by HTTP status.", ["model", "status"], registry=r)
        hist = {
            "request": ("inferperf_request_duration_seconds", "Request time in the server: body read to response ready."),
            "queue": ("inferperf_queue_duration_seconds", "Time a request waited in the batcher's queue."),
            "compute": ("inferperf_compute_duration_seconds", "Model call time of each executed batch."),
            "decode": ("inferperf_request_decode_duration_seconds", "Request body decode and validation time."),
            "encode": ("inferperf_response_encode_duration_seconds", "Response encode time."),
        }
        self._hist = {
            k: Histogram(n, h, ["model"], buckets=DURATION_BUCKETS_S, registry=r) for k, (n, h) in hist.items()
        }
        self.batch_size = Histogram(
            "inferperf_batch_size", "Rows per model call.", ["model"], buckets=BATCH_BUCKETS, registry=r
        )
        self.queue_depth = Gauge("inferperf_queue_depth", "Requests waiting in the queue.", ["model"], registry=r)
        self.inflight = Gauge("inferperf_inflight_requests", "Requests being handled.", ["model"], registry=r)
        self.rejected_total = Counter("inferperf_rejected", "Requests shed, by reason.", ["model", "reason"], registry=r)
        self.cancelled_total = Counter("inferperf_cancelled", "Requests dropped: client went away while queued.", ["model"], registry=r)
        self.inferences = Counter("inferperf_inference_count", "Rows inferred successfully.", ["model"], registry=r)
        self.executions = Counter("inferperf_execution_count", "Model calls (batches) executed.", ["model"], registry=r)
        self._children: dict[tuple[str, str], Any] = {}
        self._max_samples = max_samples
        self._samples: dict[str, array] = {k: array("q") for k in _KINDS}
        self._batch_rows: dict[int, int] = {}
        self.samples_dropped = 0
        self.window_start_ns = clock.now_ns()

    def _child(self, kind: str, model: str) -> Any:
        key = (kind, model)
        child = self._children.get(key)
        if child is None:
            metric = self._hist.get(kind) or getattr(self, kind)
            child = self._children[key] = metric.labels(model)
        return child

    def _observe(self, kind: str, model: str, ns: int) -> None:
        self._child(kind, model).observe(ns / 1e9)
        samples = self._samples[kind]
        if len(samples) < self._max_samples:
            samples.append(ns)
        else:
            self.samples_dropped += 1

    # --- Observer (called by the serving core) ---
    def request_queued(self, model: str) -> None:
        """A request entered the queue: queue depth +1."""
        self._child("queue_depth", model).inc()

    def request_dequeued(self, model: str) -> None:
        """A request left the queue (into a batch, cancelled or rejected): queue depth -1."""
        self._child("queue_depth", model).dec()

    def rejected(self, model: str, reason: str) -> None:
        """A request was shed; ``reason``: ``queue_full``, ``not_ready`` or ``shutting_down``."""
        self.rejected_total.labels(model, reason).inc()

    def cancelled(self, model: str) -> None:
        """A queued request was dropped because its client went away."""
        self._child("cancelled_total", model).inc()

    def batch_executed(
        self, model: str, batch_rows: int, n_requests: int, queue_ns: list[int], compute_ns: int, failed: bool
    ) -> None:
        """One model call ran: ``batch_rows`` rows from ``n_requests`` requests; their queue waits and the call time (ns)."""
        self._child("batch_size", model).observe(batch_rows)
        self._batch_rows[batch_rows] = self._batch_rows.get(batch_rows, 0) + 1
        for q in queue_ns:
            self._observe("queue", model, q)
        self._observe("compute", model, compute_ns)
        if not failed:
            self._child("executions", model).inc()
            self._child("inferences", model).inc(batch_rows)

    # --- the app's per-request hooks ---
    def request_started(self, model: str) -> int:
        """A request arrived: in-flight +1; returns its start time (ns) for :meth:`request_finished`."""
        self._child("inflight", model).inc()
        return self.clock.now_ns()

    def request_finished(self, model: str, status: int, start_ns: int) -> None:
        """A request was answered with ``status``: count it, in-flight -1, observe its duration."""
        self._child("inflight", model).dec()
        self.requests.labels(model, str(status)).inc()
        self._observe("request", model, self.clock.now_ns() - start_ns)

    def decoded(self, model: str, ns: int) -> None:
        """Request decode + validation took ``ns`` nanoseconds."""
        self._observe("decode", model, ns)

    def encoded(self, model: str, ns: int) -> None:
        """Response encoding took ``ns`` nanoseconds."""
        self._observe("encode", model, ns)

    def exposition(self) -> bytes:
        """The Prometheus text exposition of this server's registry."""
        return generate_latest(self.registry)

    def window_summary(self) -> dict[str, Any]:
        """The ``metrics.server`` block of the server-side Result, over the serving window so far.

        Returns ``{window_s, request_ms, queue_ms, compute_ms, decode_ms, encode_ms, batch_sizes,
        samples_dropped}``: each ``*_ms`` a latency summary (ms; null when nothing was observed),
        ``batch_sizes`` maps rows per model call -> number of calls.
        """
        out: dict[str, Any] = {"window_s": (self.clock.now_ns() - self.window_start_ns) / 1e9}
        for kind in _KINDS:
            data = self._samples[kind]
            out[f"{kind}_ms"] = latency_summary(np.frombuffer(data, dtype=np.int64)) if len(data) else None
        out["batch_sizes"] = {str(k): v for k, v in sorted(self._batch_rows.items())}
        out["samples_dropped"] = self.samples_dropped
        return out
