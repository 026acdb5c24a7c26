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
from ..results.model import TensorInfo
from ..workload.shapes import check_given_shape
from .options import LoadConfig
from .sequence_load import sequence_payloads
from .transport import Endpoint, build_request

_NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
          "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
          "FP32": np.float32, "FP64": np.float64}  # fmt: skip


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


def parse_shape(value: str, input_names: list[str]) -> tuple[str, list[int]]:
    """``name:1x3x224x224`` (or ``1x3x224x224`` for a one-input model) -> (name, dims).

    Raises:
        UsageError: unknown input, a model with several inputs and no name, a bad dim.
    """
    name, sep, dims = value.rpartition(":")
    if not sep:
        if len(input_names) != 1:
            raise UsageError(f"--shape {value!r}: name the input (inputs: {input_names}), e.g. --shape x:{value}")
        name = input_names[0]
    if name not in input_names:
        raise UsageError(f"--shape {value!r}: no input '{name}' (inputs: {input_names})")
    try:
        out = [int(d) for d in dims.lower().split("x")]
    except ValueError:
        raise UsageError(f"--shape {value!r}: dims are integers joined by x, e.g. 1x3x224x224") from None
    if any(d < 0 for d in out):
        raise UsageError(f"--shape {value!r}: dims must be >= 0")
    return name, out


def _spec(t: dict[str, Any]) -> TensorInfo:
    """A KServe v2 metadata tensor (``-1`` = any size) as the workload's :class:`TensorInfo`."""
    return TensorInfo(name=t["name"], dtype=str(t.get("datatype", "")), shape=[int(d) for d in t["shape"]])


def check_rows(name: str, dims: list[int], max_batch: int, flag: str = "--shape") -> None:
    """A batched model (``max_batch_size`` > 0 in its config) takes at most that many rows per request.

    Raises:
        UsageError: ``dims[0]`` above ``max_batch`` (the server would answer 400).
    """
    if max_batch > 0 and dims and dims[0] > max_batch:
        raise UsageError(f"{flag} {name}:{'x'.join(map(str, dims))}: {dims[0]} rows exceed the model's max_batch_size"
                         f" {max_batch}: send at most {max_batch} rows per request")  # fmt: skip


def _resolve(inputs: list[dict[str, Any]], given: dict[str, list[int]], batched: bool,
             max_batch: int = 0) -> dict[str, list[int]]:  # fmt: skip
    shapes = {}
    for t in inputs:
        name, dims = t["name"], [int(d) for d in t["shape"]]
        if name in given:  # checked against the metadata as bench checks --shape: a malformed request is never sent
            shapes[name] = check_given_shape(_spec(t), given[name])
            check_rows(name, given[name], max_batch)
            continue
        if batched and dims and dims[0] == -1:
            dims[0] = 1
        if any(d < 0 for d in dims):
            free = "x".join(str(d) if d >= 0 else "N" for d in dims)
            raise UsageError(f"input '{name}' has free dims ({free}): pass --shape {name}:{free.replace('N', '8')}")
        shapes[name] = dims
    return shapes


def _shape_mix(cfg: LoadConfig, inputs: list[dict[str, Any]], batched: bool,
               max_batch: int) -> list[dict[str, list[int]]]:  # fmt: skip
    names = [t["name"] for t in inputs]
    if not cfg.shapes:
        return [_resolve(inputs, {}, batched)]
    parsed = [parse_shape(v, names) for v in cfg.shapes]
    if len({n for n, _ in parsed}) == len(parsed) and len(names) > 1 and not cfg.shape_weights:
        return [_resolve(inputs, dict(parsed), batched, max_batch)]  # one shape per input: one combination
    return [_resolve(inputs, {n: d}, batched, max_batch) for n, d in parsed]


def _counts(weights: list[float], n: int) -> list[int]:
    """Largest-remainder split of ``n`` pool entries by ``weights`` (each shape at least once)."""
    w = np.asarray(weights, dtype=np.float64) / sum(weights)
    raw = w * n
    base = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - base))[: n - int(base.sum())]:
        base[i] += 1
    return [max(1, int(b)) for b in base]


def _values(rng: np.random.Generator, datatype: str, dims: list[int]) -> np.ndarray:
    dt = _NUMPY.get(datatype)
    if dt is None:
        raise UsageError(f"datatype {datatype} is not generated: pass --input-data FILE.npz with the values")
    if np.issubdtype(dt, np.floating):
        return rng.standard_normal(dims).astype(dt)
    if dt is np.bool_:
        return rng.integers(0, 2, dims).astype(np.bool_)
    return rng.integers(0, 10, dims).astype(dt)


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


