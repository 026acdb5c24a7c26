"""Axis flags (comma lists) turned into axis values, declared once for the commands that search over them
(sweep, tune): :data:`AXIS_OF` maps a command's parameter to its parser, :func:`axes_of` applies it.

A parser takes the flag's text and the flag's name (for the one-line refusal) and returns the axis's values,
or None for "not given". Each refusal is a :class:`~inferperf.errors.UsageError` naming the flag and the fix.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from ..workload.shapes import parse_shape


def ints(text: str | None, flag: str) -> list[int] | None:
    """``1,2,4`` -> [1, 2, 4] (None when not given).

    Raises:
        UsageError: a value that is not an integer, none given, or one below 0.
    """
    if text is None:
        return None
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"malformed {flag} {text!r}: use comma-separated integers, e.g. 1,2,4") from None
    if not vals or min(vals) < 0:
        raise UsageError(f"{flag} {text!r}: give one or more integers >= 0")
    return vals


def words(text: str | None, flag: str = "") -> list[str] | None:
    """``a, b,`` -> ["a", "b"] (None when not given or empty); ``flag`` is unused (a parser's signature)."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def bools(text: str | None, flag: str) -> list[bool] | None:
    """``true,false`` (or 1/0, on/off) -> [True, False] (None when not given).

    Raises:
        UsageError: a value that is not one of those.
    """
    if text is None:
        return None
    table = {"true": True, "1": True, "on": True, "false": False, "0": False, "off": False}
    try:
        return [table[w.lower()] for w in words(text) or []]
    except KeyError:
        raise UsageError(f"{flag} {text!r}: give true/false values, e.g. {flag} true,false") from None


def session_config_axis(values: list[str] | None, flag: str = "--session-config") -> dict[str, list[str]]:
    """``--session-config KEY=V1|V2`` (repeatable) -> {KEY: [V1, V2]} ({} when not given).

    Raises:
        UsageError: an entry without ``=``, with an empty key or no value.
    """
    out: dict[str, list[str]] = {}
    for v in values or []:
        key, sep, rest = v.partition("=")
        if not sep or not key.strip() or not rest:
            raise UsageError(f"malformed --session-config {v!r}: use KEY=V1|V2, e.g. session.intra_op.allow_spinning=0|1")
        out[key.strip()] = [x for x in rest.split("|") if x != ""]
    return out


def shape_axis(flags: list[str]) -> list[dict[str, list[int]]]:
    """``--shape x:1x3x224x224,1x3x640x640`` (one flag per input; commas give that input's values) ->
    the cartesian product of shape sets. A value without a name belongs to the flag's input.

    Raises:
        UsageError: a malformed shape (:func:`~inferperf.workload.shapes.parse_shape`).
    """
    per_input: list[list[tuple[str, list[int]]]] = []
    for flag in flags:
        name = ""
        values = []
        for item in flag.split(","):
            n, dims = parse_shape(item)
            name = n or name
            values.append((name, dims))
        per_input.append(values)
    return [dict(combo) for combo in itertools.product(*per_input)]


def dim_axis(flags: list[str]) -> list[dict[str, int]]:
    """``--dim seq=64,128,256`` -> [{seq: 64}, {seq: 128}, {seq: 256}]; several flags multiply.

    Raises:
        UsageError: a malformed flag, a size below 1, a symbol given twice.
    """
    per: list[list[tuple[str, int]]] = []
    for flag in flags:
        name, sep, rest = flag.partition("=")
        if not sep or not name.strip() or not rest.strip():
            raise UsageError(f"malformed --dim {flag!r}: use SYMBOL=N[,N...], e.g. seq=64,128")
        vals = ints(rest, "--dim")
        if not vals or min(vals) < 1:
            raise UsageError(f"--dim {flag!r}: sizes must be >= 1")
        if any(name.strip() == p[0][0] for p in per):
            raise UsageError(f"--dim {name.strip()} given twice: list its values in one flag ({name.strip()}=A,B)")
        per.append([(name.strip(), v) for v in vals])
    return [dict(c) for c in itertools.product(*per)]


def env_axis(flags: list[str] | None, flag: str = "--env") -> list[dict[str, str]] | None:
    """``--env OMP_WAIT_POLICY=PASSIVE,ACTIVE`` -> one env per value; several flags multiply (None when not given).

    Raises:
        UsageError: a malformed flag (no ``=``, a space in the name), a name given twice.
    """
    if not flags:
        return None
    per = []
    for text in flags:
        name, sep, rest = text.partition("=")
        if not sep or not name.strip() or " " in name.strip() or not rest:
            raise UsageError(f"malformed --env {text!r}: use NAME=VALUE[,VALUE...] (no spaces in NAME)")
        if any(name.strip() == p[0][0] for p in per):
            raise UsageError(f"--env {name.strip()} given twice: list its values in one flag ({name.strip()}=A,B)")
        per.append([(name.strip(), v) for v in rest.split(",")])
    return [dict(c) for c in itertools.product(*per)]


#: a command's axis parameter (its flag, ``_`` for ``-``) -> the parser of its comma list: declared once for
#: sweep and tune, which pass their parameters to :func:`axes_of` instead of parsing each flag by hand.
AXIS_OF: dict[str, Callable[[Any, str], Any]] = {
    "backend": words,
    "intra_op_num_threads": ints,
    "inter_op_num_threads": ints,
    "execution_mode": words,
    "graph_optimization_level": words,
    "enable_mem_pattern": bools,
    "enable_cpu_mem_arena": bools,
    "session_config": session_config_axis,
    "batch_size": ints,
    "concurrency": ints,
    "session_mode": words,
    "env": env_axis,
    "allocator": words,
    "max_batch_size": ints,
    "max_queue_delay_us": ints,
    "instance_count": ints,
}


def axes_of(params: dict[str, Any]) -> dict[str, Any]:
    """The axes a command's parameters give: ``params`` is the command's ``locals()`` (or any name -> flag text
    mapping); names outside :data:`AXIS_OF` are skipped, and so is an axis its parser reads as not given (None).

    >>> axes_of({"intra_op_num_threads": "1,2", "backend": None, "output": "x"})
    {'intra_op_num_threads': [1, 2]}

    Raises:
        UsageError: a malformed list, naming its flag (``--intra-op-num-threads``).
    """
    axes = {}
    for name, text in params.items():
        if name in AXIS_OF and text is not None:
            values = AXIS_OF[name](text, "--" + name.replace("_", "-"))
            if values is not None:
                axes[name] = values
    return axes


__all__ = ["AXIS_OF", "axes_of", "bools", "dim_axis", "env_axis", "ints", "session_config_axis", "shape_axis", "words"]
