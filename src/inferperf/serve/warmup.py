"""Warm-up of a served model: its inputs (:func:`warm_feeds`), and the whole serving path before ready.

:func:`warm_feeds` builds one feed per warm-up shape (synthetic and seeded, or
from ``--input-data``, which string inputs need); :func:`probed_outputs` names
the outputs of a model that declares none from one call on such a feed.

``ServedModel.load`` warms the instances by calling the runtime directly; that
leaves every first-call cost of the path a request takes (Starlette's request
and its disconnect check, whose first call imports anyio's asyncio backend:
15 ms measured, the batcher's dispatcher task, the instance's executor hand-off,
decode and encode) to the first client, whose batch then goes out late (22 ms
past a 100 ms queue delay measured on a fresh server, under 2 ms once warm).
:func:`warm_through_app` sends each model's warm-up feeds (``ServedModel.
warmup_feeds``: one per shape) as binary-tensor requests through the app's
routes in the server's own event loop, in the ASGI lifespan startup, so before
uvicorn accepts a connection. The middleware chain (request id, access log, API
key) is left out: warm-up is not a client's request. The models' observers
are muted meanwhile and the metrics and statistics are reset afterwards, so no
figure counts the warm-up. :func:`warm_model` does the same for a model loaded
while serving (``POST /v2/repository/models/NAME/load``), before it is swapped in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import orjson

from ..config import BenchConfig
from ..errors import UsageError
from ..results.model import TensorInfo
from ..workload.data import build_workload
from .batcher import NullObserver
from .protocol import HEADER_LENGTH
from .binary_tensors import binary_data
from .tensor_types import datatype_of


def _rows_of(arr: np.ndarray, rows: int) -> np.ndarray:
    """``rows`` rows cycled from ``arr``'s leading axis (data of any row count shaped to a warm-up batch)."""
    return arr[np.arange(rows) % arr.shape[0]]


def warm_feeds(inputs: list[TensorInfo], metadata: Any, mbs: int, config: BenchConfig,
                index_ranges: dict[str, tuple[int, int]], notes: list[str]) -> list[dict[str, Any]]:
    """One feed per warm-up shape (1 row and ``mbs`` rows when batching, else the model's shape): from
    ``workload.input_data`` when given (its first feed, rows cycled), else synthetic (seeded); empty, with
    a note, when free dims leave the shape open.

    Raises:
        UsageError: a string input without ``--input-data`` (synthetic strings are not generated), or data
            that does not fit the model.
    """
    w = config.workload
    sizes = sorted({1, mbs}) if mbs > 1 else [1]
    if w.input_data is not None:
        given = {t.name: list(t.shape) for t in metadata.inputs if -1 not in t.shape}
        base = build_workload(inputs, shapes=given, dims=w.dims, pool_size=1, seed=w.seed,
                              input_data=w.input_data).feeds[0]  # fmt: skip
        if mbs == 0:
            return [base]
        return [{n: _rows_of(np.asarray(a), r) for n, a in base.items()} for r in sizes]
    strings = [t.name for t in metadata.inputs if t.datatype == "BYTES"]
    if strings:
        raise UsageError(f"input(s) {strings} are string tensors and synthetic strings are not generated: pass"
                         " --input-data FILE.npz (arrays by input name) for the warm-up, or --warmup 0 to serve"
                         " without warm-up")
    free = [f"{t.name}{list(t.shape)}" for t in metadata.inputs if -1 in (t.shape[1:] if mbs > 0 else t.shape)]
    if free:
        notes.append(f"warm-up skipped: input(s) {', '.join(free)} have free dims; pass --shape or --dim to warm up")
        return []
    feeds = []
    for rows in sizes:
        shapes = {t.name: ([rows, *t.shape[1:]] if mbs > 0 else list(t.shape)) for t in metadata.inputs}
        feeds += build_workload(inputs, shapes=shapes, pool_size=1, seed=w.seed, int_ranges=w.int_ranges,
                                values=w.values, index_ranges=index_ranges).feeds
    return feeds


