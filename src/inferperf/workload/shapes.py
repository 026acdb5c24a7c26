"""Parse the shape flags and resolve every dim of every input to a positive int.

Sources of a dim, in order: the model's fixed dim; ``--shape NAME:AxBxC``;
``--dim SYMBOL=N`` (a symbolic name, everywhere it appears); ``--batch-size N``
(the leading symbolic or unnamed dim); the shape of ``--input-data``. A dim
still unresolved is a :class:`~inferperf.errors.UsageError` listing each input,
its unresolved axes and the flag that sets them; never a 0-size tensor.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import UsageError
from ..results.model import TensorInfo

_DIMS_RE = re.compile(r"^\d+(x\d+)*$")


def parse_shape(text: str) -> tuple[str, list[int]]:
    """Parse one ``--shape`` value: ``NAME:1x3x640x640`` or ``1x3x640x640`` (the model's only input).

    Returns:
        (input name or ``""``, dims as positive ints).

    Raises:
        UsageError: on a malformed value or a zero dim.
    """
    name, _, dims = text.strip().rpartition(":")
    dims = dims.strip().lower()
    if not _DIMS_RE.match(dims):
        raise UsageError(f"malformed --shape {text!r}: use NAME:1x3x224x224 (positive ints joined by 'x')")
    values = [int(d) for d in dims.split("x")]
    if any(v < 1 for v in values):
        raise UsageError(f"--shape {text!r} has a 0 dim: every dim must be >= 1")
    return name.strip(), values


def parse_dims(text: str) -> dict[str, int]:
    """Parse ``--dim batch=4,seq=128`` into ``{"batch": 4, "seq": 128}``.

    Raises:
        UsageError: on a malformed entry or a value under 1.
    """
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.rpartition("=")
        if not sep or not key.strip() or not value.strip().isdigit() or int(value) < 1:
            raise UsageError(f"malformed --dim {part!r}: use SYMBOL=N with N >= 1, e.g. --dim batch=4,seq=128")
        out[key.strip()] = int(value)
    return out


def parse_int_range(text: str) -> tuple[str, tuple[int, int]]:
    """Parse ``--int-range NAME=LO:HI`` (inclusive bounds) into ``(name, (lo, hi))``.

    Raises:
        UsageError: on a malformed value or ``lo > hi``.
    """
    name, sep, rng = text.rpartition("=")
    lo, colon, hi = rng.partition(":")
    try:
        if not sep or not colon or not name:
            raise ValueError
        lo_i, hi_i = int(lo), int(hi)
    except ValueError:
        raise UsageError(f"malformed --int-range {text!r}: use NAME=LO:HI, e.g. input_ids=0:30521") from None
    if lo_i > hi_i:
        raise UsageError(f"--int-range {text!r} has LO > HI: swap the bounds")
    return name, (lo_i, hi_i)


def parse_value(text: str) -> tuple[str, float]:
    """Parse ``--value NAME=V`` (a constant that fills the whole input) into ``(name, V)``.

    Raises:
        UsageError: on a malformed value.
    """
    name, sep, value = text.rpartition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name, float(value)
    except ValueError:
        raise UsageError(f"malformed --value {text!r}: use NAME=NUMBER, e.g. --value scale=1.0") from None


def _label(dim: int | str | None) -> str:
    return "?" if dim is None else str(dim)


def _named(dim: int | str | None) -> bool:
    """A symbolic dim with a real name ('?' and '' are unnamed: each occurrence is its own dim)."""
    return isinstance(dim, str) and dim not in ("", "?")


def is_symbolic(dim: int | str | None) -> bool:
    """True for a dim the model leaves open: a symbolic name, ``None`` or a non-positive int."""
    return not isinstance(dim, int) or dim < 1


def resolve_shapes(
    inputs: Sequence[TensorInfo],
    shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    batch_size: int | None = None,
    data_shapes: Mapping[str, Sequence[int]] | None = None,
    default_batch: int | None = 1,
) -> dict[str, list[int]]:
    """Resolve every dim of every model input.

    Args:
        inputs: the model's inputs as the session reports them (not ``graph.input``).
        shapes: full shapes by input name; key ``""`` means the only input.
        dims: symbolic dim name -> size.
        batch_size: size of a leading symbolic/unnamed dim (rows per query).
        data_shapes: shapes of user data by input name (fills what remains).
        default_batch: the leading symbolic dim when nothing else sets it (1, as
            perf_analyzer's ``-b``); None leaves it unresolved.

    Returns:
        input name -> list of positive ints.

    Raises:
        UsageError: unknown input name in ``shapes``, rank mismatch, a shape
            contradicting a fixed dim, or dims left unresolved (one line naming each).
    """
    shapes = _named_shapes(inputs, dict(shapes or {}))
    dims = _merged_dims(inputs, shapes, dict(dims or {}), batch_size)
    data_shapes = dict(data_shapes or {})
    resolved: dict[str, list[int]] = {}
    problems: list[str] = []
    for spec in inputs:
        if spec.name in shapes:
            resolved[spec.name] = check_given_shape(spec, list(shapes[spec.name]))
            continue
        out = _fill_dims(spec, dims, batch_size, data_shapes.get(spec.name), default_batch)
        if None in out:
            problems.append(_unresolved(spec, out))
        else:
            resolved[spec.name] = [int(v) for v in out]  # type: ignore[arg-type]
    if problems:
        raise UsageError("; ".join(problems))
    return resolved


def _named_shapes(inputs: Sequence[TensorInfo], shapes: dict[str, Sequence[int]]) -> dict[str, Sequence[int]]:
    """``--shape`` by input name (key ``""`` = the only input); refuses unknown names (UsageError)."""
    names = [i.name for i in inputs]
    if "" in shapes:
        if len(inputs) != 1:
            raise UsageError(
                f"--shape without an input name needs a model with one input; this one has {names}:"
                f" pass --shape NAME:AxBxC"
            )
        shapes[names[0]] = shapes.pop("")
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise UsageError(f"--shape names unknown input(s) {unknown}: the model's inputs are {names}")
    return shapes


def _merged_dims(inputs: Sequence[TensorInfo], shapes: Mapping[str, Sequence[int]], dims: dict[str, int],
                 batch_size: int | None) -> dict[str, int]:
    """``--dim`` values plus the symbols an explicit ``--shape`` fixes (shared by every input that has them).

    Raises:
        UsageError: an unknown symbol, or two sources giving one dim different values (``--shape``,
            ``--dim``, ``--batch-size``).
    """
    known_symbols = {d for i in inputs for d in i.shape if _named(d)}
    stray = [d for d in dims if d not in known_symbols]
    if stray:
        raise UsageError(
            f"--dim names unknown symbol(s) {stray}: the model's symbolic dims are {sorted(known_symbols) or 'none'}"
        )
    from_shapes: dict[str, tuple[int, str]] = {}
    for spec in inputs:
        if spec.name in shapes and len(shapes[spec.name]) == len(spec.shape):
            for axis, (d, v) in enumerate(zip(spec.shape, shapes[spec.name], strict=True)):
                if _named(d):
                    seen = from_shapes.get(d)  # type: ignore[arg-type]
                    if seen and seen[0] != v:
                        raise UsageError(
                            f"dim '{d}' is set to {seen[0]} ({seen[1]}) and {v} (--shape {spec.name} axis {axis}):"
                            " inputs that share a dim need the same value"
                        )
                    from_shapes[d] = (int(v), f"--shape {spec.name} axis {axis}")  # type: ignore[index]
    for sym, (v, where) in from_shapes.items():
        if sym in dims and dims[sym] != v:
            raise UsageError(f"dim '{sym}' is {v} by {where} but {dims[sym]} by --dim: give one value")
    if batch_size is not None:
        for spec in inputs:
            lead = spec.shape[0] if spec.shape else None
            if spec.shape and is_symbolic(lead):
                if spec.name in shapes and shapes[spec.name][0] != batch_size:
                    raise UsageError(
                        f"--batch-size {batch_size} contradicts --shape {spec.name}:"
                        f"{'x'.join(map(str, shapes[spec.name]))} (leading dim {shapes[spec.name][0]}): give one"
                    )
                if _named(lead) and lead in dims and dims[lead] != batch_size:  # type: ignore[operator]
                    raise UsageError(f"--batch-size {batch_size} contradicts --dim {lead}={dims[lead]}: give one")  # type: ignore[index]
    return {**{k: v for k, (v, _) in from_shapes.items()}, **dims}


def check_given_shape(spec: TensorInfo, given: list[int], flag: str = "--shape") -> list[int]:
    """An explicit shape checked against the declared rank and fixed dims of ``spec``; returns ``given``.

    A declared dim that :func:`is_symbolic` (a name, ``None``, or a non-positive int such as KServe's -1)
    takes any size. ``flag`` names where the shape came from in the message (``--shape``, ``--input-data F``).

    Raises:
        UsageError: another rank, or a fixed dim contradicted (one line naming the fix).
    """
    declared = list(spec.shape)
    text = f"{flag} {spec.name}:{'x'.join(map(str, given))}"
    if len(given) != len(declared):
        raise UsageError(
            f"{text} has rank {len(given)} but input"
            f" '{spec.name}' is [{', '.join(map(_label, declared))}] (rank {len(declared)})"
        )
    for axis, (want, got) in enumerate(zip(declared, given, strict=True)):
        if not is_symbolic(want) and want != got:
            raise UsageError(
                f"{text} contradicts fixed dim {axis} (= {want}) of"
                f" input '{spec.name}' [{', '.join(map(_label, declared))}]: keep {want} on axis {axis}"
            )
    return given


def _fill_dims(spec: TensorInfo, dims: Mapping[str, int], batch_size: int | None,
               data_shape: Sequence[int] | None, default_batch: int | None) -> list[int | None]:
    """Each axis from, in order: the fixed dim, ``--dim``, ``--batch-size`` (axis 0), the user data's shape,
    the default batch (axis 0); None where nothing sets it."""
    declared = list(spec.shape)
    out: list[int | None] = []
    for axis, d in enumerate(declared):
        if not is_symbolic(d):
            out.append(int(d))  # type: ignore[arg-type]
        elif _named(d) and d in dims:
            out.append(dims[d])  # type: ignore[index]
        elif axis == 0 and batch_size is not None:
            out.append(batch_size)
        elif data_shape is not None and len(data_shape) == len(declared):
            out.append(int(data_shape[axis]))
        elif axis == 0 and default_batch is not None:
            out.append(default_batch)
        else:
            out.append(None)
    return out


def _unresolved(spec: TensorInfo, out: Sequence[int | None]) -> str:
    """The one-line problem for an input with open dims, with the ``--shape``/``--dim`` that would fix it."""
    declared = list(spec.shape)
    missing = [axis for axis, v in enumerate(out) if v is None]
    open_dims = ", ".join(f"{_label(declared[a])!s} (axis {a})" for a in missing)
    example = "x".join(str(v) if v is not None else f"D{a}" for a, v in enumerate(out))
    named = sorted({declared[a] for a in missing if _named(declared[a])})  # type: ignore[type-var]
    hint = f" or --dim {','.join(f'{n}=N' for n in named)}" if named else ""
    return (f"input '{spec.name}' [{', '.join(map(_label, declared))}] has unresolved dims {open_dims}:"
            f" pass --shape {spec.name}:{example} with numbers for D*{hint}")


def leading_batch(inputs: Sequence[TensorInfo], resolved: Mapping[str, Sequence[int]]) -> int:
    """Rows per query: the resolved leading dim of the first input whose leading dim is symbolic, else 1."""
    for spec in inputs:
        if spec.shape and is_symbolic(spec.shape[0]):
            return int(resolved[spec.name][0])
    return 1
