"""Paths a model repository may name: confined to the repository, symlinks resolved (the one rule for model
folders, version files and label files, used by the repository reader and Triton's model configuration)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError


def confined(root: Path, path: Path, what: str) -> Path:
    """``path`` with symlinks resolved, provided it stays inside ``root`` (itself resolved).

    Raises:
        UsageError: it leaves the repository (names ``what`` and both paths).
    """
    real, top = path.resolve(), root.resolve()
    if real != top and top not in real.parents:
        raise UsageError(f"{what} '{path}' resolves to '{real}', outside the model repository '{top}': refused")
    return real


__all__ = ["confined"]
