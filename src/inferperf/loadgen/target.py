"""What ``inferperf load`` talks to: a KServe v2 model (metadata, payload pool) or a plain URL.

A KServe v2 target is read once before the load: ``GET /v2`` (server name,
version, extensions: ``statistics`` tells whether Triton's statistics can be
differenced over each step), ``GET /v2/models/{m}`` (inputs with datatype and
shape, -1 = free) and, when served, ``GET /v2/models/{m}/config`` (Triton's
``max_batch_size``). Payloads are a pool of distinct seeded inputs built
before any request is timed, as whole HTTP/1.1 requests (bytes): JSON tensors,
or Triton's binary tensor extension (JSON header, then raw little-endian
tensors, ``Inference-Header-Content-Length``; outputs asked as binary too).
Several ``--shape`` values make a mix: the pool holds each shape in proportion
to ``--shape-weights`` (largest remainder), in a seeded shuffled order.
``--input-data FILE.npz`` gives the values instead: one array per input name,
the leading axis indexes samples.

A plain URL with ``--body FILE`` is POSTed as given with the ``--header K:V``
values, for any other HTTP service.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..errors import UsageError
from .options import LoadConfig
from .payload_arrays import declared_inputs, parse_shape, payload_arrays  # noqa: F401 - public here too
from .sequence_load import sequence_payloads
from .transport import Endpoint, build_request
@dataclass
class TargetInfo:
    """A target as read before the load.

    ``kind``: ``kserve`` or ``url``; ``server``: ``GET /v2`` document (empty for a plain URL);
    ``metadata``/``config``: the model's documents; ``has_stats``: Triton statistics served;
    ``shapes``: the concrete input shapes used (name -> dims; several with a mix);
    ``payloads``: whole HTTP requests (bytes; serialized ``ModelInferRequest`` s for a ``grpc://`` target) cycled
    through by the driver; ``call_metadata``: a gRPC target's call metadata (``--header`` values);
    ``stats_source``: ``(info, metadata, timeout_s) -> entry`` reading the statistics another way than HTTP's
    ``/stats`` (a gRPC target's ModelStatistics), None for HTTP; ``shm``: the run's shared-memory regions
    (``--shared-memory system``; released by :meth:`close`).
    """

    kind: str
    url: str
    model: str | None
    server: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    has_stats: bool = False
    shapes: list[dict[str, list[int]]] = field(default_factory=list)
    dtypes: dict[str, str] = field(default_factory=dict)
    payloads: list[bytes] = field(default_factory=list)
    data_source: str = "synthetic"
    call_metadata: tuple[tuple[str, str], ...] = ()
    stats_source: Any = None
    shm: Any = None

    def close(self) -> None:
        """Release what the target holds for the run: ``--shared-memory system``'s regions and segments
        (:class:`~.shm_client.ShmPool`); idempotent."""
        if self.shm is not None:
            self.shm.close()

    @property
    def sha256(self) -> str:
        """sha256 of the model metadata document (identifies a remote model in ``case_key``)."""
        return hashlib.sha256(orjson.dumps(self.metadata or {"url": self.url}, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _get(client: Any, url: str, what: str) -> Any:
    import httpx

    try:
        return client.get(url)
    except httpx.HTTPError as e:
        raise UsageError(f"target {url} is unreachable ({type(e).__name__}: {e}): start the server or fix the URL")


def fetch_json(url: str, timeout_s: float = 10.0) -> dict[str, Any] | None:
    """GET ``url`` and parse JSON; None on any failure (a missing optional document)."""
    import httpx

    try:
        with httpx.Client(timeout=timeout_s) as c:
            r = c.get(url)
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def read_target(cfg: LoadConfig, timeout_s: float = 10.0) -> TargetInfo:
    """Read the target and build the payload pool.

    Raises:
        UsageError: unreachable target, unknown model (names the models served), unresolved shape,
            unreadable --body/--input-data, bad --header (one line each).
    """
    import httpx

    ep = Endpoint.parse(cfg.url)
    if cfg.body is not None:
        return _plain_target(cfg, ep, timeout_s)
    if not cfg.model:
        raise UsageError("a KServe v2 target needs --model NAME (or pass --body FILE for a plain URL)")
    base = cfg.url.rstrip("/")
    with httpx.Client(timeout=timeout_s) as c:
        server_doc = _get(c, f"{base}/v2", "server")
        meta = _get(c, f"{base}/v2/models/{cfg.model}", "model")
        if meta.status_code != 200:
            raise UsageError(f"model '{cfg.model}' is not served at {base}{_served_hint(c, base)}: check --model")
        config = c.get(f"{base}/v2/models/{cfg.model}/config")
    server = server_doc.json() if server_doc.status_code == 200 else {}
    info = TargetInfo(kind="kserve", url=base, model=cfg.model, server=server, metadata=meta.json(),
                      config=config.json() if config.status_code == 200 else {},
                      has_stats="statistics" in (server.get("extensions") or []))  # fmt: skip
    build_payloads(info, cfg, ep)
    return info


def _served_hint(client: Any, base: str) -> str:
    r = client.get(f"{base}/v2/models/stats")
    try:
        names = sorted({m["name"] for m in r.json()["model_stats"]}) if r.status_code == 200 else []
    except (ValueError, KeyError, TypeError):
        names = []
    return f" (served: {', '.join(names)})" if names else ""


def parse_headers(values: list[str]) -> list[tuple[str, str]]:
    """``K:V`` strings -> pairs.

    Raises:
        UsageError: a value without ``:``.
    """
    out = []
    for h in values:
        k, sep, v = h.partition(":")
        if not sep or not k.strip():
            raise UsageError(f"--header {h!r}: write it as Name:value, e.g. --header Authorization:Bearer-x")
        out.append((k.strip(), v.strip()))
    return out


def _plain_target(cfg: LoadConfig, ep: Endpoint, timeout_s: float = 10.0) -> TargetInfo:
    import socket

    p = Path(cfg.body or "")
    if not p.is_file():
        raise UsageError(f"--body {str(p)!r} not found: pass an existing file")
    try:  # a plain URL has no metadata to read: open one TCP connection so a wrong URL fails before any load
        socket.create_connection((ep.host, ep.port), timeout=timeout_s).close()
    except OSError as e:
        raise UsageError(f"target {cfg.url} is unreachable ({type(e).__name__}: {e}): start the server or fix the URL")
    req = build_request(ep, "POST", ep.path, p.read_bytes(), parse_headers(cfg.headers))
    return TargetInfo(kind="url", url=cfg.url, model=None, payloads=[req], data_source=str(p))


def encode_infer(arrays: dict[str, np.ndarray], datatypes: dict[str, str], binary: bool,
                 parameters: dict[str, Any] | None = None) -> tuple[bytes, list]:
    """A KServe v2 ``/infer`` body and its extra headers (JSON, or Triton binary tensors); ``parameters``: the
    request's own (a sequence's ``sequence_id`` / ``sequence_start`` / ``sequence_end``)."""
    if not binary:
        doc: dict[str, Any] = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": datatypes[n],
                                           "data": a.ravel()} for n, a in arrays.items()]}
        if parameters:
            doc["parameters"] = parameters
        return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY), [("Content-Type", "application/json")]
    raws = [np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes() for a in arrays.values()]
    doc = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": datatypes[n],
                       "parameters": {"binary_data_size": len(r)}}
                      for (n, a), r in zip(arrays.items(), raws, strict=True)],
           "parameters": {"binary_data_output": True, **(parameters or {})}}  # fmt: skip
    header = orjson.dumps(doc)
    headers = [("Content-Type", "application/octet-stream"), ("Inference-Header-Content-Length", str(len(header)))]
    return header + b"".join(raws), headers


def build_payloads(info: TargetInfo, cfg: LoadConfig, ep: Endpoint) -> None:
    """Fill ``info.payloads`` (whole HTTP requests) and what :func:`payload_arrays` fills; with
    ``--shared-memory system`` each payload's inputs go into a registered region (``info.shm``) and its body is
    JSON naming them.

    Raises:
        UsageError: as :func:`payload_arrays`; a region the server refused.
    """
    path = f"{ep.path.rstrip('/')}/v2/models/{info.model}/infer"
    extra = parse_headers(cfg.headers)
    arrays_list = payload_arrays(info, cfg)
    if cfg.shared_memory == "system":
        from .shm_client import http_payloads

        info.payloads = http_payloads(info, cfg, arrays_list, extra, lambda body: build_request(
            ep, "POST", path, body, [("Content-Type", "application/json"), *extra]))
        return
    def request(k: int, sid: int, start: bool, end: bool) -> bytes:
        params = {"sequence_id": sid, "sequence_start": start, "sequence_end": end}
        body, headers = encode_infer(arrays_list[k], info.dtypes, cfg.protocol == "binary", params)
        return build_request(ep, "POST", path, body, [*headers, *extra])

    seq = sequence_payloads(info, cfg, request, len(arrays_list))
    if seq is not None:
        info.payloads = seq
        return
    for arrays in arrays_list:
        body, headers = encode_infer(arrays, info.dtypes, cfg.protocol == "binary")
        info.payloads.append(build_request(ep, "POST", path, body, [*headers, *extra]))


def fetch_stats(info: TargetInfo, timeout_s: float = 5.0) -> dict[str, Any] | None:
    """The model's Triton statistics entry (``model_stats[0]``) now, or None when not served. When the server
    also exports inferperf's duration histograms on ``/metrics``, the entry carries them as ``server_times``
    (:func:`inferperf.loadgen.breakdown.fetch_server_times`; absent otherwise)."""
    from .breakdown import fetch_server_times

    if not info.has_stats or not info.model:
        return None
    if info.stats_source is not None:  # a gRPC target: no /metrics beside it, so no server_times
        return info.stats_source(info, info.call_metadata, timeout_s)
    doc = fetch_json(f"{info.url}/v2/models/{info.model}/stats", timeout_s)
    try:
        entry = dict(doc["model_stats"][0]) if doc else None
    except (KeyError, IndexError, TypeError):
        return None
    if entry is not None:
        times = fetch_server_times(info.url, info.model, timeout_s)
        if times:
            entry["server_times"] = times
    return entry


__all__ = ["TargetInfo", "build_payloads", "encode_infer", "fetch_json", "fetch_stats", "parse_headers",
           "parse_shape", "payload_arrays", "read_target", "declared_inputs"]
