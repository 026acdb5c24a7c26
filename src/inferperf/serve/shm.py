"""Triton's system shared-memory extension: regions of POSIX shared memory (``/dev/shm``) a client on the same
machine registers, then names in its requests instead of sending tensor bytes.

A region is ``(name, key, offset, byte_size)``: ``key`` names the segment (``/input_simple`` -> ``/dev/shm/
input_simple``), the region is ``byte_size`` bytes from ``offset`` into it. An input whose parameters hold
``shared_memory_region`` (with ``shared_memory_byte_size``, optionally ``shared_memory_offset`` into the region)
is read from the region as a numpy view (no copy); an output asked with those parameters is written into the
region and answered with its name, datatype and shape only (no data, no parameters: Triton's C++ client reads
``binary_data_size`` from any output parameters).

Safety:

- Opt-in (``serve --allow-client-shm``): without it every route answers a refusal naming the flag.
- A key names a segment under ``/dev/shm`` and nothing else: one leading ``/`` is allowed, any other ``/``, a
  ``..``, a NUL or an empty name is refused (400), so a client cannot map an arbitrary file.
- Bounds: a region past the segment's end, and a tensor's offset and size outside its region, are 400s naming the
  tensor; nothing reads or writes past a mapping.
- Lifetime: a region is unmapped on unregister and at shutdown; ``mmap.close()`` fails while a numpy view of it
  is alive (a request still queued or running), so the unmap waits (polling every 5 ms, up to 1 s, then in a
  background task) until the views are gone; the region leaves the registry at once. The server never unlinks a segment: it is the client's (Python's ``multiprocessing.shared_memory``
  before 3.13 unlinks at exit, so it is not used here).

Sources: triton-inference-server/server ``docs/protocol/extension_shared_memory.md`` (routes, bodies,
parameters); tritonclient's ``utils/shared_memory`` (the client side: ``shm_open`` + ``mmap``).
"""

from __future__ import annotations

import asyncio
import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .binary_tensors import binary_data, decode_bytes
from .tensor_types import NUMPY_DTYPE, ProtocolError

SHM_DIR = "/dev/shm"
#: what a request without --allow-client-shm is answered
REFUSAL = "system shared memory is not allowed on this server: start it with --allow-client-shm"


class ShmError(ProtocolError):
    """A refused shared-memory request (400 unless given): a bad key, a region that does not fit, an unknown
    region."""


@dataclass
class Region:
    """One registered region: the mapping of its segment's first ``offset + byte_size`` bytes."""

    name: str
    key: str
    offset: int
    byte_size: int
    mapping: mmap.mmap

    def status(self) -> dict[str, Any]:
        """Triton's status entry."""
        return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}


def segment_path(key: str) -> str:
    """``/dev/shm/NAME`` for a key ``NAME`` or ``/NAME``.

    Raises:
        ShmError: a key with another separator, ``..``, a NUL, or nothing after the slash.
    """
    name = key[1:] if key.startswith("/") else key
    if not name or "/" in name or "\\" in name or "\0" in name or name in (".", "..") or ".." in name:
        raise ShmError(f"shared memory key {key!r} must name one segment under {SHM_DIR} (e.g. '/input0'): no "
                       "path separators or '..'")
    return os.path.join(SHM_DIR, name)


