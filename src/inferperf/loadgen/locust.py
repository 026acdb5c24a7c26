"""A Locust ``User`` for the KServe v2 infer route, for load from many client machines (issue 13, item 9).

Run it with Locust's own CLI (from Locust's venv: ``bash scripts/install_locust.sh``), alone or under
Locust's ``--master`` / ``--worker`` mode::

    locust -f src/inferperf/loadgen/locust.py --headless -u 32 -r 32 -t 60s \\
        --host http://127.0.0.1:8000 --model-name squeezenet --protocol binary --csv out/run
    inferperf load --from-locust-csv out/run -o results/      # summary-only Results (kind "load")

or subclass :class:`KServeUser` in your own locustfile (``from inferperf.loadgen.locust import KServeUser``).

Settings (Locust custom arguments; each also read from an environment variable, which is how Locust's
workers get them when the master does not forward them):

==========================  ============================  =====================================================
argument                    environment variable          meaning
==========================  ============================  =====================================================
``--model-name NAME``       ``INFERPERF_LOCUST_MODEL``    model on the server (default: the server's only model)
``--protocol json|binary``  ``INFERPERF_LOCUST_PROTOCOL`` KServe v2 JSON or Triton's binary tensor extension
``--shape NAME:1x3x32x32``  ``INFERPERF_LOCUST_SHAPE``    fixes free dims, comma-separated for several inputs
``--seed N``                ``INFERPERF_LOCUST_SEED``     seed of the payload pool (default 0)
``--pool-size N``           ``INFERPERF_LOCUST_POOL``     distinct payloads built up front (default 16)
==========================  ============================  =====================================================

Each Locust process (a worker, or the single process without ``--master``; never the master) fetches the
model metadata once (``GET /v2/models/{name}``, outside Locust's stats) and builds the pool of distinct
seeded request bodies before its first request, so payload building never enters a timed request; user *k*
starts at pool entry *k* and walks the pool in order.

The pool is built in a greenlet without blocking gevent's loop: the fetches cooperate through gevent's
monkey-patched sockets, and the bodies are encoded one at a time with a turn of the loop after each. The
build starts on Locust's ``init`` event when the process was given ``--host`` (start workers with the
test's ``--host`` and settings and they build while the master gathers them), else on ``test_start`` (a
worker learns ``--host`` and the custom arguments from the master's first spawn message, which fires it).
Users wait for it in ``on_start``, cooperatively; a pool that cannot be built (server down, wrong model) is
logged and fails every user's start. (Built in one go inside the first user's ``on_start``, as before
issue 23, JSON payloads held the loop for seconds: a worker missed its heartbeats, the master dropped it
as missing and no request was made.)

A user waits 0 s between requests: each user is one closed-loop stream (perf_analyzer's concurrency). A
non-2xx answer is a Locust failure. Requests are named ``/v2/models/{name}/infer`` in Locust's stats,
which :mod:`inferperf.loadgen.locust_import` reads back.

This module imports ``locust`` (and so gevent's monkey-patching) at import time: ``import inferperf``
never imports it, and the test suite only runs it as a subprocess from Locust's venv.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import gevent
import numpy as np
from gevent.event import Event
from locust import FastHttpUser, constant, events, task
from locust.runners import MasterRunner

log = logging.getLogger("inferperf.locust")

#: argument -> (environment variable, default)
SETTINGS: dict[str, tuple[str, str]] = {
    "model_name": ("INFERPERF_LOCUST_MODEL", ""),
    "protocol": ("INFERPERF_LOCUST_PROTOCOL", "json"),
    "shape": ("INFERPERF_LOCUST_SHAPE", ""),
    "seed": ("INFERPERF_LOCUST_SEED", "0"),
    "pool_size": ("INFERPERF_LOCUST_POOL", "16"),
}

#: KServe v2 datatype -> numpy dtype the pool builder can fill (BYTES inputs are not built here).
DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64), "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
}  # fmt: skip
BINARY_HEADER = "Inference-Header-Content-Length"


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    """Locust's custom arguments (shown by ``locust --help`` and in the web UI)."""
    group = parser.add_argument_group("inferperf KServe v2 user")
    helps = {
        "model_name": "model name on the server (default: the server's only model)",
        "protocol": "json (KServe v2 JSON tensors) or binary (Triton's binary tensor extension)",
        "shape": "NAME:1x3x224x224 fixes an input's free dims; comma-separated for several inputs",
        "seed": "seed of the pool of distinct request payloads",
        "pool_size": "distinct request payloads each Locust process builds before its first request",
    }
    for name, (env, default) in SETTINGS.items():
        group.add_argument("--" + name.replace("_", "-"), type=str, default=os.environ.get(env, default),
                           env_var=env, help=f"{helps[name]} (env {env}; default {default or 'none'})")


