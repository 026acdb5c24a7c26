"""Prometheus metrics of one server (a registry per server, never the global one) and the serving window.

Implements the serving core's ``Observer`` (queue depth, rejections,
cancellations, executed batches) and the app's per-request hooks (status,
request duration, decode and encode time). Durations are histograms in
seconds with buckets from 50 us, fine enough for sub-millisecond models.
Counters are cumulative and every histogram's ``+Inf`` bucket equals its count.

Hot path: prometheus-client's own metric objects cost ~3.5 us per histogram
observation (a lock and a few Python calls each), about 50 us per request for
the seven observations a request makes. Here each observation is a
``bisect`` and three integer additions on plain lists, and a custom collector
turns them into Prometheus families only when ``/metrics`` is scraped. Sums are
kept in integer nanoseconds, so they are exact. All hooks run on the event loop's
thread (the app and the batcher call them there).

Exposed names (``model`` label on all but the process ones):
``inferperf_requests_total{model,status}``,
``inferperf_request_duration_seconds``, ``inferperf_queue_duration_seconds``,
``inferperf_compute_duration_seconds``, ``inferperf_request_decode_duration_seconds``,
``inferperf_response_encode_duration_seconds``, ``inferperf_http_exchange_duration_seconds`` (httptools
only: the request on its connection, parser to socket, :mod:`inferperf.serve.http_protocol`) (histograms),
``inferperf_batch_size`` (histogram of rows per model call),
``inferperf_queue_depth`` and ``inferperf_inflight_requests`` (gauges),
``inferperf_rejected_total{model,reason}``, ``inferperf_cancelled_total{model}``,
``inferperf_inference_count_total`` / ``inferperf_execution_count_total``,
``inferperf_instance_busy_seconds_total{model,model_instance}`` (seconds each model instance spent running
batches: the instance thread's concat + model call + split of each call that returned; its rate is the instance's
busy share; the label is not ``instance``, which Prometheus gives every scraped target),
and ``process_cpu_seconds_total`` / ``process_resident_memory_bytes`` ...
(prometheus-client's ProcessCollector, Linux).

The raw durations (integer ns) also feed, per kind, a uniform random sample of
at most ``max_samples`` of them (a reservoir: Vitter's algorithm R, J. S.
Vitter, "Random sampling with a reservoir", ACM TOMS 11(1), 1985; seeded), so
the server-side Result's percentiles (:meth:`ServerMetrics.window_summary`)
describe the whole serving window, not its first ``max_samples`` requests;
count, mean, min and max there are exact (kept beside the reservoir).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import UsageError
from ..measure.energy import EnergyWindow, energy_block, serving_energy, unavailable_block
from .metric_store import SAMPLING_METHOD, Hist, Reservoir

#: Duration buckets in seconds: 50 us .. 10 s (+Inf added).
DURATION_BUCKETS_S = (
    50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
    100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
#: The statuses an infer request of a served model can be answered with: each has a series from the model's load
#: (0 until its first request), so rate() and increase() count the first one.
KNOWN_STATUSES = ("200", "400", "413", "415", "499", "500", "503", "504")
#: Why a request is shed (``inferperf_rejected_total{reason}``), each with a series from the model's load.
REJECT_REASONS = ("queue_full", "not_ready", "shutting_down", "timeout")
#: Batch-size buckets in rows.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTENT_TYPE = CONTENT_TYPE_LATEST
_DURATION_BOUNDS_NS = [round(b * 1e9) for b in DURATION_BUCKETS_S]
_HISTOGRAMS = {  # kind -> (name, help)
    "request": ("inferperf_request_duration_seconds", "Request time in the server: from the infer route receiving "
                "the request (body read inside) to the answer handed to the transport (a slow reader does not count)."),
    "queue": ("inferperf_queue_duration_seconds", "Time a request waited in the batcher's queue."),
    "compute": ("inferperf_compute_duration_seconds", "Model call time of each executed batch."),
    "decode": ("inferperf_request_decode_duration_seconds", "Request body decode and validation time."),
    "encode": ("inferperf_response_encode_duration_seconds", "Response encode time."),
    "exchange": ("inferperf_http_exchange_duration_seconds", "Infer request time on its HTTP connection: from the "
                 "server's parser starting the request (its first bytes read) to the answer's last byte handed to "
                 "the socket; includes the event loop's waits and the HTTP parsing outside the infer route."),
}
_COUNTERS = {  # attribute -> (name without _total, help, extra label)
    "requests": ("inferperf_requests", "Inference requests answered, by HTTP status.", "status"),
    "rejected": ("inferperf_rejected", "Requests shed, by reason.", "reason"),
    "cancelled": ("inferperf_cancelled", "Requests dropped: the client went away while queued.", None),
    "inferences": ("inferperf_inference_count", "Rows inferred successfully.", None),
    "executions": ("inferperf_execution_count", "Model calls (batches) executed successfully.", None),
}
_GAUGES = {
    "queue_depth": ("inferperf_queue_depth", "Requests waiting in the queue."),
    "inflight": ("inferperf_inflight_requests", "Requests being handled."),
}


def duration_buckets(edges_s: Sequence[float] | None = None, slo_ms: float | None = None) -> tuple[float, ...]:
    """The duration histograms' ``le`` edges (s): ``edges_s`` (default :data:`DURATION_BUCKETS_S`) with the SLO
    (``slo_ms``) added as an edge, so "share of requests within the SLO" is exact and an alert on it fires at the
    SLO itself. A histogram quantile (``histogram_quantile``) is only known to lie in its bucket: with edges 100
    and 250 ms, every p99 between them reads as an interpolation inside that bucket.

    Raises:
        UsageError: edges not increasing, not positive or not finite (``--latency-buckets``), an SLO not
            positive (``--slo-ms``), or more than 60 edges (each is a series per model).
    """
    edges = tuple(DURATION_BUCKETS_S if edges_s is None else edges_s)
    if (not edges or any(not (math.isfinite(e) and e > 0) for e in edges)
            or any(b <= a for a, b in zip(edges, edges[1:], strict=False))):  # fmt: skip
        raise UsageError(f"--latency-buckets {','.join(map(str, edges)) or '(none)'}: give increasing positive "
                         "seconds, e.g. 0.005,0.01,0.025,0.05,0.1,0.25")
    if slo_ms is not None:
        if not (math.isfinite(slo_ms) and slo_ms > 0):
            raise UsageError(f"--slo-ms {slo_ms}: give the latency SLO in milliseconds, e.g. 100")
        edges = tuple(sorted(set(edges) | {slo_ms / 1e3}))
    if len(edges) > 60:
        raise UsageError(f"--latency-buckets: {len(edges)} edges; use at most 60 (each is a series per model)")
    return edges


class ServerMetrics:
    """Metrics of one server; implements the serving core's ``Observer``.

    Args:
        clock: the clock request timings are read from (``now_ns``); a FakeClock in tests.
        max_samples: size of each kind's reservoir for the Result's percentiles (see the module docstring).
        process: add prometheus-client's ProcessCollector (process CPU seconds, resident memory).
        sample_seed: seed of the reservoirs' random draws (recorded in the Result).
    """

    enabled = True  # False in DisabledMetrics (--no-metrics)

    def __init__(self, clock: Clock = SYSTEM_CLOCK, max_samples: int = 1_000_000, process: bool = True,
                 sample_seed: int = 0) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=False)
        if process:
            ProcessCollector(registry=self.registry)
        self.registry.register(self)  # type: ignore[arg-type]  # collect() below
        self._edges_s: tuple[float, ...] = DURATION_BUCKETS_S
        self._bounds_ns = _DURATION_BOUNDS_NS
        self._known: dict[str, int] = {}  # model -> instances: their series exist at 0 from the load
        self._max_samples = max_samples
        self._sample_seed = sample_seed
        self._process = process
        self.energy: EnergyWindow | None = None
        self.reset()

    def reset(self) -> None:
        """Forget every observation (counters, histograms, samples; the window restarts now): the server calls
        it after warming its path, so no figure counts the warm-up."""
        clock = self.clock
        self._hists: dict[str, dict[str, Hist]] = {k: {} for k in (*_HISTOGRAMS, "batch")}
        self._counters: dict[str, dict[tuple[str, ...], int]] = {k: {} for k in _COUNTERS}
        self._gauges: dict[str, dict[str, int]] = {k: {} for k in _GAUGES}
        self._samples = {k: Reservoir(self._max_samples, f"{self._sample_seed}:{k}") for k in _HISTOGRAMS}
        self._batch_rows: dict[int, int] = {}
        self._busy_ns: dict[tuple[str, str], int] = {}
        self.window_start_ns = clock.now_ns()
        for model, instances in self._known.items():
            self._zero_series(model, instances)

    def set_duration_buckets(self, edges_s: tuple[float, ...]) -> None:
        """Use ``edges_s`` (increasing seconds, from :func:`duration_buckets`) as every duration histogram's
        ``le`` edges; forgets what was observed (call it before serving)."""
        self._edges_s = tuple(edges_s)
        self._bounds_ns = [round(b * 1e9) for b in self._edges_s]
        self.reset()

    def model_loaded(self, model: str, instances: int = 1) -> None:
        """``model`` is served with ``instances`` instances: its counters (every status of
        :data:`KNOWN_STATUSES`, every reason of :data:`REJECT_REASONS`), histograms, gauges and instance busy
        seconds exist at 0 from now on, and again after each :meth:`reset`. Prometheus' ``rate()`` and
        ``increase()`` count an event only between two samples of a series, so a series born at its first
        event would never count that event."""
        self._known[model] = max(1, instances)
        self._zero_series(model, self._known[model])

    def _zero_series(self, model: str, instances: int) -> None:
        for status in KNOWN_STATUSES:
            self._inc("requests", (model, status), 0)
        for reason in REJECT_REASONS:
            self._inc("rejected", (model, reason), 0)
        for counter in ("cancelled", "inferences", "executions"):
            self._inc(counter, (model,), 0)
        for kind in ("request", "queue", "compute", "decode", "encode", "batch"):  # (exchange: httptools only)
            self._hist(kind, model)
        for gauge in _GAUGES:
            self._gauge(gauge, model, 0)
        for i in range(instances):
            self._busy_ns.setdefault((model, str(i)), 0)

    def _hist(self, kind: str, model: str) -> Hist:
        per_model = self._hists[kind]
        h = per_model.get(model)
        if h is None:
            h = per_model[model] = Hist(list(BATCH_BUCKETS) if kind == "batch" else self._bounds_ns)
        return h

    def _observe(self, kind: str, model: str, ns: int) -> None:
        self._hist(kind, model).observe(ns)
        self._samples[kind].add(ns)

    def _inc(self, counter: str, key: tuple[str, ...], n: int = 1) -> None:
        d = self._counters[counter]
        d[key] = d.get(key, 0) + n

    def _gauge(self, gauge: str, model: str, delta: int) -> None:
        d = self._gauges[gauge]
        d[model] = d.get(model, 0) + delta

    def start_window(self) -> None:
        """Start the serving window now (the server calls it once it accepts connections, after load and warm-up);
        with ``process`` on a real clock, its energy counters are metered from here (:meth:`energy_summary`)."""
        self.window_start_ns = self.clock.now_ns()
        if self._process and not getattr(self.clock, "is_fake", False) and self.energy is None:
            self.energy = serving_energy(self.clock)
            weakref.finalize(self, self.energy.stop)  # the reader thread ends with these metrics

    def energy_summary(self, inferences: int) -> dict[str, Any]:
        """``metrics.energy`` of the serve Result over the window so far (docs/results-schema.md, Energy block):
        gross energy per domain, no idle power (none is measured before a server is ready)."""
        if self.energy is None:
            return unavailable_block("the serving window never started, or metrics run on a fake clock")
        window_s = self.energy.so_far()
        return energy_block(self.energy.meter, None, 0.0, window_s, inferences)

    # --- Observer (called by the serving core) ---
    def request_queued(self, model: str) -> None:
        """A request entered the queue: queue depth +1."""
        self._gauge("queue_depth", model, 1)

    def request_dequeued(self, model: str) -> None:
        """A request left the queue (into a batch, cancelled or rejected): queue depth -1."""
        self._gauge("queue_depth", model, -1)

    def rejected(self, model: str, reason: str) -> None:
        """A request was shed; ``reason``: ``queue_full``, ``not_ready`` or ``shutting_down``."""
        self._inc("rejected", (model, reason))

    def cancelled(self, model: str) -> None:
        """A queued request was dropped because its client went away."""
        self._inc("cancelled", (model,))

    def batch_executed(
        self, model: str, batch_rows: int, n_requests: int, queue_ns: list[int], compute_ns: int, failed: bool,
        instance: int | None = None,
    ) -> None:
        """One model call ran: ``batch_rows`` rows from ``n_requests`` requests; their queue waits and the call time
        (ns), on model instance ``instance`` (its busy seconds grow by ``compute_ns``; None: not known)."""
        if instance is not None:
            key = (model, str(instance))
            self._busy_ns[key] = self._busy_ns.get(key, 0) + compute_ns
        self._hist("batch", model).observe(batch_rows)
        self._batch_rows[batch_rows] = self._batch_rows.get(batch_rows, 0) + 1
        for q in queue_ns:
            self._observe("queue", model, q)
        self._observe("compute", model, compute_ns)
        if not failed:
            self._inc("executions", (model,))
            self._inc("inferences", (model,), batch_rows)

    # --- the app's per-request hooks ---
    def request_started(self, model: str) -> int:
        """A request arrived: in-flight +1; returns its start time (ns) for :meth:`request_finished`."""
        self._gauge("inflight", model, 1)
        return self.clock.now_ns()

    def request_finished(self, model: str, status: int, start_ns: int) -> None:
        """A request was answered with ``status``: count it, in-flight -1, observe its duration."""
        self._gauge("inflight", model, -1)
        self._inc("requests", (model, str(status)))
        self._observe("request", model, self.clock.now_ns() - start_ns)

    def decoded(self, model: str, ns: int) -> None:
        """Request decode + validation took ``ns`` nanoseconds."""
        self._observe("decode", model, ns)

    def encoded(self, model: str, ns: int) -> None:
        """Response encoding took ``ns`` nanoseconds."""
        self._observe("encode", model, ns)

    def exchanged(self, model: str, ns: int) -> None:
        """An infer request's exchange on its connection (parser start to the answer handed to the socket) took
        ``ns`` nanoseconds."""
        self._observe("exchange", model, ns)

    # --- reading ---
    def value(self, name: str, *labels: str) -> int:
        """Current value of a counter (``requests``, ``rejected``, ``cancelled``, ``inferences``, ``executions``)
        or gauge (``queue_depth``, ``inflight``) for ``labels`` (model first); 0 when never touched."""
        if name in self._gauges:
            return self._gauges[name].get(labels[0], 0)
        return self._counters[name].get(tuple(labels), 0)

    def collect(self) -> Iterator[Metric]:
        """Prometheus families for the registry (called on scrape)."""
        for kind, (name, doc) in (*_HISTOGRAMS.items(), ("batch", ("inferperf_batch_size", "Rows per model call."))):
            fam = HistogramMetricFamily(name, doc, labels=["model"])
            scale, edges = (1.0, BATCH_BUCKETS) if kind == "batch" else (1e9, self._edges_s)
            for model, h in self._hists[kind].items():
                buckets, total = h.family_args(scale, edges)
                fam.add_metric([model], buckets, total)
            yield fam
        for attr, (name, doc, extra) in _COUNTERS.items():
            cfam = CounterMetricFamily(name, doc, labels=["model", extra] if extra else ["model"])
            for key, n in self._counters[attr].items():
                cfam.add_metric(list(key), n)
            yield cfam
        busy = CounterMetricFamily("inferperf_instance_busy_seconds",
                                   "Seconds each model instance spent running batches.",
                                   labels=["model", "model_instance"])
        for key, ns in self._busy_ns.items():
            busy.add_metric(list(key), ns / 1e9)
        yield busy
        for attr, (name, doc) in _GAUGES.items():
            gfam = GaugeMetricFamily(name, doc, labels=["model"])
            for model, n in self._gauges[attr].items():
                gfam.add_metric([model], n)
            yield gfam

    def exposition(self) -> bytes:
        """The Prometheus text exposition of this server's registry."""
        return generate_latest(self.registry)

    def window_summary(self) -> dict[str, Any]:
        """The ``metrics.server`` block of the server-side Result, over the serving window so far.

        Returns ``{window_s, request_ms, queue_ms, compute_ms, decode_ms, encode_ms, exchange_ms, batch_sizes,
        sampling}``: each ``*_ms`` a latency summary (ms; null when nothing was observed: count, mean, min,
        max exact, percentiles and std from the kind's reservoir), ``batch_sizes`` maps rows per model call
        -> number of calls, ``sampling`` = ``{method, capacity, seed, kept: {kind: n}}``.
        """
        out: dict[str, Any] = {"window_s": (self.clock.now_ns() - self.window_start_ns) / 1e9}
        for kind in _HISTOGRAMS:
            out[f"{kind}_ms"] = self._samples[kind].summary()
        out["batch_sizes"] = {str(k): v for k, v in sorted(self._batch_rows.items())}
        out["sampling"] = {"method": SAMPLING_METHOD, "capacity": self._max_samples, "seed": self._sample_seed,
                           "kept": {k: len(r.data) for k, r in self._samples.items()}}
        return out


class DisabledMetrics(ServerMetrics):
    """Metrics switched off (``--no-metrics``): every hook is a no-op, ``enabled`` is False (``/metrics`` -> 404),
    values read 0. Used to measure what metrics cost (issue 12 Performance)."""

    enabled = False

    def request_queued(self, model: str) -> None:
        pass

    def request_dequeued(self, model: str) -> None:
        pass

    def rejected(self, model: str, reason: str) -> None:
        pass

    def cancelled(self, model: str) -> None:
        pass

    def batch_executed(self, model: str, batch_rows: int, n_requests: int, queue_ns: list[int], compute_ns: int,
                       failed: bool, instance: int | None = None) -> None:
        pass

    def request_started(self, model: str) -> int:
        return 0

    def model_loaded(self, model: str, instances: int = 1) -> None:
        pass

    def request_finished(self, model: str, status: int, start_ns: int) -> None:
        pass

    def decoded(self, model: str, ns: int) -> None:
        pass

    def encoded(self, model: str, ns: int) -> None:
        pass

    def exchanged(self, model: str, ns: int) -> None:
        pass
