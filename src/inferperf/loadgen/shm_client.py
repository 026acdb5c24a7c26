"""``load --shared-memory system``: the generator's side of Triton's system shared memory, for a client on the
server's machine (perf_analyzer's ``--shared-memory system``).

Before the first request, each payload of the pool gets a POSIX segment (``/dev/shm/inferperf-load-PID-TAG-N``)
holding its inputs one after another (each at a 64-byte aligned offset), registered as one region; the model's
outputs share one segment of ``--output-shared-memory-size`` bytes each, registered as one region (every request
writes there, as perf_analyzer's do: the answers are not read). A request then carries only names, offsets and
sizes: an HTTP body of JSON alone (no tensor bytes), or a ``ModelInferRequest`` without raw contents. The regions
are registered over the target's own protocol (``POST /v2/systemsharedmemory/region/NAME/register`` or the
``SystemSharedMemoryRegister`` RPC) and, when the run ends (also when it is interrupted or fails), unregistered,
and the segments unlinked (:meth:`ShmPool.close`, also at interpreter exit).

Sources: triton-inference-server/server ``docs/protocol/extension_shared_memory.md``; perf_analyzer's
``--shared-memory`` and ``--output-shared-memory-size`` (default 102400 bytes).
"""

from __future__ import annotations

import atexit
import mmap
import os
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import UsageError
from ..workload.raw_tensors import raw_contents

SHM_DIR = "/dev/shm"
ALIGN = 64
#: perf_analyzer's default --output-shared-memory-size
DEFAULT_OUTPUT_BYTES = 102400


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class ShmPool:
    """The segments and regions of one load run.

    Args:
        register: ``(region, key, byte_size)`` -> None, registering over the target's protocol (raises
            :class:`~inferperf.errors.UsageError` with the server's words when refused).
        unregister: ``region`` -> None (errors ignored: the run is ending).
    """

    def __init__(self, register: Callable[[str, str, int], None], unregister: Callable[[str], None]) -> None:
        self.register, self.unregister = register, unregister
        self.tag = f"inferperf-load-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.keys: list[str] = []
        self.regions: list[str] = []
        atexit.register(self.close)

    def _segment(self, name: str, data: list[tuple[int, bytes]], size: int) -> str:
        """Create ``/dev/shm/NAME`` of ``size`` bytes with each ``(offset, bytes)`` of ``data`` written; register
        it as region NAME."""
        key = "/" + name
        fd = os.open(SHM_DIR + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        self.keys.append(key)
        try:
            os.ftruncate(fd, size)
            if data:
                with mmap.mmap(fd, size) as mm:
                    for offset, blob in data:
                        mm[offset:offset + len(blob)] = blob
        finally:
            os.close(fd)
        self.register(name, key, size)
        self.regions.append(name)
        return name

    def inputs(self, arrays: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
        """A region holding ``arrays`` (one payload); returns name -> its ``shared_memory_*`` parameters."""
        blobs = {n: raw_contents(a) for n, a in arrays.items()}  # the raw layout, as a region holds it
        params, data, offset = {}, [], 0
        for n, b in blobs.items():
            params[n] = {"shared_memory_offset": offset, "shared_memory_byte_size": len(b)}
            data.append((offset, b))
            offset = _aligned(offset + len(b))
        region = self._segment(f"{self.tag}-in-{len(self.regions)}", data, max(offset, ALIGN))
        return {n: {"shared_memory_region": region, **p} for n, p in params.items()}

    def outputs(self, names: list[str], each_bytes: int) -> dict[str, dict[str, Any]]:
        """One region of ``each_bytes`` per output in ``names``; returns name -> its ``shared_memory_*``
        parameters."""
        if not names:
            return {}
        step = _aligned(each_bytes)
        region = self._segment(f"{self.tag}-out", [], step * len(names))
        return {n: {"shared_memory_region": region, "shared_memory_offset": i * step,
                    "shared_memory_byte_size": each_bytes} for i, n in enumerate(names)}

    def close(self) -> None:
        """Unregister every region and unlink every segment (idempotent; errors ignored)."""
        regions, keys = self.regions, self.keys
        self.regions, self.keys = [], []
        for r in regions:
            try:
                self.unregister(r)
            except Exception:  # noqa: BLE001 - the server may be gone: the segments are unlinked anyway
                pass
        for k in keys:
            try:
                os.unlink(SHM_DIR + k)
            except OSError:
                pass
        atexit.unregister(self.close)


def refused(where: str, status: Any, text: str) -> UsageError:
    """The one line of a registration the server refused."""
    hint = (": start it with --allow-client-shm (inferperf serve) or allow client shared memory (Triton)"
            if "allow" in text.lower() or str(status) in ("403", "PERMISSION_DENIED") else
            ": --shared-memory system needs the server on this machine" if "unable to open" in text.lower() else "")
    return UsageError(f"--shared-memory system: {where} refused the region ({status}: {text.strip()[:300]}){hint}")


def http_pool(base_url: str, headers: list[tuple[str, str]], timeout_s: float = 10.0) -> ShmPool:
    """A :class:`ShmPool` registering over HTTP at ``base_url`` (``headers``: the run's ``--header`` values)."""
    import httpx

    client = httpx.Client(base_url=base_url.rstrip("/"), headers=dict(headers), timeout=timeout_s)
    root = "/v2/systemsharedmemory/region"

    def register(region: str, key: str, size: int) -> None:
        r = client.post(f"{root}/{region}/register", json={"key": key, "offset": 0, "byte_size": size})
        if r.status_code != 200:
            text = r.json().get("error", r.text) if r.headers.get("content-type", "").startswith("application/json") \
                else r.text
            raise refused(base_url, r.status_code, text)

    def unregister(region: str) -> None:
        client.post(f"{root}/{region}/unregister")

    pool = ShmPool(register, unregister)
    pool.client = client  # type: ignore[attr-defined]  # kept open for the unregisters
    return pool


def grpc_pool(address: str, metadata: tuple[tuple[str, str], ...], timeout_s: float = 10.0) -> ShmPool:
    """A :class:`ShmPool` registering through the SystemSharedMemory RPCs at ``address`` (``HOST:PORT``)."""
    import grpc

    from ..workload.triton_protos import message

    channel = grpc.insecure_channel(address)
    base = "/inference.GRPCInferenceService/"

    def call(rpc: str, **fields: Any) -> None:
        req, resp = message(f"inference.{rpc}Request"), message(f"inference.{rpc}Response")
        channel.unary_unary(base + rpc, request_serializer=req.SerializeToString,
                            response_deserializer=resp.FromString)(req(**fields), timeout=timeout_s,
                                                                   metadata=metadata or None)

    def register(region: str, key: str, size: int) -> None:
        try:
            call("SystemSharedMemoryRegister", name=region, key=key, offset=0, byte_size=size)
        except grpc.RpcError as e:
            raise refused(address, e.code().name, e.details() or "") from None

    def unregister(region: str) -> None:
        call("SystemSharedMemoryUnregister", name=region)

    pool = ShmPool(register, unregister)
    pool.channel = channel  # type: ignore[attr-defined]
    return pool


def output_names(info: Any) -> list[str]:
    """The model's output names from its metadata (empty when it lists none: the answers then carry them)."""
    return [o["name"] for o in info.metadata.get("outputs") or [] if isinstance(o, dict) and "name" in o]


def shm_request_body(arrays: dict[str, np.ndarray], datatypes: dict[str, str], inputs: dict[str, dict[str, Any]],
                     outputs: dict[str, dict[str, Any]]) -> bytes:
    """A KServe v2 ``/infer`` JSON body whose inputs and outputs name shared-memory regions (no tensor bytes)."""
    import orjson

    doc: dict[str, Any] = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": datatypes[n],
                                       "parameters": inputs[n]} for n, a in arrays.items()]}
    if outputs:
        doc["outputs"] = [{"name": n, "parameters": p} for n, p in outputs.items()]
    return orjson.dumps(doc)