def parse_shapes(text: str) -> dict[str, list[int]]:
    """``"x:1x3x32x32,y:2x4"`` -> ``{"x": [1, 3, 32, 32], "y": [2, 4]}``; ``ValueError`` naming the fix."""
    out: dict[str, list[int]] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, dims = item.rpartition(":")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = [int(d) for d in dims.lower().split("x")]
        except ValueError:
            raise ValueError(f"--shape {item!r}: write NAME:1x3x224x224 (comma-separated for several inputs)") from None
    return out


def _concrete_shape(spec: dict[str, Any], given: dict[str, list[int]]) -> list[int]:
    """The shape sent for one input: ``--shape`` when given, else metadata with a free leading dim set to 1."""
    name, shape = spec["name"], [int(d) for d in spec["shape"]]
    if name in given:
        return given[name]
    if shape and shape[0] == -1:
        shape[0] = 1
    if any(d < 0 for d in shape):
        raise ValueError(f"input {name!r} has free dims {shape}: pass --shape {name}:1x3x224x224")
    return shape


def _tensor(rng: np.random.Generator, dtype: np.dtype, shape: list[int]) -> np.ndarray:
    """Seeded values: standard normal floats, integers in [0, 100), random booleans."""
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    return rng.integers(0, 100, size=shape).astype(dtype)


def encode_request(inputs: list[tuple[str, str, np.ndarray]], binary: bool) -> tuple[bytes, dict[str, str]]:
    """One KServe v2 infer body and its headers.

    Args:
        inputs: ``(name, datatype, array)`` per input.
        binary: Triton's binary tensor extension (JSON header + raw little-endian tensor bytes, outputs asked
            back in binary) instead of JSON ``data`` lists.

    Returns:
        ``(body, headers)``; binary bodies carry ``Inference-Header-Content-Length``.
    """
    if not binary:
        doc = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": dt, "data": a.ravel().tolist()}
                          for n, dt, a in inputs]}  # fmt: skip
        return json.dumps(doc, separators=(",", ":")).encode(), {"Content-Type": "application/json"}
    raw = [np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes() for _, _, a in inputs]
    doc = {
        "inputs": [{"name": n, "shape": list(a.shape), "datatype": dt, "parameters": {"binary_data_size": len(b)}}
                   for (n, dt, a), b in zip(inputs, raw, strict=True)],
        "parameters": {"binary_data_output": True},
    }  # fmt: skip
    header = json.dumps(doc, separators=(",", ":")).encode()
    return header + b"".join(raw), {"Content-Type": "application/octet-stream", BINARY_HEADER: str(len(header))}


def build_pool(metadata: dict[str, Any], shapes: dict[str, list[int]], seed: int, size: int,
               protocol: str, pause: Callable[[], Any] | None = None) -> list[tuple[bytes, dict[str, str]]]:  # fmt: skip
    """``size`` distinct seeded request bodies for a model, from its KServe v2 metadata.

    Args:
        metadata: ``GET /v2/models/{name}`` document (``inputs``: name, datatype, shape with -1 for free dims).
        shapes: ``--shape`` values by input name (they fix free dims).
        seed: seed of the values (entry ``i`` of one seed is the same on every process and machine).
        size: number of distinct payloads (>= 1).
        protocol: ``json`` or ``binary``.
        pause: called after each payload (a yield to gevent's loop in a Locust process).

    Raises:
        ValueError: unknown protocol, BYTES or unknown datatypes, a free dim without ``--shape``.
    """
    if protocol not in ("json", "binary"):
        raise ValueError(f"--protocol {protocol!r}: use json or binary")
    specs = list(metadata.get("inputs") or [])
    for s in specs:
        if s["datatype"] not in DTYPES:
            raise ValueError(f"input {s['name']!r} is {s['datatype']}: this user builds numeric inputs only")
    dims = {s["name"]: _concrete_shape(s, shapes) for s in specs}
    rng = np.random.default_rng(seed)
    pool = []
    for _ in range(max(1, size)):
        tensors = [(s["name"], s["datatype"], _tensor(rng, DTYPES[s["datatype"]], dims[s["name"]])) for s in specs]
        pool.append(encode_request(tensors, protocol == "binary"))
        if pause is not None:
            pause()
    return pool


