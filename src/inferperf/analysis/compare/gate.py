"""The gate from flags and a YAML gate file: thresholds per metric, metrics, strictness, correction.

A gate file uses the flags' names (dashes or underscores) and the same percent strings::

    # .inferperf-gate.yaml
    max-throughput-drop: 5%
    max-p99-increase: 10%
    max-cold-start-increase: 25%
    metrics: [throughput, p50, p99]
    strict: false
    correction: holm        # or bh

Flags given on the command line override the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...config import load_mapping
from ...errors import UsageError
from .core import DEFAULT_METRICS, METRICS, Gate

_BY_FLAG = {m.flag: m.name for m in METRICS.values()}
_KEYS = {*_BY_FLAG, "metrics", "strict", "correction"}


def parse_percent(value: Any, what: str) -> float:
    """``"5%"``, ``"5"`` or ``5`` -> 0.05 (a number is read as percent).

    Raises:
        UsageError: not a number, or outside [0, 100).
    """
    text = str(value).strip().removesuffix("%").strip()
    try:
        pct = float(text)
    except ValueError:
        raise UsageError(f"{what}: {value!r} is not a percentage: give e.g. 5%") from None
    if not 0.0 <= pct < 100.0:
        raise UsageError(f"{what}: {value!r} is outside 0-100 %: give e.g. 5%")
    return pct / 100.0


def parse_metrics(value: Any, what: str = "--metrics") -> tuple[str, ...]:
    """``"throughput,p99"`` or a list -> metric names, checked.

    Raises:
        UsageError: an unknown name or none at all.
    """
    names = [x.strip() for x in (value.split(",") if isinstance(value, str) else value) if str(x).strip()]
    bad = [n for n in names if n not in METRICS]
    if bad or not names:
        raise UsageError(f"{what}: unknown metric(s) {bad or names}: use a comma list of {', '.join(METRICS)}")
    return tuple(names)


def gate_from_file(path: Path) -> dict[str, Any]:
    """The settings of a YAML gate file as :class:`Gate` keywords.

    Raises:
        UsageError: missing or unreadable file, not a mapping, an unknown key or a bad value.
    """
    doc = load_mapping(path, f"--gate file '{path}'", "a mapping like 'max-p99-increase: 10%'", empty_ok=True)
    out: dict[str, Any] = {"thresholds": {}}
    for raw, v in doc.items():
        key = str(raw).replace("_", "-")
        if key not in _KEYS:
            raise UsageError(f"gate file '{path}': unknown key {raw!r}: use {', '.join(sorted(_KEYS))}")
        if key in _BY_FLAG:
            out["thresholds"][_BY_FLAG[key]] = parse_percent(v, f"gate file '{path}' {key}")
        elif key == "metrics":
            out["metrics"] = parse_metrics(v, f"gate file '{path}' metrics")
        elif key == "strict":
            if not isinstance(v, bool):
                raise UsageError(f"gate file '{path}': strict must be true or false")
            out["strict"] = v
        else:
            out["correction"] = str(v)
    return out


def build_gate(path: Path | None = None, thresholds: dict[str, Any] | None = None, metrics: str | None = None,
               strict: bool | None = None, correction: str | None = None) -> Gate:
    """A :class:`Gate` from a gate file (optional) overridden by flags (``None`` = not given).

    ``thresholds`` maps a flag name (``max-p99-increase``) to its percent string.

    Raises:
        UsageError: from the file or a flag value.
    """
    kw: dict[str, Any] = gate_from_file(path) if path else {"thresholds": {}}
    for flag, v in (thresholds or {}).items():
        if v is not None:
            kw["thresholds"][_BY_FLAG[flag]] = parse_percent(v, f"--{flag}")
    if metrics is not None:
        kw["metrics"] = parse_metrics(metrics)
    asked = [m for m in METRICS if m not in DEFAULT_METRICS and m in kw["thresholds"]]
    if asked:  # a token-stream threshold given: that metric is compared too
        kw["metrics"] = tuple(dict.fromkeys([*kw.get("metrics", DEFAULT_METRICS), *asked]))
    if strict is not None:
        kw["strict"] = strict
    if correction is not None:
        kw["correction"] = correction
    gate = Gate(**kw)
    gate.check()
    return gate