def probed_outputs(pool: Any, feeds: list[dict[str, Any]], mbs: int, notes: list[str]) -> list[TensorInfo]:
    """Outputs of a model that declares none (a torch ``module:function`` or TorchScript file): one call on
    the first warm-up feed, named ``output_0``... as :func:`inferperf.backends.torch_backend.export_onnx`
    names them, dtype and dims as returned (the batch dim symbolic when batching). Empty without a feed."""
    if not feeds:
        notes.append("the model declares no outputs and no warm-up feed could probe them: outputs are named"
                      " output_0... per answer and are not in the metadata; pass --shape to probe them")
        return []
    rows = next(iter(feeds[0].values())).shape[0] if mbs > 0 else 1
    arrays = pool.run_sync(0, [feeds[0]], [rows]).per_request[0]
    notes.append(f"the model declares no outputs: {len(arrays)} named output_0... from one probe call")
    return [TensorInfo(name=f"output_{k}", dtype=np.asarray(a).dtype.name,
                       shape=["batch", *a.shape[1:]] if mbs > 0 else list(a.shape)) for k, a in enumerate(arrays)]


def request_body(feed: dict[str, Any]) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """A KServe v2 request carrying ``feed`` (input name -> array) as binary tensors, asking binary outputs.

    Returns:
        (body, ASGI headers: content type, content length, the JSON header's length).
    """
    entries, blobs = [], []
    for name, arr in feed.items():
        arr = np.asarray(arr)
        blob = bytes(binary_data(arr))
        entries.append({"name": name, "datatype": datatype_of(arr), "shape": list(arr.shape),
                        "parameters": {"binary_data_size": len(blob)}})
        blobs.append(blob)
    head = orjson.dumps({"inputs": entries, "parameters": {"binary_data_output": True}})
    body = b"".join([head, *blobs])
    headers = [(b"content-type", b"application/octet-stream"), (b"content-length", str(len(body)).encode()),
               (HEADER_LENGTH.encode(), str(len(head)).encode())]
    return body, headers


@contextlib.contextmanager
def muted(model: Any) -> Iterator[None]:
    """The model's batcher and executor report to no observer for the duration (warm-up is not counted)."""
    batcher = getattr(model, "batcher", None)
    saved = (getattr(model, "_observer", None), getattr(batcher, "_observer", None))
    null = NullObserver()
    if batcher is not None:
        batcher._observer = null
    model._observer = null
    try:
        yield
    finally:
        model._observer = saved[0]
        if batcher is not None:
            batcher._observer = saved[1]


async def _post(routes: Any, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """POST ``body`` to ``path`` of the ASGI app ``routes`` in this loop; (status, response body).

    The client never goes away: after the body, ``receive`` waits until the answer is sent (Starlette's
    disconnect check and the app's disconnect watcher ask it, as for a real client)."""
    done = asyncio.Event()
    sent = False
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0),
             "state": {}}  # fmt: skip
    try:
        await routes(scope, receive, send)
    finally:
        done.set()
    return status, b"".join(chunks)


async def warm_through_app(app: Any, models: Sequence[Any]) -> int:
    """Send every warm-up feed of ``models`` through ``app``'s routes (``app._routes``), then reset the
    metrics and each model's statistics. A request answered other than 200 becomes a note of its model.

    Returns:
        the number of warm-up requests sent.
    """
    sent = 0
    for model in models:
        feeds = getattr(model, "warmup_feeds", None) or []
        path = f"/v2/models/{model.name}/versions/{model.version}/infer"
        with muted(model):
            for feed in feeds:
                status, answer = await _post(app._routes, path, *request_body(feed))
                sent += 1
                if status != 200:
                    model.notes.append(f"warm-up request through the app answered {status}:"
                                       f" {answer[:200].decode(errors='replace')}")
        if feeds and hasattr(model, "reset_stats"):
            model.reset_stats()
    if sent:
        app.metrics.reset()
        app.last_used.clear()
    return sent


async def warm_model(model: Any) -> int:
    """Run each warm-up feed of ``model`` (not yet served) through its batcher and instances, muted, then
    reset its statistics; returns the requests run. The app's own path was warmed at start."""
    feeds = getattr(model, "warmup_feeds", None) or []

    async def here() -> bool:
        return False

    with muted(model):
        for feed in feeds:
            arrays = {n: np.asarray(a) for n, a in feed.items()}
            rows = next(iter(arrays.values())).shape[0] if model.max_batch_size > 0 else 1
            await model.infer(arrays, rows, None, here)
    if feeds:
        model.reset_stats()
    return len(feeds)