def shm_payloads(info: Any, cfg: Any, pool: ShmPool, arrays_list: list[dict[str, np.ndarray]],
                 build: Callable[[dict[str, np.ndarray], dict[str, Any], dict[str, Any]], bytes]) -> list[bytes]:
    """``build(arrays, input parameters, output parameters)`` for each payload of ``arrays_list``, its inputs put
    in a region of ``pool`` and the model's outputs (``info.metadata``) asked into one region of
    ``cfg.output_shared_memory_size`` bytes each; ``info.shm`` holds the pool (released by ``info.close()``, or
    here when a region is refused).

    Raises:
        UsageError: a region the server refused (one line naming the fix).
    """
    info.shm = pool
    try:
        outputs = pool.outputs(output_names(info), cfg.output_shared_memory_size)
        return [build(arrays, pool.inputs(arrays), outputs) for arrays in arrays_list]
    except BaseException:
        pool.close()
        raise


def http_payloads(info: Any, cfg: Any, arrays_list: list[dict[str, np.ndarray]], headers: list[tuple[str, str]],
                  request: Callable[[bytes], bytes]) -> list[bytes]:
    """Whole HTTP requests (``request(body)``, a JSON body naming the regions) through regions registered at
    ``info.url`` (:func:`shm_payloads`)."""
    return shm_payloads(info, cfg, http_pool(info.url, headers), arrays_list,
                        lambda a, i, o: request(shm_request_body(a, info.dtypes, i, o)))


__all__ = ["http_payloads", "output_names", "shm_payloads", "shm_request_body", "DEFAULT_OUTPUT_BYTES", "ShmPool", "grpc_pool", "http_pool", "refused"]
