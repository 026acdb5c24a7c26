"""Per-thread CPU time and run-queue wait of a process, read from Linux's ``/proc/PID/task/TID/schedstat``, and
the thread names a served replica gives its threads so each figure can be put on the right role.

``schedstat`` holds three numbers per thread (Linux's Documentation/scheduler/sched-stats.rst): the time spent
on a CPU (ns), the time spent waiting on a run queue (ns), and the number of timeslices run. It needs no
privileges and counts in nanoseconds (``/proc/PID/task/TID/stat`` counts 10 ms ticks). Waits for Python's GIL
are not in it: a thread blocked on the GIL sleeps, it does not wait on a run queue.

Roles, by the name (``comm``, 15 bytes at most) a served replica sets (:func:`name_this_thread`):

- ``inferperf-loop``: the event loop (HTTP, decode, encode, the batcher; it keeps "inferperf" in its name, since
  where it is the main thread its name is the process's, which ``pgrep inferperf`` finds);
- ``ip-inst-N``: instance N's thread, the one that calls the runtime;
- ``ip-pool-N``: threads the runtime started while instance N's session was created (its intra-op pool: they
  inherit the name the instance thread had then);
- anything else: ``other`` (the main thread, the runtime's later threads, the resource sampler).

Linux gives a new thread its creator's name, so a thread that a library starts from the event loop (grpc's
poller and executor threads, asyncio's default executor) would read as a second event loop. The server renames
such threads :data:`LOOP_CHILD_NAME` (:func:`rename_loop_children`), and :func:`by_role` takes the loop's TID
where the caller knows it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

#: Linux prctl option that names the calling thread (linux/prctl.h)
_PR_SET_NAME = 15
_ROLE = re.compile(r"^(?:inferperf-(loop)|ip-(inst|pool)-(\d+))$")
#: the event loop's thread name
LOOP_NAME = "inferperf-loop"
#: a thread started from the event loop's thread (it inherited :data:`LOOP_NAME`); role ``other``
LOOP_CHILD_NAME = "ip-loop-child"


def name_this_thread(name: str) -> bool:
    """Name the calling OS thread ``name`` (its ``comm``: what ``top -H`` and ``/proc/.../comm`` show; cut to 15
    bytes). Returns False where the name cannot be set (not Linux, no libc); never raises."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class ThreadTimes:
    """One thread's ``schedstat``: ``cpu_ns`` on a CPU, ``wait_ns`` waiting on a run queue, ``slices`` run; its
    ``name`` (comm); and ``wakeups``: the times it gave up its CPU to wait (``voluntary_ctxt_switches`` in
    ``/proc/PID/task/TID/status``: for an event loop, each ``epoll_wait`` that found nothing ready, and each wait
    for a lock such as the GIL)."""

    tid: int
    name: str
    cpu_ns: int
    wait_ns: int
    slices: int
    wakeups: int = 0


def read_threads(pid: int) -> dict[int, ThreadTimes]:
    """Every thread of process ``pid`` now (a thread that ends while it is read is left out).

    Raises:
        FileNotFoundError: no such process, or no ``/proc`` (not Linux).
    """
    out: dict[int, ThreadTimes] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu, wait, slices = (int(x) for x in (task / "schedstat").read_text().split()[:3])
            name = (task / "comm").read_text().strip()
            wakeups = _voluntary_switches((task / "status").read_text())
        except (OSError, ValueError):
            continue
        out[int(task.name)] = ThreadTimes(int(task.name), name, cpu, wait, slices, wakeups)
    return out


def _voluntary_switches(status: str) -> int:
    """``voluntary_ctxt_switches`` from a ``/proc/.../status`` text (0 where the kernel does not report it)."""
    m = re.search(r"^voluntary_ctxt_switches:\s*(\d+)", status, re.MULTILINE)
    return int(m.group(1)) if m else 0


def rename_loop_children(loop_tid: int, pid: int | None = None) -> int:
    """Rename every thread of this process named :data:`LOOP_NAME` other than ``loop_tid`` (threads started from
    the loop's thread inherit its name) :data:`LOOP_CHILD_NAME`, by writing ``/proc/PID/task/TID/comm`` (allowed
    for one's own threads). Returns how many were renamed; a thread that ended meanwhile is skipped, and where
    ``/proc`` is absent nothing is renamed. Never raises."""
    pid = os.getpid() if pid is None else pid
    renamed = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0
    for task in tasks:
        if task.name == str(loop_tid):
            continue
        try:
            if (task / "comm").read_text().strip() == LOOP_NAME:
                (task / "comm").write_text(LOOP_CHILD_NAME)
                renamed += 1
        except OSError:
            continue
    return renamed


def thread_delta(before: dict[int, ThreadTimes], after: dict[int, ThreadTimes]) -> dict[int, ThreadTimes]:
    """What each thread of ``after`` did since ``before`` (a thread new in ``after`` counts from zero; one that
    ended between the two is lost: read often enough, or keep threads alive)."""
    out = {}
    for tid, a in after.items():
        b = before.get(tid)
        if b is None:
            out[tid] = a
        else:
            out[tid] = ThreadTimes(tid, a.name, a.cpu_ns - b.cpu_ns, a.wait_ns - b.wait_ns, a.slices - b.slices,
                                   a.wakeups - b.wakeups)
    return out


def role_of(name: str) -> str:
    """``event-loop``, ``instance-N``, ``pool-N`` or ``other`` for a thread name (see the module docstring)."""
    m = _ROLE.match(name)
    if m is None:
        return "other"
    loop, kind, n = m.groups()
    if loop:
        return "event-loop"
    return f"{'instance' if kind == 'inst' else 'pool'}-{n}"


def by_role(times: dict[int, ThreadTimes], loop_tid: int | None = None) -> dict[str, dict[str, int]]:
    """``{role: {"threads", "cpu_ns", "wait_ns", "slices", "wakeups"}}`` summed over the threads of each role; with
    ``loop_tid`` only that thread is the ``event-loop`` (another thread still named like it is ``other``)."""
    out: dict[str, dict[str, int]] = {}
    for t in times.values():
        role = role_of(t.name)
        if loop_tid is not None and role == "event-loop" and t.tid != loop_tid:
            role = "other"
        r = out.setdefault(role, {"threads": 0, "cpu_ns": 0, "wait_ns": 0, "slices": 0, "wakeups": 0})
        r["threads"] += 1
        r["cpu_ns"] += t.cpu_ns
        r["wait_ns"] += t.wait_ns
        r["slices"] += t.slices
        r["wakeups"] += t.wakeups
    return out


def native_id() -> int:
    """The calling thread's OS thread id (the TID in ``/proc/PID/task``)."""
    return threading.get_native_id()


__all__ = ["LOOP_CHILD_NAME", "LOOP_NAME", "ThreadTimes", "by_role", "name_this_thread", "native_id", "read_threads",
           "rename_loop_children", "role_of", "thread_delta"]
