"""The memory allocator as a tuning knob: ``system`` (glibc malloc), ``jemalloc`` or ``tcmalloc`` (issue 31 item 3).

A non-system allocator is ``LD_PRELOAD``-ed into the worker process only (never into this one): Debian's
``libjemalloc2`` (``libjemalloc.so.2``) and ``libtcmalloc-minimal4`` (``libtcmalloc_minimal.so.4``), found at
run time in the dynamic linker's usual directories. A missing library is one line naming the package. The worker
reads its own ``/proc/self/maps`` to record which allocator was really loaded (:func:`loaded_allocator`).
"""

from __future__ import annotations

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