class SharedMemory:
    """The registered regions of one server (``allowed``: ``--allow-client-shm``)."""

    def __init__(self, allowed: bool = False) -> None:
        self.allowed = allowed
        self.regions: dict[str, Region] = {}

    def _check_allowed(self) -> None:
        if not self.allowed:
            raise ShmError(REFUSAL, 403)

    def status(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every region's status (or ``name``'s).

        Raises:
            ShmError: not allowed (403), or no region ``name`` (404).
        """
        self._check_allowed()
        if name is None:
            return [r.status() for r in self.regions.values()]
        if name not in self.regions:
            raise ShmError(f"Unable to find system shared memory region: '{name}'", 404)
        return [self.regions[name].status()]

    def register(self, name: str, key: Any, offset: Any, byte_size: Any) -> None:
        """Map region ``name``: ``byte_size`` bytes from ``offset`` of segment ``key``.

        Raises:
            ShmError: not allowed (403); a name already registered, a bad key, offset or size, a segment that
                does not exist or is shorter than ``offset + byte_size`` (400).
        """
        self._check_allowed()
        if name in self.regions:
            raise ShmError(f"shared memory region '{name}' already in manager: unregister it first")
        if not isinstance(key, str):
            raise ShmError("register needs 'key' (the segment's name, e.g. '/input0'), 'offset' and 'byte_size'")
        if type(offset) is not int or offset < 0 or type(byte_size) is not int or byte_size <= 0:
            raise ShmError(f"region '{name}': offset ({offset!r}) must be an integer >= 0 and byte_size "
                           f"({byte_size!r}) an integer > 0")
        path = segment_path(key)
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as e:
            raise ShmError(f"unable to open shared memory region '{name}' (key {key!r}): {e.strerror}") from None
        try:
            size = os.fstat(fd).st_size
            if offset + byte_size > size:
                raise ShmError(f"region '{name}': offset {offset} + byte_size {byte_size} is past the end of "
                               f"segment {key!r} ({size} bytes)")
            mapping = mmap.mmap(fd, offset + byte_size)
        finally:
            os.close(fd)
        self.regions[name] = Region(name, key, offset, byte_size, mapping)

    async def unregister(self, name: str | None = None) -> None:
        """Unregister ``name`` (None: every region) and unmap it once no request holds a view of it.

        Raises:
            ShmError: not allowed (403). (An unknown name is not an error, as in Triton.)
        """
        self._check_allowed()
        names = list(self.regions) if name is None else [name] if name in self.regions else []
        for n in names:
            await _unmap(self.regions.pop(n).mapping)

    async def close(self) -> None:
        """Unmap every region (the server's shutdown, after the models drained)."""
        for region in list(self.regions.values()):
            await _unmap(region.mapping)
        self.regions.clear()

    def _span(self, region: str, offset: Any, size: Any, tensor: str) -> tuple[Region, int, int]:
        self._check_allowed()
        r = self.regions.get(region) if isinstance(region, str) else None
        if r is None:
            raise ShmError(f"{tensor}: shared memory region {region!r} is not registered")
        if type(offset) is not int or offset < 0 or type(size) is not int or size < 0 or offset + size > r.byte_size:
            raise ShmError(f"{tensor}: shared_memory_offset {offset!r} + shared_memory_byte_size {size!r} lies "
                           f"outside region '{r.name}' ({r.byte_size} bytes)")
        return r, r.offset + offset, size

    def read(self, tensor: str, params: dict[str, Any], datatype: str, shape: tuple[int, ...]) -> np.ndarray:
        """Input ``tensor`` from the region its ``params`` name, as a read-only view of ``shape`` (BYTES: its
        elements copied out, Triton's layout).

        Raises:
            ShmError: not allowed, an unknown region, a span outside it, a size other than the tensor's.
            ProtocolError: BYTES elements that do not fill the span exactly (``decode_bytes``'s words).
        """
        what = f"input '{tensor}'"
        r, start, size = self._span(params.get("shared_memory_region"), params.get("shared_memory_offset", 0),
                                    params.get("shared_memory_byte_size"), what)
        dtype = NUMPY_DTYPE.get(datatype)
        if dtype is None:
            raise ShmError(f"{what}: {datatype} is not read from shared memory here: send it in the body")
        if dtype.kind == "O":  # BYTES: Triton's layout (4-byte little-endian length, then the bytes), copied out
            return decode_bytes(tensor, r.mapping, start, size, int(np.prod(shape))).reshape(shape)
        need = int(np.prod(shape)) * dtype.itemsize
        if size != need:
            raise ShmError(f"{what}: shared_memory_byte_size {size} but shape {list(shape)} of {datatype} needs "
                           f"{need} bytes")
        arr = np.frombuffer(r.mapping, dtype=dtype, count=need // dtype.itemsize, offset=start).reshape(shape)
        arr.flags.writeable = False
        return arr

    def write(self, tensor: str, params: dict[str, Any], arr: np.ndarray) -> int:
        """Write output ``tensor`` into the region its ``params`` name; returns the bytes written.

        Raises:
            ShmError: as :meth:`read`, or a region span smaller than the output.
        """
        what = f"output '{tensor}'"
        r, start, size = self._span(params.get("shared_memory_region"), params.get("shared_memory_offset", 0),
                                    params.get("shared_memory_byte_size"), what)
        data = binary_data(arr)  # BYTES in Triton's layout, other types their raw buffer
        n = len(data) if isinstance(data, bytes) else data.nbytes
        if n > size:
            raise ShmError(f"{what}: {n} bytes do not fit shared_memory_byte_size {size}")
        r.mapping[start:start + n] = data
        return n


def serving(shm: SharedMemory | None) -> SharedMemory:
    """``shm`` itself, for a request that names a region.

    Raises:
        ShmError: 403 naming ``--allow-client-shm`` when ``shm`` is None (the server does not serve it).
    """
    if shm is None:
        raise ShmError(REFUSAL, 403)
    return shm


_LATER: set[asyncio.Task[None]] = set()  # unmaps still waiting for a view to go (kept from the GC)


async def _unmap(mapping: mmap.mmap, wait_s: float = 1.0, poll_s: float = 0.005) -> None:
    """Close ``mapping`` once no buffer (numpy view) of it is alive: wait up to ``wait_s`` (a request that still
    runs ends by then), collect garbage once (a view held only by a reference cycle), and if a view still lives,
    leave the unmap to a task that retries every 50 ms, so the caller (an unregister) is answered."""
    loop = asyncio.get_running_loop()
    end = loop.time() + wait_s
    while True:
        try:
            mapping.close()
            return
        except BufferError:  # "cannot close exported pointers exist": a request still holds a view
            if loop.time() >= end:
                break
            await asyncio.sleep(poll_s)
    import gc

    gc.collect()
    try:
        mapping.close()
    except BufferError:
        task = loop.create_task(_unmap(mapping, wait_s=float("inf"), poll_s=0.05))
        _LATER.add(task)
        task.add_done_callback(_LATER.discard)


__all__ = ["REFUSAL", "Region", "SharedMemory", "ShmError", "segment_path", "serving"]
