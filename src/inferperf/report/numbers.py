"""How the report writes a number for people (one rule for the tables, the summary lines and the templates)."""

from __future__ import annotations

import math
from typing import Any


def fmt_num(v: Any, digits: int = 4) -> str:
    """Numbers for people: 4 significant digits below 1000, thousands with separators above; '-' for none."""
    if v is None or v == "":
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    return str(v)
