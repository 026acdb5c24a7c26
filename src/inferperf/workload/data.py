"""Build the pool of concrete inputs a measurement cycles through.

Inputs are made before any timed window: a pool of ``input_pool_size`` distinct
feeds from one seeded generator (numpy PCG64 via ``default_rng(seed)``), or the
user's data from ``--input-data`` (``.npz`` keyed by input name, or ``.npy`` for a
one-input model), with dtype and shape checked. A pool larger than a fraction of
RAM is refused unless forced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..results.model import TensorInfo
from .shapes import leading_batch, resolve_shapes

#: Default inclusive ranges for integer inputs with no Gather table and no --int-range.
_DEFAULT_INT_RANGE: dict[str, tuple[int, int]] = {
    "uint8": (0, 255),
    "int8": (-128, 127),
}
_SMALL_INT_RANGE = (0, 9)


@dataclass
class Workload:
    """Concrete inputs for a case.

    Attributes:
        shapes: input name -> resolved shape (positive ints).
        dtypes: input name -> numpy dtype name.
        feeds: the pool, each a dict input name -> array of that shape and dtype.
        batch_size: rows per query (leading symbolic dim, else 1).
        data_source: ``synthetic`` or ``file:PATH``.
        int_ranges: the inclusive ranges used for integer inputs.
        bytes_per_feed: bytes of one feed (all inputs).
    """

    shapes: dict[str, list[int]]
    dtypes: dict[str, str]
    feeds: list[dict[str, np.ndarray]]
    batch_size: int
    data_source: str = "synthetic"
    int_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    bytes_per_feed: int = 0


def _int_range(spec: TensorInfo, user: Mapping[str, tuple[int, int]], index: Mapping[str, tuple[int, int]]):
    if spec.name in user:
        return user[spec.name]
    if spec.name in index:
        return index[spec.name]
    lname = spec.name.lower()
    if "mask" in lname:
        return (1, 1)  # a full attention mask, the common serving case
    if "token_type" in lname or "segment" in lname:
        return (0, 0)
    return _DEFAULT_INT_RANGE.get(spec.dtype, _SMALL_INT_RANGE)


def _generate(rng: np.random.Generator, dtype: str, shape: list[int], rng_range: tuple[int, int]) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape, dtype=np.float32).astype(dt, copy=False)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(rng_range[0], info.min), min(rng_range[1], info.max)
        return rng.integers(lo, hi, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "b":
        return rng.integers(0, 1, size=shape, endpoint=True).astype(bool)
    raise UsageError(f"cannot generate data of dtype {dtype}: pass --input-data FILE.npz")


def _load_user_data(path: Path, inputs: Sequence[TensorInfo]) -> dict[str, np.ndarray]:
    if not path.exists():
        raise UsageError(f"--input-data file '{path}' not found: check the path")
    try:
        if path.suffix == ".npy":
            if len(inputs) != 1:
                raise UsageError(
                    f"--input-data {path.name} is one array but the model has inputs {[i.name for i in inputs]}:"
                    " pass an .npz keyed by input name"
                )
            return {inputs[0].name: np.load(path, allow_pickle=False)}
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError) as e:
        raise UsageError(
            f"--input-data '{path}' is not a readable numpy file ({type(e).__name__}: {e}): save it with numpy.savez"
        ) from e
    raise UsageError(f"--input-data '{path}' must be .npz (keyed by input name) or .npy (one-input model)")


_STRING_DTYPES = ("str", "string", "object")


def _check_flags(inputs: Sequence[TensorInfo], kinds: Mapping[str, str], values: Mapping[str, float],
                 int_ranges: Mapping[str, tuple[int, int]]) -> None:
    """Refuse ``--value``/``--int-range`` entries that name no input, suit no dtype, or clash (UsageError)."""
    names = [i.name for i in inputs]
    for flag, mapping in (("--value", values), ("--int-range", int_ranges)):
        stray = [n for n in mapping if n not in names]
        if stray:
            raise UsageError(f"{flag} names unknown input(s) {stray}: the model's inputs are {names}")
    for name in int_ranges:
        if kinds[name] not in "iu":
            raise UsageError(f"--int-range {name}: input '{name}' is not an integer input; use --value or --input-data")
        if name in values:
            raise UsageError(f"input '{name}' has both --value and --int-range: give one")
    for name, v in values.items():
        if not np.isfinite(v):
            raise UsageError(f"--value {name}={v}: give a finite number")
        if kinds[name] in "iub":
            info = np.iinfo(np.dtype(next(i.dtype for i in inputs if i.name == name))) if kinds[name] in "iu" else None
            if v != int(v) or (info is not None and not info.min <= v <= info.max):
                raise UsageError(f"--value {name}={v:g}: input '{name}' is an integer input; give an integer in its range")


def _read_user_data(input_data: Path | None, inputs: Sequence[TensorInfo]) -> dict[str, np.ndarray]:
    """``--input-data`` as input name -> array (empty without it); refuses empty files and stray names."""
    if not input_data:
        return {}
    user = _load_user_data(Path(input_data), inputs)
    if not user:
        raise UsageError(f"--input-data '{input_data}' holds no arrays: save one per input name with numpy.savez")
    names = [i.name for i in inputs]
    stray = [n for n in user if n not in names]
    if stray:
        raise UsageError(f"--input-data has array(s) {stray} that are not model inputs {names}: rename them")
    return user


def _check_pool_memory(inputs: Sequence[TensorInfo], resolved: Mapping[str, list[int]], user: Mapping[str, Any],
                       values: Mapping[str, float], pool_size: int, memory_bytes: int | None,
                       max_fraction_of_ram: float, force: bool) -> int:
    """Bytes of one feed; refuses string inputs without data and a pool over the RAM guard (UsageError)."""
    bytes_per_feed = 0
    for spec in inputs:
        if spec.dtype in _STRING_DTYPES and spec.name not in user:
            raise UsageError(
                f"input '{spec.name}' is a string tensor: synthetic strings are not generated; pass --input-data FILE.npz"
            )
        if spec.dtype not in _STRING_DTYPES:
            bytes_per_feed += int(np.prod(resolved[spec.name])) * np.dtype(spec.dtype).itemsize
    n_synthetic = pool_size if any(i.name not in user and i.name not in values for i in inputs) else 1
    total = bytes_per_feed * n_synthetic
    if memory_bytes and not force and total > max_fraction_of_ram * memory_bytes:
        raise UsageError(
            f"input pool of {n_synthetic} x {bytes_per_feed / 2**20:.1f} MiB = {total / 2**30:.2f} GiB is over"
            f" {max_fraction_of_ram:.0%} of RAM ({memory_bytes / 2**30:.1f} GiB): lower --input-pool-size or"
            " the shape, or pass --force"
        )
    return bytes_per_feed


def _user_stacks(inputs: Sequence[TensorInfo], user: Mapping[str, np.ndarray],
                 resolved: Mapping[str, list[int]]) -> dict[str, list[np.ndarray]]:
    """User data as a list of feeds per input (one feed, or a stack along a leading axis); checks dtype and shape."""
    stacks: dict[str, list[np.ndarray]] = {}
    for spec in inputs:
        if spec.name not in user:
            continue
        arr = user[spec.name]
        want = tuple(resolved[spec.name])
        if arr.dtype != np.dtype(spec.dtype) and not (spec.dtype in ("str", "string") and arr.dtype.kind in "US"):
            raise UsageError(
                f"--input-data '{spec.name}' is {arr.dtype} but the input is {spec.dtype}:"
                f" convert it (array.astype('{spec.dtype}')) before saving"
            )
        if arr.shape == want:
            stacks[spec.name] = [arr]
        elif arr.ndim == len(want) + 1 and arr.shape[1:] == want:
            if arr.shape[0] == 0:
                raise UsageError(f"--input-data '{spec.name}' is a stack of 0 feeds: give at least one")
            stacks[spec.name] = list(arr)
        else:
            raise UsageError(
                f"--input-data '{spec.name}' has shape {list(arr.shape)} but the input resolves to {list(want)}"
                f" (or N x {list(want)} for a stack of N feeds): fix the data or the --shape"
            )
    return stacks


def _build_feeds(inputs: Sequence[TensorInfo], resolved: Mapping[str, list[int]],
                 stacks: Mapping[str, list[np.ndarray]], values: Mapping[str, float],
                 ranges: Mapping[str, tuple[int, int]], pool_size: int, seed: int) -> list[dict[str, np.ndarray]]:
    """The pool: user feeds cycled, constants filled, the rest drawn from ``default_rng(seed)`` in input order."""
    rng = np.random.default_rng(seed)
    generated = [i for i in inputs if i.name not in stacks and i.name not in values]
    n_feeds = max([pool_size if generated else 1] + [len(s) for s in stacks.values()])
    feeds: list[dict[str, np.ndarray]] = []
    try:
        for k in range(n_feeds):
            feed = {}
            for spec in inputs:
                if spec.name in stacks:
                    feed[spec.name] = stacks[spec.name][k % len(stacks[spec.name])]
                elif values and spec.name in values:
                    feed[spec.name] = np.full(resolved[spec.name], values[spec.name], dtype=spec.dtype)
                else:
                    feed[spec.name] = _generate(rng, spec.dtype, resolved[spec.name], ranges.get(spec.name, (0, 0)))
            feeds.append(feed)
    except (MemoryError, ValueError) as e:
        raise UsageError(
            f"cannot build inputs of shapes {dict(resolved)} ({type(e).__name__}: {e}):"
            " lower the shape or --input-pool-size"
        ) from None
    return feeds


def build_workload(
    inputs: Sequence[TensorInfo],
    *,
    shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    batch_size: int | None = None,
    pool_size: int = 16,
    seed: int = 0,
    int_ranges: Mapping[str, tuple[int, int]] | None = None,
    values: Mapping[str, float] | None = None,
    index_ranges: Mapping[str, tuple[int, int]] | None = None,
    input_data: Path | None = None,
    memory_bytes: int | None = None,
    max_fraction_of_ram: float = 0.25,
    force: bool = False,
) -> Workload:
    """Resolve shapes and build the input pool.

    User data (``input_data``) may hold one feed per input (the resolved shape)
    or a stack of feeds (one extra leading axis); its feeds are cycled as the pool.

    Args:
        inputs: the session's inputs (name, numpy dtype name, declared shape).
        shapes, dims, batch_size: see :func:`~inferperf.workload.shapes.resolve_shapes`; a leading
            symbolic dim with no other source defaults to batch 1 (as perf_analyzer's ``-b``).
        pool_size: distinct synthetic feeds to build.
        seed: seed of the generator; the same seed gives the same pool.
        int_ranges: inclusive ``(lo, hi)`` per integer input, overriding defaults.
        values: input name -> a constant filling that input.
        index_ranges: valid id ranges found in the graph (Gather tables).
        input_data: ``.npz``/``.npy`` user data.
        memory_bytes: RAM size for the memory guard (None skips the guard).
        max_fraction_of_ram: refuse a pool above this fraction of RAM unless ``force``.
        force: skip the memory guard.

    Raises:
        UsageError: unresolved dims, unknown names in ``values``/``int_ranges``, string
            inputs without data, user data of the wrong dtype or shape, a pool over the guard.
    """
    values = values or {}
    kinds = {i.name: (np.dtype(i.dtype).kind if i.dtype not in _STRING_DTYPES else "U") for i in inputs}
    _check_flags(inputs, kinds, values, int_ranges or {})
    user = _read_user_data(input_data, inputs)
    data_shapes = {}
    for spec in inputs:
        if spec.name in user:
            arr = user[spec.name]
            data_shapes[spec.name] = arr.shape[1:] if arr.ndim == len(spec.shape) + 1 else arr.shape
    resolved = resolve_shapes(inputs, shapes, dims, batch_size, data_shapes)
    for name, shape in resolved.items():
        if any(d < 1 for d in shape):
            raise UsageError(f"input '{name}' resolves to shape {shape} with an empty dim: every dim must be >= 1")
    bytes_per_feed = _check_pool_memory(inputs, resolved, user, values, pool_size, memory_bytes,
                                        max_fraction_of_ram, force)
    ranges = {}
    for spec in inputs:
        generated = spec.name not in user and spec.name not in values
        if generated and kinds[spec.name] in "iu":
            ranges[spec.name] = _int_range(spec, int_ranges or {}, index_ranges or {})
    stacks = _user_stacks(inputs, user, resolved)
    feeds = _build_feeds(inputs, resolved, stacks, values, ranges, pool_size, seed)
    if user:
        from .signature import file_sha256

        source = f"file:{Path(input_data).resolve()}#sha256={file_sha256(Path(input_data))[:16]}"
    else:
        source = "synthetic"
    return Workload(
        shapes=resolved,
        dtypes={i.name: i.dtype for i in inputs},
        feeds=feeds,
        batch_size=leading_batch(inputs, resolved),
        data_source=source,
        int_ranges=ranges,
        bytes_per_feed=bytes_per_feed,
    )
