"""Keep a thread's signal alternate stack (``sigaltstack(2)``) safe from a runtime that swaps it.

OpenVINO's CPU plugin (2025.x, ``libopenvino_intel_cpu_plugin.so``) installs an mmap'd alternate signal
stack of ``getauxval(AT_MINSIGSTKSZ) + 8 KiB`` on the thread that constructs it (the first
``Core.available_devices`` or ``compile_model`` for CPU) and keeps the old one to restore in its
destructor. The destructor restores it only when it runs on that same thread; on any other thread it
just ``munmap``s its stack. The constructing thread is then left with an alternate stack that points at
unmapped memory, and the next signal delivered there to a handler with ``SA_ONSTACK`` (every Python
signal handler, faulthandler's, glibc's) cannot be given a frame: the kernel kills the process with
SIGSEGV (``si_code`` SI_KERNEL, ``si_addr`` 0) and faulthandler prints nothing. In Python the plugin dies
wherever the last reference to the ``Core`` goes, often a worker thread or the cyclic garbage collector
run from one: e.g. a model loaded by ``inferperf serve`` in the main thread and released by an instance
thread, after which SIGTERM kills the server instead of stopping it. Found from a core dump of the test
suite (main thread parked in a lock wait, faulthandler's own alternate stack already replaced).

:func:`preserve_sigaltstack` wraps the calls that may construct the plugin and puts the thread's previous
alternate stack back afterwards, so the plugin's destructor, wherever it runs, finds a stack that is not
its own and only unmaps its own memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator

SS_ONSTACK = 1
SS_DISABLE = 2


class _StackT(ctypes.Structure):
    """``stack_t`` of <signal.h> on Linux: ``void *ss_sp; int ss_flags; size_t ss_size``."""

    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

#: Alternate stacks allocated here, kept for the life of the process (a thread may still be using one).
_KEPT: list[ctypes.Array[ctypes.c_char]] = []


def current() -> tuple[int, int, int] | None:
    """The calling thread's alternate signal stack as ``(ss_sp, ss_flags, ss_size)``; None off Linux."""
    if _libc is None:
        return None
    s = _StackT()
    if _libc.sigaltstack(None, ctypes.byref(s)) != 0:
        return None
    return (s.ss_sp or 0, s.ss_flags, s.ss_size)


def _install(sp: int, flags: int, size: int) -> None:
    s = _StackT(sp or None, flags, size)
    _libc.sigaltstack(ctypes.byref(s), None)  # type: ignore[union-attr]


@contextlib.contextmanager
def preserve_sigaltstack() -> Iterator[None]:
    """Run the block, then give the calling thread back the alternate signal stack it had before.

    When the block replaced it (OpenVINO's CPU plugin does, see the module docstring): the previous one is
    restored when it was disabled or at least as large as the replacement; when it was smaller, a stack
    of the replacement's size owned by this module (never freed) is installed instead, so signal frames
    keep the room the runtime asked for. A no-op off Linux, and while the thread runs on its alternate
    stack (inside a signal handler).
    """
    before = current()
    try:
        yield
    finally:
        after = current()
        if before is not None and after is not None and not (after[1] & SS_ONSTACK) and after != before:
            b_sp, b_flags, b_size = before
            a_size = after[2]
            if b_flags & SS_DISABLE:
                _install(0, SS_DISABLE, a_size)
            elif b_size >= a_size:
                _install(b_sp, 0, b_size)
            else:
                buf = ctypes.create_string_buffer(a_size)
                _KEPT.append(buf)
                _install(ctypes.addressof(buf), 0, a_size)
