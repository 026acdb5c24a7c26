"""One load step -> one Result (kind ``load``), with the ``metrics.client`` and ``metrics.server`` blocks.

Latency (``metrics.latency_ms``, ``samples.latency_ns``) is the *corrected*
latency of successful requests completed in the measured span: answer time
minus scheduled send time (closed loop: the actual send). Failures never enter
it; they are counted by kind with their timestamps in ``metrics.client.errors``.
``error_adjusted_latency_ms`` is the figure the console shows: every request
of the span, successes at their latency, unanswered (incomplete) ones at their
age at the span's end (a lower bound, named in ``lower_bounds``), failures as
infinitely slow (a percentile that falls on them is ``null``). Throughput
divides completions by the measured wall time. ``metrics.server`` differences
the target's Triton statistics (``GET /v2/models/{m}/stats``) over the step
and splits the client's mean latency into server queue, compute and the rest
(network, encode/decode, client). Every field: docs/results-schema.md,
"Client block (kind load)".

Honest client: the Result is INVALID when the generator, not the server, is
the bottleneck: its CPU near one core (>= ``CLIENT_CPU_LIMIT_PERCENT``), or,
with connections to spare, the send rate short of the target or the send lag
growing over the step. The target's side of the verdict (lost, error rate,
OVERLOADED) is :mod:`.verdict`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..results.build import new_result
from ..results.model import (CaseConfig, ErrorCounts, LatencySummary, Metrics, ModelInfo, Result, Samples,
                             SessionConfig, TensorInfo, Throughput, Validity, WarmupConfig, Window)  # fmt: skip
from ..stats import PERCENTILES, latency_summary, percentile_notes
from .breakdown import breakdown, client_parts
from .drain import drain_note
from .driver import LATE_SEND_NS, StepSamples, window_figures
from .options import LoadConfig
from .target import TargetInfo
from .verdict import RATE_SHORT_FRACTION, invalid_reasons, overload_reasons, rules

CLIENT_CPU_LIMIT_PERCENT = 90.0
LAG_GROWTH_MS = 10.0
LITTLE_TOLERANCE = 0.10
MAX_ERRORS_LISTED = 1000


def _summary(ns: np.ndarray) -> dict[str, Any]:
    return latency_summary(ns) if ns.size else LatencySummary.empty().model_dump()


def error_adjusted(ok_ns: np.ndarray, failures: int, incomplete_age_ns: np.ndarray | None = None) -> dict[str, Any]:
    """Percentiles (ms, linear interpolation as in ``latency_ms``) over every request of a span.

    Args:
        ok_ns: latencies of the successes (ns).
        failures: failed requests, counted as infinitely slow.
        incomplete_age_ns: ages (ns) at the span's end of the requests still unanswered, counted at that age:
            a lower bound of their latency.

    Returns:
        ``{count, failures, incomplete, p50, p90, p95, p99, p999, lower_bounds}``: a percentile is ``null`` where
        it falls on the failures; ``lower_bounds`` names those that rest on an unanswered request's age (a lower
        bound: its latency is longer). The others interpolate answered latencies (each unanswered request can
        still move them up by at most one rank once it answers).
    """
    inc = np.asarray(incomplete_age_ns if incomplete_age_ns is not None else [], np.int64)
    both = np.concatenate([np.asarray(ok_ns, np.int64), inc])
    order = np.argsort(both, kind="stable")
    vals = both[order] / 1e6
    unanswered = order >= len(ok_ns)
    n = vals.size + failures
    out: dict[str, Any] = {"count": int(n), "failures": int(failures), "incomplete": int(inc.size)}
    lower = []
    for name, q in PERCENTILES.items():
        h = (n - 1) * q / 100.0
        lo, hi = int(np.floor(h)), int(np.ceil(h))
        out[name] = None if n == 0 or hi >= vals.size else float(vals[lo] + (h - lo) * (vals[hi] - vals[lo]))
        if out[name] is not None and (unanswered[lo] or unanswered[hi]):
            lower.append(name)
    out["lower_bounds"] = lower
    return out


#: upper edges (ms) of the send-lag histogram's buckets; the last bucket holds everything above 1 s.
LAG_BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0)


def _lag_ms(lag: np.ndarray) -> dict[str, Any]:
    """The send-lag distribution (actual minus scheduled send, ns in): count, mean, p50/p90/p99/p99.9, max (ms)
    and a histogram over :data:`LAG_BUCKETS_MS` (``le_ms`` upper edges, the last one ``inf``; ``counts``)."""
    edges = [*LAG_BUCKETS_MS, float("inf")]
    if not lag.size:
        return {"count": 0, "mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0,
                "histogram": {"le_ms": edges, "counts": [0] * len(edges)}}
    ms = lag / 1e6
    p50, p90, p99, p999 = (float(v) for v in np.percentile(ms, [50, 90, 99, 99.9]))
    counts = np.bincount(np.searchsorted(np.asarray(LAG_BUCKETS_MS), ms, side="left"), minlength=len(edges))
    return {"count": int(ms.size), "mean": float(ms.mean()), "p50": p50, "p90": p90, "p99": p99, "p999": p999,
            "max": float(ms.max()), "histogram": {"le_ms": edges, "counts": [int(c) for c in counts]}}


def _in_flight_mean(s: StepSamples) -> float:
    """Mean requests in the system over the measured span, each from its scheduled send to its answer (the
    span the corrected latency covers; an unanswered one until the span's end)."""
    a, b = s.measure_start_ns, s.measure_end_ns
    start = np.maximum(s.scheduled_ns, a)
    end = np.where(s.done_ns < 0, b, np.minimum(s.done_ns, b))
    return float(np.clip(end - start, 0, None).sum() / max(b - a, 1))


def _offer_end(s: StepSamples) -> int:
    """When the load offered in the span ended: the span's end, or with ``requests`` N (a span that waits for
    every answer) the last measured request's scheduled time, so a backlog left to drain still shows."""
    if not s.by_send:
        return s.measure_end_ns
    due = s.scheduled_ns[s.due_mask()]
    return int(due.max()) if due.size else s.measure_end_ns


def client_block(s: StepSamples) -> tuple[dict[str, Any], list[str], list[str]]:
    """The ``metrics.client`` block of one step, the INVALID reasons and the notes it implies."""
    m = s.measured()
    ok = m & (s.error == 0)
    corrected, uncorrected = s.done_ns[ok] - s.scheduled_ns[ok], s.done_ns[ok] - s.sent_ns[ok]
    dur = max(s.duration_s, 1e-9)
    sent_in = (s.sent_ns > s.measure_start_ns) & (s.sent_ns <= s.measure_end_ns)
    lag = (s.sent_ns - s.scheduled_ns)[sent_in]
    inc = s.incomplete_mask()
    incomplete = int(inc.sum())
    failed = m & (s.error > 0)
    errs = [{"t_s": (int(d) - s.measure_start_ns) / 1e9, "kind": s.error_kinds[int(e)]}
            for d, e in zip(s.done_ns[failed][:MAX_ERRORS_LISTED], s.error[failed][:MAX_ERRORS_LISTED], strict=True)]  # fmt: skip
    target = (s.schedule or {}).get("rate_per_s") if s.mode == "open" else None
    achieved = float(ok.sum() / dur)
    mean_lat_s = float(corrected.mean() / 1e9) if corrected.size else 0.0
    measured_conc = float(s.concurrency) if s.mode == "closed" else _in_flight_mean(s)
    expected = achieved * mean_lat_s
    little_ok = measured_conc > 0 and abs(expected - measured_conc) <= LITTLE_TOLERANCE * measured_conc
    cpu_pct = s.cpu_percent()
    wins = [window_figures(s, a, b) for a, b in s.windows_ns]
    zero = [i for i, w in enumerate(wins) if w["count"] == 0]
    silent = bool(zero and zero[-1] == len(wins) - 1 and
                  any(s.error_kinds[int(e)] in ("connect", "disconnected") for e in np.unique(s.error[failed])))
    lost_reason = s.lost or ("its last window completed no request and connections failed" if silent else None)
    block: dict[str, Any] = {
        "mode": s.mode, "target_rate": target, "achieved_rate": achieved,
        "send_rate": float(sent_in.sum() / dur),
        "scheduled_rate": float(((s.scheduled_ns > s.measure_start_ns) & (s.scheduled_ns <= s.measure_end_ns)).sum()
                                / dur),
        "send_lag_ms": _lag_ms(lag), "late_sends": int((lag > LATE_SEND_NS).sum()), "late_send_ms": LATE_SEND_NS / 1e6,
        "requests_sent": int(sent_in.sum()), "requests_due": int(s.due_mask().sum()), "incomplete": incomplete,
        "backlog": {"start": s.in_system(s.measure_start_ns), "end": s.in_system(_offer_end(s))},
        "uncorrected_latency_ms": _summary(uncorrected),
        "error_adjusted_latency_ms": error_adjusted(corrected, int(failed.sum()),
                                                    s.measure_end_ns - s.scheduled_ns[inc]),
        "errors": errs, "errors_listed": len(errs), "error_examples": s.error_examples,
        "connections": {"peak": s.connections_peak, "max": s.max_connections, "ran_out": s.connections_ran_out},
        "client_cpu_percent": cpu_pct, "workers": s.workers,
        "littles_law": {"concurrency_expected": expected, "measured": measured_conc, "ok": bool(little_ok)},
        "stable": s.stable, "zero_completion_windows": zero, "target_lost": lost_reason is not None,
        "lost_reason": lost_reason, "rejected": s.rejection, "drain": s.drain, "schedule": s.schedule,
        "transport": s.transport,
    }  # fmt: skip
    reasons, notes = _honesty(s, block, lag, sent_in)
    if drain_note(s.drain):
        notes.append(drain_note(s.drain))  # type: ignore[arg-type]
    if s.rejection:
        reasons.append(f"the server refused the requests: {s.rejection['in_a_row']} answers {s.rejection['status']}"
                       f" in a row, the first said {s.rejection['body']!r}")  # fmt: skip
    elif zero:
        notes.append(f"window(s) {zero} completed no request: the target stalled or died")
    if not little_ok and corrected.size:
        notes.append(f"Little's law mismatch: throughput x latency = {expected:.2f} in flight, measured"
                     f" {measured_conc:.2f} (client time between requests, or requests outside the span)")  # fmt: skip
    return block, reasons, notes


def _honesty(s: StepSamples, block: dict[str, Any], lag: np.ndarray, sent_in: np.ndarray) -> tuple[list, list]:
    reasons: list[str] = []
    notes: list[str] = []
    cpu = block["client_cpu_percent"]
    if cpu is not None and cpu >= CLIENT_CPU_LIMIT_PERCENT:
        reasons.append(f"generator-bound: the client used {cpu:.0f} % of one core: add --workers or a client machine")
    spare = s.connections_ran_out == 0
    due = block["scheduled_rate"]  # what the schedule asked in this span (a Poisson span varies around the rate)
    if s.mode == "open" and due and block["send_rate"] < RATE_SHORT_FRACTION * due:
        if spare:
            reasons.append(f"generator-bound: sent {block['send_rate']:.1f} of the {due:.1f} req/s scheduled, with"
                           " connections to spare")  # fmt: skip
        else:
            notes.append(f"connections ran out ({s.max_connections}): sent {block['send_rate']:.1f} of the"
                         f" {due:.1f} req/s scheduled; the server is the bottleneck, or raise --max-connections")  # fmt: skip
    if s.mode == "open" and lag.size >= 20:
        k = max(1, lag.size // 10)
        first, last = float(np.median(lag[:k])) / 1e6, float(np.median(lag[-k:])) / 1e6
        if last - first > LAG_GROWTH_MS and spare:
            reasons.append(f"generator-bound: send lag grew from {first:.1f} to {last:.1f} ms with connections to spare")
    elif s.connections_ran_out and s.mode == "open":
        notes.append(f"{s.connections_ran_out} requests waited for a connection (--max-connections {s.max_connections})")
    return reasons, notes


def server_block(before: dict[str, Any] | None, after: dict[str, Any] | None, client_mean_ms: float,
                 client: dict[str, float | None] | None = None) -> dict | None:
    """Triton statistics differenced over the step: per-request queue and compute means (ms), ``request_total_ms``
    (the mean of ``success``), batch sizes (model calls of each) and ``call_ms_by_batch`` (a call's mean
    ``compute_infer`` at each batch size: the runtime's time, once per call), and the client's mean latency split into ``queue_ms``, ``compute_ms``
    and ``rest_ms``; with ``client`` (:func:`.breakdown.client_parts`) also ``breakdown_ms``, where the time went
    part by part (:func:`.breakdown.breakdown`, with the ``server_times`` the snapshots carry). None without
    stats."""
    if not before or not after:
        return None

    def d(key: str) -> tuple[int, int]:
        a, b = before["inference_stats"][key], after["inference_stats"][key]
        return b["count"] - a["count"], b["ns"] - a["ns"]

    n_ok, succ_ns = d("success")
    parts = {k: d(k) for k in ("queue", "compute_input", "compute_infer", "compute_output")}
    mean = {k: (ns / c / 1e6 if c else 0.0) for k, (c, ns) in parts.items()}
    compute = mean["compute_input"] + mean["compute_infer"] + mean["compute_output"]
    b_before = {b["batch_size"]: (b["compute_infer"]["count"], b["compute_infer"]["ns"])
                for b in before.get("batch_stats", [])}  # fmt: skip
    b_delta = {str(b["batch_size"]): (b["compute_infer"]["count"] - b_before.get(b["batch_size"], (0, 0))[0],
                                      b["compute_infer"]["ns"] - b_before.get(b["batch_size"], (0, 0))[1])
               for b in after.get("batch_stats", [])}  # fmt: skip
    batches = {k: c for k, (c, _) in b_delta.items()}
    block = {
        "source": "triton-statistics", "requests": n_ok, "fail": d("fail")[0],
        "request_total_ms": succ_ns / n_ok / 1e6 if n_ok else 0.0,
        "queue_ms": mean["queue"], "compute_input_ms": mean["compute_input"], "compute_infer_ms": mean["compute_infer"],
        "compute_output_ms": mean["compute_output"], "compute_ms": compute,
        "executions": after.get("execution_count", 0) - before.get("execution_count", 0),
        "inferences": after.get("inference_count", 0) - before.get("inference_count", 0),
        "batch_sizes": {k: v for k, v in batches.items() if v},
        "call_ms_by_batch": {k: ns / c / 1e6 for k, (c, ns) in b_delta.items() if c > 0},  # a call's runtime time
        "latency_split_ms": {"queue_ms": mean["queue"], "compute_ms": compute,
                             "rest_ms": max(0.0, client_mean_ms - mean["queue"] - compute)},
    }  # fmt: skip
    if client is not None and n_ok:
        block["breakdown_ms"] = breakdown(block, client, before.get("server_times"), after.get("server_times"))
    return block


def _model_info(t: TargetInfo) -> ModelInfo:
    def tensors(key: str) -> list[TensorInfo]:
        return [TensorInfo(name=x["name"], dtype=str(x["datatype"]).lower(), shape=list(x["shape"]))
                for x in t.metadata.get(key, [])]  # fmt: skip

    path = f"{t.url}/v2/models/{t.model}" if t.model else t.url
    return ModelInfo(path=path, sha256=t.sha256, size_bytes=0, inputs=tensors("inputs"), outputs=tensors("outputs"),
                     zoo_name=None)  # fmt: skip


def step_result(s: StepSamples, target: TargetInfo, cfg: LoadConfig, command: list[str] | None = None, *,
                stats_before: dict | None = None, stats_after: dict | None = None) -> Result:  # fmt: skip
    """Build the kind-``load`` Result of one step (scenario ``concurrent`` for closed loop, ``server`` open).

    Args:
        s: the step's raw samples (pooled over workers).
        target: what was loaded (metadata, shapes, payload pool).
        cfg: the run's settings.
        command: argv to record (default ``sys.argv``).
        stats_before, stats_after: the model's Triton statistics around the step (None: no server block).
    """
    m = s.measured()
    ok = m & (s.error == 0)
    lat = s.done_ns[ok] - s.scheduled_ns[ok]
    client, reasons, notes = client_block(s)
    summary = LatencySummary(**_summary(lat))
    rows = int(next(iter(target.shapes[0].values()))[0]) if target.shapes and target.shapes[0] else 1
    dur = max(s.duration_s, 1e-9)
    scenario = "concurrent" if s.mode == "closed" else "server"
    rate = client["target_rate"]
    shapes = target.shapes[0] if target.shapes else {}
    case = CaseConfig(
        backend="grpc" if cfg.wire.startswith("grpc") else "http", session=SessionConfig(),
        workload={"shapes": shapes, "dtypes": {k: v.lower() for k, v in target.dtypes.items()},
                  "batch_size": max(1, rows), "input_pool_size": len(target.payloads),
                  "data_source": target.data_source, "seed": cfg.seed,
                  "shape_mix": target.shapes if len(target.shapes) > 1 else [], "protocol": cfg.wire},
        scenario=scenario, concurrency=s.concurrency or 1, request_rate=rate,
        warmup=WarmupConfig(iterations=0, duration_s=cfg.warmup_s),
        stop={"min_iterations": cfg.requests or 0, "min_duration_s": cfg.duration_s or 0.0,
              "max_duration_s": cfg.duration_s or cfg.measurement_interval_ms * cfg.max_trials / 1000},
    )  # fmt: skip
    key_doc = {"kind": "load", "url": target.url, "model": target.model, "scenario": scenario,
               "concurrency": s.concurrency, "request_rate": rate, "arrival": cfg.arrival, "protocol": cfg.wire,
               "shapes": target.shapes, "workers": cfg.workers}  # fmt: skip
    wins = [Window(t_s=(a - s.measure_start_ns) / 1e9, **window_figures(s, a, b)) for a, b in s.windows_ns]
    if not lat.size:
        reasons.append("no request succeeded in the measured span")
    by_kind: dict[str, int] = {}
    for e in s.error[m & (s.error > 0)]:
        by_kind[s.error_kinds[int(e)]] = by_kind.get(s.error_kinds[int(e)], 0) + 1
    sent_in = (s.sent_ns > s.measure_start_ns) & (s.sent_ns <= s.measure_end_ns)  # of the requests_sent, those
    sent_failed = int((sent_in & (s.error > 0) & (s.done_ns <= s.measure_end_ns)).sum())  # that failed in the span
    reasons = invalid_reasons(client, sent_failed, cfg.max_error_rate) + reasons  # target side first
    overloaded = overload_reasons(client) if not reasons else []  # an untrusted step says nothing of the server
    if s.stable is False and overloaded:  # a growing backlog raises latency window after window: that is the finding
        notes.append("the windows never settled: latency rose with the backlog (OVERLOADED)")
    elif s.stable is False:
        reasons.append(f"unstable: throughput or p99 of the last 3 windows not within {cfg.stability_percentage:g} %"
                       f" after {len(s.windows_ns)} windows: raise --max-trials or quiet the machine")  # fmt: skip
    generation = None
    if cfg.api != "kserve":  # token streams: metrics.generation (issue 30)
        from .gen_metrics import generation_block

        generation, gen_notes = generation_block(s, target, cfg)
        notes += gen_notes
    return new_result(
        kind="load", model_sha256=target.sha256, key_doc=key_doc, command=command,
        run={"pid": os.getpid(), "target": target.url, "model_name": target.model, "server": target.server},
        model=_model_info(target), config=case,
        metrics=Metrics(
            latency_ms=summary,
            throughput=Throughput(queries_per_s=float(lat.size / dur), samples_per_s=float(lat.size * rows / dur),
                                  duration_s=s.duration_s),
            windows=wins, errors=ErrorCounts(count=sum(by_kind.values()), by_kind=by_kind),
            client=client, generation=generation,
            server=server_block(stats_before, stats_after, summary.mean,
                                client_parts(s.scheduled_ns[ok], s.sent_ns[ok], s.done_ns[ok],
                                             None if s.first_ns is None else s.first_ns[ok])),
        ),
        samples=Samples(latency_ns=lat.tolist(), start_offsets_ns=(s.scheduled_ns[ok] - s.measure_start_ns).tolist(),
                        stream_ids=s.worker[ok].tolist()),
        validity=Validity(valid=not reasons, reasons=reasons, rules=rules(cfg.max_error_rate), overloaded=overloaded),
        notes=notes + percentile_notes(int(lat.size)),
    )  # fmt: skip


__all__ = ["client_block", "error_adjusted", "server_block", "step_result"]