def payload_arrays(info: TargetInfo, cfg: LoadConfig) -> list[dict[str, np.ndarray]]:
    """The payload pool's input arrays (name -> array, one dict per payload) from the metadata and ``cfg``
    (``--input-data`` samples, or seeded values of each ``--shape`` in proportion to ``--shape-weights``); fills
    ``info.shapes``, ``dtypes`` and ``data_source``.

    Raises:
        UsageError: a model that lists no inputs, an unresolved shape, unreadable or mismatched --input-data.
    """
    inputs = list(info.metadata.get("inputs") or []) or declared_inputs(cfg)
    if not inputs:
        raise UsageError(f"model '{info.model}' lists no inputs in its metadata (GET /v2/models/{info.model}), so no "
                         "request can be built from it: give them with --shape NAME:DIMS (FP32) or --input-data "
                         "FILE.npz, declare them on the server (MLServer: 'inputs' in model-settings.json), or send a "
                         "prepared request with --body FILE")
    info.metadata["inputs"] = inputs  # declared by the user when the server lists none: the Result records them
    max_batch = int(info.config.get("max_batch_size", 0) or 0)
    batched = max_batch > 0 or not info.config
    info.dtypes = {t["name"]: t["datatype"] for t in inputs}
    rng = np.random.default_rng(cfg.seed)
    if cfg.input_data:
        arrays_list = _npz_samples(cfg.input_data, inputs, max_batch)
        info.data_source = cfg.input_data
        info.shapes = [{n: list(a.shape) for n, a in arrays_list[0].items()}]
        return arrays_list
    mix = _shape_mix(cfg, inputs, batched, max_batch)
    counts = _counts(cfg.shape_weights or [1.0] * len(mix), max(cfg.input_pool_size, len(mix)))
    order = [i for i, c in enumerate(counts) for _ in range(c)]
    rng.shuffle(order)
    info.shapes = mix
    return [{n: _values(rng, info.dtypes[n], d) for n, d in mix[i].items()} for i in order]


def declared_inputs(cfg: LoadConfig) -> list[dict[str, Any]]:
    """Inputs of a model whose metadata lists none (MLServer without ``inputs`` in its model-settings), as the
    user gives them: ``--input-data FILE.npz`` (each array's name and datatype, a free leading dim), else each
    ``--shape NAME:DIMS`` (datatype FP32, the dims as given); empty when neither names an input.

    Raises:
        UsageError: an unreadable --input-data, or a --shape without a name.
    """
    datatype_of = {np.dtype(v): k for k, v in _NUMPY.items()}
    if cfg.input_data:
        try:
            data = dict(np.load(Path(cfg.input_data), allow_pickle=False))
        except (OSError, ValueError) as e:
            raise UsageError(f"--input-data {cfg.input_data!r}: not a readable .npz ({e}): save with numpy.savez") from None
        unknown = [k for k, a in data.items() if a.dtype not in datatype_of]
        if unknown:
            raise UsageError(f"--input-data {cfg.input_data!r}: {unknown} are not of a KServe v2 numeric datatype")
        return [{"name": k, "datatype": datatype_of[a.dtype], "shape": [-1, *a.shape[1:]]} for k, a in data.items()]
    out = []
    for value in cfg.shapes:
        name, sep, _ = value.rpartition(":")
        if not sep or not name:
            raise UsageError(f"--shape {value!r}: the model's metadata lists no inputs, so name it: --shape x:{value}")
        out.append({"name": name, "datatype": "FP32", "shape": parse_shape(value, [name])[1]})
    return out


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


def _npz_samples(path: str, inputs: list[dict[str, Any]], max_batch: int = 0) -> list[dict[str, np.ndarray]]:
    p = Path(path)
    try:
        data = dict(np.load(p, allow_pickle=False))
    except (OSError, ValueError) as e:
        raise UsageError(f"--input-data {path!r}: not a readable .npz ({e}): save with numpy.savez") from None
    names = [t["name"] for t in inputs]
    missing = [n for n in names if n not in data]
    if missing:
        raise UsageError(f"--input-data {path!r} lacks input(s) {missing}: the model needs {names}")
    n = min(len(data[k]) for k in names)
    if n == 0:
        raise UsageError(f"--input-data {path!r} holds no samples (leading axis is 0)")
    out = []
    for j in range(n):
        sample = {}
        for t in inputs:
            arr = data[t["name"]]
            sample[t["name"]] = arr[j : j + 1] if arr.ndim == len(t["shape"]) else arr[j]
        out.append(sample)
    for t in inputs:  # what the server would refuse is refused here: dtype, rank, fixed dims, rows
        a, want = out[0][t["name"]], _NUMPY.get(str(t["datatype"]))
        if want is not None and a.dtype != np.dtype(want):
            raise UsageError(f"--input-data {path!r}: '{t['name']}' is {a.dtype} but the model's input is"
                             f" {t['datatype']}: save it as {np.dtype(want).name}")  # fmt: skip
        check_given_shape(_spec(t), list(a.shape), flag=f"--input-data {path!r}:")
        check_rows(t["name"], list(a.shape), max_batch, flag=f"--input-data {path!r}:")
    return out


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
