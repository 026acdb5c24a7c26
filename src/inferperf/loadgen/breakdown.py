"""Where a served request's time went, per load step: the client's mean latency cut into parts that add up to it.

The parts, in a request's order (mean ms per successful request; docs/load.md, "Where the time went"):

- ``client_send``: from the request's scheduled time to its write (the send lag; the payload is prebuilt);
- ``server_http``: the server's HTTP parsing and event-loop waits around its infer route (exchange - request:
  inferperf's server only, ``inferperf_http_exchange_duration_seconds``);
- ``decode``: body decode and checks (``inferperf_request_decode_duration_seconds``);
- ``queue``: waiting for a batch and a free instance (Triton statistics ``queue``);
- ``model_call``: the batch's concat, runtime call and split (``compute_input`` + ``compute_infer`` +
  ``compute_output``);
- ``encode``: the answer's encoding (``inferperf_response_encode_duration_seconds``);
- ``server_other``: the rest of the infer route's time (request - decode - queue - model call - encode: the
  body read, the hand-offs between the event loop and the instance thread);
- ``client_read``: from the answer's first bytes read by the client to the answer complete;
- ``remainder``: the client's mean latency less every part above: loopback, the kernel, the client's own event
  loop waiting to read, and (for servers other than inferperf's) everything around the server's request.

Against a server that exports only Triton's statistics (Triton, MLServer with its statistics), ``server_http``,
``decode``, ``encode`` are absent and ``server_other`` is Triton's ``success`` less queue and compute (the
"overhead" of perf_analyzer's server-side breakdown, which this matches by construction: the same counters,
differenced over the step).

The server's figures are over every request the server answered during the step (all its clients, and the
step's warm-up and wind-down edges); the client's over the measured span. Server means are per request:
``model_call`` of a batch of n requests counts once for each of them, as Triton's statistics count it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: this server's duration histograms read from ``/metrics`` (kind -> Prometheus name; inferperf's server)
SERVER_TIMES = {
    "request": "inferperf_request_duration_seconds",
    "decode": "inferperf_request_decode_duration_seconds",
    "encode": "inferperf_response_encode_duration_seconds",
    "exchange": "inferperf_http_exchange_duration_seconds",
}
#: the parts in a request's order (keys of ``breakdown_ms`` without the ``_ms``)
PARTS = ("client_send", "server_http", "decode", "queue", "model_call", "encode", "server_other", "client_read",
         "remainder")


def parse_server_times(text: str, model: str) -> dict[str, tuple[int, int]]:
    """``{kind: (count, sum_ns)}`` of :data:`SERVER_TIMES` for ``model`` from a Prometheus text exposition
    (kinds the server does not export are left out; one it exports with nothing observed for ``model`` yet is
    ``(0, 0)``). Parsed by prometheus-client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    names = {v: k for k, v in SERVER_TIMES.items()}
    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        kind = names.get(family.name)
        if kind is None:
            continue
        out.setdefault(kind, [0, 0])
        for sample in family.samples:
            if sample.labels.get("model") != model:
                continue
            if sample.name.endswith("_count"):
                out[kind][0] = sample.value
            elif sample.name.endswith("_sum"):
                out[kind][1] = sample.value
    return {k: (int(c), round(s * 1e9)) for k, (c, s) in out.items()}


def fetch_server_times(url: str, model: str, timeout_s: float = 5.0) -> dict[str, tuple[int, int]] | None:
    """:func:`parse_server_times` of ``GET {url}/metrics`` now; None when the target serves no such metrics."""
    import httpx

    try:
        with httpx.Client(timeout=timeout_s) as c:
            r = c.get(f"{url}/metrics")
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    try:
        times = parse_server_times(r.text, model)
    except ValueError:  # not a Prometheus exposition
        return None
    return times or None


def _mean_ms(before: dict[str, Any], after: dict[str, Any], kind: str) -> float | None:
    a, b = before.get(kind), after.get(kind)
    if a is None or b is None or b[0] <= a[0]:
        return None
    return (b[1] - a[1]) / (b[0] - a[0]) / 1e6