def fetch_json(url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """GET ``url`` and parse JSON; ``RuntimeError`` naming the URL and the fix when it fails."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"GET {url} answered {e.code}: check --host and --model-name") from None
    except (OSError, ValueError) as e:
        raise RuntimeError(f"GET {url} failed ({e}): is the server up at --host?") from None


def only_model(host: str) -> str:
    """The server's one model, from Triton's statistics extension (``GET /v2/models/stats``).

    Raises:
        RuntimeError: the server lists no model or several (pass ``--model-name``).
    """
    names = sorted({str(m.get("name")) for m in fetch_json(f"{host}/v2/models/stats").get("model_stats", [])})
    if len(names) != 1:
        raise RuntimeError(f"the server at {host} serves {names or 'no model'}: pass --model-name NAME")
    return names[0]


def _yield_to_loop() -> None:
    """Let gevent's loop run a full turn (timers and sockets: heartbeats, the master's messages)."""
    gevent.sleep(0.001)


def _settings(host: str, options: Any) -> tuple[str, ...]:
    """(host, model_name, protocol, shape, seed, pool_size): Locust's parsed options, else the environment."""

    def opt(name: str) -> str:
        return str(getattr(options, name, None) or os.environ.get(SETTINGS[name][0], SETTINGS[name][1]))

    return (host.rstrip("/"), *(opt(name) for name in SETTINGS))


class _Pool:
    """The payloads of this Locust process, built once per settings in a greenlet (see the module docstring)."""

    model: str = ""
    path: str = ""
    items: list[tuple[bytes, dict[str, str]]] = []
    key: tuple[str, ...] | None = None  # the settings the pool is (being) built for
    ready: Event | None = None
    error: str | None = None

    @classmethod
    def start(cls, host: str, options: Any) -> Event:
        """Start building the pool in a greenlet unless it is built or building for these settings.

        Returns:
            The event set when the build has ended (``items`` filled, or ``error`` set).
        """
        key = _settings(host, options)
        if cls.ready is None or cls.key != key:
            cls.key, cls.ready, cls.error, cls.items = key, Event(), None, []
            gevent.spawn(cls._build, key, cls.ready)
        return cls.ready

    @classmethod
    def _build(cls, key: tuple[str, ...], ready: Event) -> None:
        host, model, protocol, shape, seed, size = key
        t0 = time.perf_counter()
        try:
            model = model or only_model(host)
            meta = fetch_json(f"{host}/v2/models/{model}")
            items = build_pool(meta, parse_shapes(shape), int(seed), int(size), protocol, pause=_yield_to_loop)
        except (RuntimeError, ValueError) as e:
            if ready is cls.ready:
                cls.error = str(e)
            log.error("inferperf: no payload pool: %s", e)
        else:
            if ready is cls.ready:  # not superseded by a build for other settings
                cls.model, cls.path, cls.items = model, f"/v2/models/{model}/infer", items
                log.info("inferperf: payload pool of %d %s bodies for model %r built in %.2f s", len(items),
                         protocol, model, time.perf_counter() - t0)  # fmt: skip
        finally:
            ready.set()

    @classmethod
    def wait(cls, host: str, options: Any) -> None:
        """Start the build if needed and wait for it without blocking gevent's loop.

        Raises:
            RuntimeError: the pool could not be built (the reason names the fix).
        """
        ready = cls.start(host, options)
        while not ready.wait() or ready is not cls.ready:  # superseded meanwhile: wait for the newer build
            ready = cls.ready  # type: ignore[assignment]
        if cls.error:
            raise RuntimeError(cls.error)


@events.init.add_listener
@events.test_start.add_listener
def _build_pool_early(environment: Any, **_: Any) -> None:
    """Start the pool's build on every process that runs users (not the master): at start-up when it was given
    ``--host`` (a worker started with the test's settings builds while the master gathers workers), else when
    the test starts (a worker gets ``--host`` and the settings from the master's first spawn message)."""
    if not isinstance(environment.runner, MasterRunner) and environment.host:
        _Pool.start(environment.host, environment.parsed_options)


class KServeUser(FastHttpUser):
    """One closed-loop stream POSTing ``/v2/models/{name}/infer`` with payloads from the seeded pool.

    Subclass it to change ``wait_time`` (default 0 s between requests) or add tasks.
    """

    wait_time = constant(0)
    _count = 0

    def on_start(self) -> None:
        """Wait for the process's payload pool (built once, see the module docstring); pick this user's entry."""
        _Pool.wait(self.host or "", self.environment.parsed_options)
        self._next = KServeUser._count % len(_Pool.items)
        KServeUser._count += 1

    @task
    def infer(self) -> None:
        """One infer request; Locust counts a non-2xx answer as a failure."""
        body, headers = _Pool.items[self._next]
        self._next = (self._next + 1) % len(_Pool.items)
        self.client.post(_Pool.path, data=body, headers=headers, name=_Pool.path)
