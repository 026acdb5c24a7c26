"""The payload pool's arrays (issue 13 item 1): from the model's metadata and the run's flags, before any request
is timed: seeded values of each ``--shape`` in proportion to ``--shape-weights`` (largest remainder, a seeded
shuffled order), or ``--input-data FILE.npz`` (one array per input name, the leading axis indexes samples); a
model whose metadata lists no inputs takes them from the flags (:func:`declared_inputs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..results.model import TensorInfo
from ..workload.shapes import check_given_shape
from .options import LoadConfig

_NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
          "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
          "FP32": np.float32, "FP64": np.float64}  # fmt: skip


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


def payload_arrays(info: Any, cfg: LoadConfig) -> list[dict[str, np.ndarray]]:
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


__all__ = ["check_rows", "declared_inputs", "parse_shape", "payload_arrays"]