def client_parts(scheduled_ns: np.ndarray, sent_ns: np.ndarray, done_ns: np.ndarray,
                 first_ns: np.ndarray | None) -> dict[str, float | None]:
    """The client's side of successful requests (arrays of one step's measured successes, clock ns):
    ``client_ms`` (mean corrected latency), ``client_send_ms`` (mean scheduled -> written), ``client_read_ms``
    (mean first answer bytes read -> complete, over the requests whose first read was recorded; None: none)."""
    if not done_ns.size:
        return {"client_ms": None, "client_send_ms": None, "client_read_ms": None}
    read = None
    if first_ns is not None:
        known = first_ns > 0
        if known.any():
            read = float(np.mean(done_ns[known] - first_ns[known])) / 1e6
    return {"client_ms": float(np.mean(done_ns - scheduled_ns)) / 1e6,
            "client_send_ms": float(np.mean(sent_ns - scheduled_ns)) / 1e6, "client_read_ms": read}


def breakdown(server: dict[str, Any], client: dict[str, float | None], times_before: dict | None,
              times_after: dict | None) -> dict[str, Any] | None:
    """``{PART_ms: mean ms, ..., client_ms, sources}``: the client's mean latency cut into :data:`PARTS` (absent
    parts are left out; the parts present add up to ``client_ms``, ``remainder_ms`` closing the sum, which
    can come out below 0 only when the server's means include requests outside the client's span).

    Args:
        server: the step's ``metrics.server`` Triton figures (``queue_ms``, ``compute_ms``; ``request_total_ms``,
            the mean of Triton's ``success``).
        client: :func:`client_parts` of the step.
        times_before, times_after: :func:`fetch_server_times` around the step (None: not an inferperf server).

    Returns None when no request succeeded.
    """
    total = client.get("client_ms")
    if total is None:
        return None
    out: dict[str, Any] = {"client_send_ms": client["client_send_ms"]}
    queue, call = server["queue_ms"], server["compute_ms"]
    t = {k: _mean_ms(times_before, times_after, k) for k in SERVER_TIMES} if times_before and times_after else {}
    if t.get("request") is not None:
        decode, encode = t.get("decode") or 0.0, t.get("encode") or 0.0
        if t.get("exchange") is not None:
            out["server_http_ms"] = t["exchange"] - t["request"]
        out.update(decode_ms=decode, queue_ms=queue, model_call_ms=call, encode_ms=encode,
                   server_other_ms=t["request"] - decode - queue - call - encode)
        sources = ["triton-statistics", "inferperf-metrics"]
    else:
        out.update(queue_ms=queue, model_call_ms=call, server_other_ms=server["request_total_ms"] - queue - call)
        sources = ["triton-statistics"]
    if client.get("client_read_ms") is not None:
        out["client_read_ms"] = client["client_read_ms"]
    out["remainder_ms"] = total - sum(v for v in out.values() if v is not None)
    return {**out, "client_ms": total, "sources": sources}


#: the parts of :func:`breakdown` spent inside the server's exchange (first byte read -> response handed over)
SERVER_PARTS = ("server_http", "decode", "queue", "model_call", "encode", "server_other")


def client_share_ms(b: dict[str, Any] | None) -> float | None:
    """The client's share of its mean latency (ms): ``client_ms`` less the server's whole exchange
    (:data:`SERVER_PARTS`), i.e. the client's send, its read of the answer and what lies between them and the
    server (the loopback, the kernel's buffers, the client's own loop). None when ``b`` (a :func:`breakdown`) is
    None or did not measure the server's exchange (not an inferperf server: ``server_http_ms`` absent)."""
    if not b or b.get("server_http_ms") is None or b.get("client_ms") is None:
        return None
    return float(b["client_ms"] - sum(b.get(p + "_ms") or 0.0 for p in SERVER_PARTS))


def breakdown_line(b: dict[str, Any]) -> str:
    """``time per request (mean ms of 1.63): send 0.01, server HTTP 0.20, decode 0.03, ...``: one console line."""
    names = {"client_send": "send", "server_http": "server HTTP", "decode": "decode", "queue": "queue",
             "model_call": "model call", "encode": "encode", "server_other": "server other",
             "client_read": "read", "remainder": "remainder"}
    parts = ", ".join(f"{names[p]} {b[p + '_ms']:.3f}" for p in PARTS if b.get(p + "_ms") is not None)
    return f"time per request (mean ms of {b['client_ms']:.3f}): {parts}"


__all__ = ["PARTS", "SERVER_PARTS", "SERVER_TIMES", "breakdown", "breakdown_line", "client_parts", "client_share_ms", "fetch_server_times",
           "parse_server_times"]
