"""Reports: Results -> one self-contained HTML file (jinja2 + plotly.js embedded) or Markdown.

``report(paths, output, fmt)`` is what ``inferperf report`` calls. The parts:
:mod:`.collect` (find and load Results), :mod:`.sections` (environment, method, raw data),
:mod:`.comparisons` (precision and runtimes), :mod:`.http` (labels and test setup of load and serve Results), :mod:`.insights` (bottlenecks, recommendations,
summary), :mod:`.charts` (Plotly figure specs, downsampled), :mod:`.build` (the Report),
:mod:`.render` (HTML and Markdown). jinja2 and plotly are imported only when rendering.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .build import Report, ReportOptions, build


def report(paths: Iterable[str | Path], output: str | Path, fmt: str = "html",
           options: ReportOptions | None = None) -> tuple[Path, Report]:
    """Build the report of the Results under ``paths`` and write it to ``output`` as ``html`` or ``markdown``.

    Returns:
        (the file written, the :class:`Report` data).

    Raises:
        UsageError: missing paths, no Results, an unknown format or an unwritable output (exit 2).
    """
    from .render import write

    rep = build(paths, options)
    return write(rep, output, fmt), rep


__all__ = ["Report", "ReportOptions", "build", "report"]
