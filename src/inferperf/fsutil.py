"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every Result, ``.npz`` sample sidecar, CSV, index and summary file inferperf writes goes
through this module. The data goes to a temporary file in the destination's own folder
(so the final rename never crosses file systems), which then replaces the destination
with :func:`os.replace` (atomic on POSIX and Windows). When the writer raises, the
temporary file is removed and the old destination is left as it was.

``fsync=True`` also flushes the file's data and then the folder entry to disk, so the
rename survives a power loss; without it (the default) the write is atomic against a
crash or Ctrl-C of the process, which is what resume and readers running alongside need.

Part of the base layer: imports only the standard library.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "atomic_path", "atomic_write_bytes", "atomic_write_text"]

_TMP_SUFFIX = ".tmp"


def _temp_name(dest: Path) -> Path:
    """A fresh hidden name beside ``dest``: ``.NAME.<pid>.<random>.tmp`` (unique per process and call)."""
    return dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}{_TMP_SUFFIX}")


def _fsync_dir(folder: Path) -> None:
    """Flush a folder entry (the rename) to disk; a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, *, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on a clean exit it replaces ``path``.

    For writers that want a file name rather than an open file (``onnx.save``,
    ``torch.onnx.export``). The temporary name ends in ``.tmp``: writers that append their
    own extension to a name (``np.savez``) should use :func:`atomic_open` instead.

    Args:
        path: the destination; its folder must exist.
        fsync: flush the new file and the folder entry to disk before returning.

    Raises:
        OSError: the folder is missing or not writable. Whatever the ``with`` body raises
            propagates after the temporary file is removed; ``path`` is untouched then.
    """
    dest = Path(path)
    tmp = _temp_name(dest)
    try:
        yield tmp
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        _fsync_dir(dest.parent)


@contextlib.contextmanager
def atomic_open(
    path: str | Path,
    mode: str = "w",
    *,
    encoding: str | None = None,
    newline: str | None = None,
    fsync: bool = False,
) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on a clean exit it replaces ``path``.

    Use it for writers that take an open file::

        with atomic_open(csv_path, "w", newline="") as f:
            csv.writer(f).writerows(rows)
        with atomic_open(npz_path, "wb") as f:
            np.savez_compressed(f, **arrays)

    The file is created with mode 0o666 less the process umask (like :func:`open`).

    Args:
        path: the destination; its folder must exist.
        mode: ``"w"`` (text) or ``"wb"`` (bytes).
        encoding, newline: as for :func:`open` (text mode only; ``encoding`` defaults to UTF-8).
        fsync: flush the new file and the folder entry to disk before returning.

    Raises:
        ValueError: ``mode`` is not ``"w"`` or ``"wb"``.
        OSError: the folder is missing or not writable. Whatever the ``with`` body raises
            propagates after the temporary file is removed; ``path`` is untouched then.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode {mode!r}: use 'w' or 'wb'")
    with atomic_path(path, fsync=False) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        if mode == "w":
            fh: IO[Any] = os.fdopen(fd, "w", encoding=encoding or "utf-8", newline=newline)
        else:
            fh = os.fdopen(fd, "wb")
        with fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
    if fsync:
        _fsync_dir(Path(path).parent)


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8", fsync: bool = False) -> Path:
    """Write ``text`` to ``path`` atomically (see the module docstring); returns ``path`` as a Path.

    Raises:
        OSError: the folder is missing or not writable; ``path`` is untouched then.
    """
    with atomic_open(path, "w", encoding=encoding, fsync=fsync) as f:
        f.write(text)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes, *, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (see the module docstring); returns ``path`` as a Path.

    Raises:
        OSError: the folder is missing or not writable; ``path`` is untouched then.
    """
    with atomic_open(path, "wb", fsync=fsync) as f:
        f.write(data)
    return Path(path)


def json_safe(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None (JSON has no such numbers: ``Infinity`` and
    ``NaN`` tokens are rejected by strict readers such as JavaScript's ``JSON.parse``). Dicts, lists and tuples
    are walked; tuples become lists; anything else is returned as it is."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def atomic_write_json(path: str | Path, doc: Any, *, indent: int | None = 1) -> Path:
    """Write ``doc`` as strict JSON (:func:`json_safe`: no NaN/Infinity tokens) atomically; values json cannot
    encode are written as their ``str``. Returns ``path`` as a Path.

    Raises:
        OSError: the folder is missing or not writable; ``path`` is untouched then.
    """
    return atomic_write_text(path, json.dumps(json_safe(doc), indent=indent, default=str, allow_nan=False))
