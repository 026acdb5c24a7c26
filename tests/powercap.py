"""A fixture powercap tree (Linux /sys/class/powercap layout) for the energy tests."""

from __future__ import annotations

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
