"""Placement: pin the measuring process to CPUs, or to a NUMA node's CPUs (and memory via numactl).

``--cpus 0-1`` pins with :func:`os.sched_setaffinity`. ``--numa-node N`` binds
CPUs and memory by running the worker under ``numactl --cpunodebind=N
--membind=N`` when numactl is installed; otherwise it pins to the node's CPUs
only and says so in a note.
"""

from __future__ import annotations

import os
import shutil

from ..errors import UsageError
from ..system import collect_system, parse_cpulist


def parse_cpus(text: str) -> list[int]:
    """Parse ``--cpus`` (``0-3,8``) into sorted CPU ids.

    Raises:
        UsageError: a malformed list.
    """
    for item in text.split(","):
        lo, _, hi = item.partition("-")
        if (lo.strip().isdigit() and int(lo) > 65535) or (hi.strip().isdigit() and int(hi) > 65535):
            raise UsageError(f"--cpus {text!r}: CPU ids above 65535 do not exist; use ids from `nproc`/lscpu")
    try:
        cpus = parse_cpulist(text)
    except ValueError:
        cpus = []
    if not cpus:
        raise UsageError(f"malformed --cpus {text!r}: use a CPU list such as 0-3,8")
    return cpus


def numactl_prefix(node: int) -> list[str] | None:
    """``numactl`` command prefix binding CPUs and memory to ``node``, or None without numactl."""
    exe = shutil.which("numactl")
    return [exe, f"--cpunodebind={node}", f"--membind={node}"] if exe else None


def node_cpus(node: int) -> list[int]:
    """CPU ids of NUMA ``node``.

    Raises:
        UsageError: the node does not exist here (names the nodes that do).
    """
    nodes = collect_system().numa_nodes or {"0": sorted(os.sched_getaffinity(0))}
    if str(node) not in nodes:
        raise UsageError(f"--numa-node {node}: this machine has NUMA node(s) {sorted(nodes)}")
    return nodes[str(node)]


def pin(cpus: list[int]) -> list[int]:
    """Pin this process (all its threads created later) to ``cpus``; return the affinity now in force.

    Raises:
        UsageError: a CPU outside the ones this process may use (names them).
    """
    allowed = sorted(os.sched_getaffinity(0))
    stray = [c for c in cpus if c not in allowed]
    if stray:
        shown = ", ".join(map(str, stray[:8])) + (f" and {len(stray) - 8} more" if len(stray) > 8 else "")
        raise UsageError(f"--cpus {shown} not available to this process (allowed: {allowed}): pick from those")
    os.sched_setaffinity(0, cpus)
    collect_system(refresh=True)  # effective CPUs (and the default thread count) follow the pin
    return sorted(os.sched_getaffinity(0))
