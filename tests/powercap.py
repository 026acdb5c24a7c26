"""A fixture powercap tree (Linux /sys/class/powercap layout) for the energy tests."""

from __future__ import annotations

import os
from pathlib import Path

#: A real package's max_energy_range_uj.
RANGE_UJ = 262_143_328_850


def package_tree(root: Path, energy_uj: int = 42) -> Path:
    """``root`` holding one readable RAPL zone ``intel-rapl:0`` (``package-0``) whose counter reads ``energy_uj``."""
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{RANGE_UJ}\n")
    return root


def set_counter(root: Path, zone: str, energy_uj: int) -> None:
    """Move zone ``zone``'s counter to ``energy_uj`` in one step, as sysfs reads are atomic: written beside and
    renamed over, so a meter's sampling thread never reads the empty file a truncating write leaves between."""
    path = root / zone / "energy_uj"
    tmp = path.with_name("energy_uj.tmp")
    tmp.write_text(f"{energy_uj}\n")
    os.replace(tmp, path)
