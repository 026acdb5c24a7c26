"""Why two sides may not be comparable: machine, CPUs, runtime versions, shapes, percentile method.

A compare across machines or runtime versions still runs (that can be the point of it), but
the output says loudly what differs, so a "regression" that is really a different CPU is not
taken at face value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...results.model import Result
from .data import Case, config_differences

#: Configuration fields :func:`_pairs_of` already names (dotted prefixes of :func:`config_differences`).
NAMED_APART = ("workload.shapes", "workload.batch_size", "backend", "scenario", "concurrency", "placement.cpus")
#: Backend -> the package whose version is its runtime version.
RUNTIME_PACKAGES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "torch": "torch"}


def _machine(r: Result) -> tuple[Any, ...]:
    s = r.system
    return (s.cpu_model, s.logical_cores, s.memory_bytes, s.os)


def _pairs_of(b: Result, c: Result) -> list[tuple[str, Any, Any]]:
    """(what, baseline value, current value) for each thing that must agree."""
    out: list[tuple[str, Any, Any]] = [
        ("CPU model", b.system.cpu_model, c.system.cpu_model),
        ("effective CPUs", b.system.effective_cpus, c.system.effective_cpus),
        ("machine (CPU, cores, memory, OS)", _machine(b), _machine(c)),
        ("input shapes", b.config.workload.shapes, c.config.workload.shapes),
        ("batch size", b.config.workload.batch_size, c.config.workload.batch_size),
        ("percentile method", b.metrics.latency_ms.percentile_method, c.metrics.latency_ms.percentile_method),
        ("backend", b.config.backend, c.config.backend),
        ("scenario", b.config.scenario, c.config.scenario),
        ("concurrency", b.config.concurrency, c.config.concurrency),
        ("CPU pinning", b.config.placement.cpus, c.config.placement.cpus),
    ]
    for backend in {b.config.backend, c.config.backend}:
        pkg = RUNTIME_PACKAGES.get(backend)
        if pkg:
            out.append((f"{pkg} version", b.system.packages.get(pkg), c.system.packages.get(pkg)))
    return out


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        return ", ".join(str(x) for x in v)
    return str(v)


def not_comparable(pairs: Sequence[tuple[Case, Case]]) -> list[str]:
    """One line per difference that makes baseline and current not comparable, with how many cases show it.

    Also flags runs within one side that disagree (mixed machines or runtime versions on a side)
    and sides with INVALID Results.
    """
    found: dict[str, int] = {}
    for base, cur in pairs:
        for what, bv, cv in _pairs_of(base.first, cur.first):
            if bv != cv:
                line = f"{what} differs: baseline {_show(bv)} vs current {_show(cv)}"
                found[line] = found.get(line, 0) + 1
        other = [(k, bv, cv) for k, bv, cv in config_differences(base.first, cur.first)
                 if not k.startswith(NAMED_APART)]
        if other:  # e.g. the one configuration of each side paired although its threads differ
            line = "configuration differs: " + "; ".join(f"{k} baseline {_show(bv)} vs current {_show(cv)}"
                                                         for k, bv, cv in other)
            found[line] = found.get(line, 0) + 1
        for side, case in (("baseline", base), ("current", cur)):
            if len({_machine(r) for r in case.results}) > 1:
                line = f"{side} mixes runs from different machines"
                found[line] = found.get(line, 0) + 1
            bad = [r for r in case.results if not r.validity.valid]
            if bad:
                line = f"{side} holds INVALID Results ({bad[0].validity.reasons[0] if bad[0].validity.reasons else '?'})"
                found[line] = found.get(line, 0) + 1
    n = len(pairs)
    return [line if n == 1 else f"{line} ({k} of {n} cases)" for line, k in found.items()]
