"""The memory allocator as a tuning knob: ``system`` (glibc malloc), ``jemalloc`` or ``tcmalloc`` (issue 31 item 3).

A non-system allocator is ``LD_PRELOAD``-ed into the worker process only (never into this one): Debian's
``libjemalloc2`` (``libjemalloc.so.2``) and ``libtcmalloc-minimal4`` (``libtcmalloc_minimal.so.4``), found at
run time in the dynamic linker's usual directories. A missing library is one line naming the package. The worker
reads its own ``/proc/self/maps`` to record which allocator was really loaded (:func:`loaded_allocator`).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from ..errors import UsageError

#: name -> (shared object, Debian package).
ALLOCATORS: dict[str, tuple[str, str] | None] = {
    "system": None,
    "jemalloc": ("libjemalloc.so.2", "libjemalloc2"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
}


def _lib_dirs() -> list[Path]:
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else []
    return [Path(d) for d in [*dirs, "/usr/lib64", "/usr/lib", "/lib64", "/lib", "/usr/local/lib"]]


def find_allocator(name: str, dirs: list[Path] | None = None) -> Path | None:
    """The shared object of allocator ``name`` (None for ``system``).

    Raises:
        UsageError: an unknown name, or the library is not installed (names the Debian package).
    """
    if name not in ALLOCATORS:
        raise UsageError(f"--allocator {name!r}: use one of {', '.join(ALLOCATORS)}")
    spec = ALLOCATORS[name]
    if spec is None:
        return None
    so, package = spec
    for d in dirs if dirs is not None else _lib_dirs():
        if (d / so).is_file():
            return d / so
    raise UsageError(f"--allocator {name}: {so} not found: install it (apt-get install {package})")


def allocator_env(name: str, dirs: list[Path] | None = None) -> dict[str, str]:
    """The environment a worker needs for allocator ``name``: ``{"LD_PRELOAD": path}``, ``{}`` for ``system``.

    Raises:
        UsageError: as :func:`find_allocator`.
    """
    path = find_allocator(name, dirs)
    return {"LD_PRELOAD": str(path)} if path is not None else {}


def loaded_allocator(maps: str | None = None) -> str:
    """Which allocator this process has mapped: ``jemalloc``, ``tcmalloc`` or ``system`` (from ``/proc/self/maps``,
    or ``maps`` given; ``system`` where it cannot be read)."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return "system"
    for name, spec in ALLOCATORS.items():
        if spec is not None and spec[0].split(".so")[0] in maps:
            return name
    return "system"


#: Set in the environment of a process re-executed with an allocator preloaded (stops a second re-exec).
REEXEC_MARK = "INFERPERF_ALLOCATOR_REEXEC"


def _own_command_line() -> bool:
    """True when this process is the ``inferperf`` program itself (the console script or ``python -m inferperf``)."""
    prog = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    return prog.name == "inferperf" or (prog.name == "__main__.py" and prog.parent.name == "inferperf")


def reexec_with_allocator(name: str) -> None:
    """Make this process run allocator ``name``: return at once when it is already mapped (or ``system`` is asked
    for); else replace this process (same PID) by ``python -m inferperf`` with its own arguments and the
    allocator ``LD_PRELOAD``-ed.

    Raises:
        UsageError: as :func:`find_allocator`; the preload did not take (after one re-exec it is still not
            mapped); this process is not the ``inferperf`` program (an in-process CLI call cannot re-exec).
    """
    argv = list(sys.argv[1:])
    if name == "system" or loaded_allocator() == name:
        return
    env = {**os.environ, **allocator_env(name)}
    if os.environ.get(REEXEC_MARK) == name:
        raise UsageError(f"--allocator {name}: {env['LD_PRELOAD']} was preloaded but is not mapped: check it loads"
                         f" (LD_PRELOAD={env['LD_PRELOAD']} python -c pass)")
    if not _own_command_line():
        raise UsageError(f"--allocator {name} re-executes the server with it preloaded: run inferperf serve as its"
                         " own process (not an in-process CLI call)")
    env[REEXEC_MARK] = name
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "inferperf", *argv], env)
