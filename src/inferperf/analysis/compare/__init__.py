"""Regression verdicts between two sets of Results: the CI performance gate behind ``inferperf compare``.

* :mod:`.core`: :func:`compare` (cases x metrics -> :class:`Comparison` of :class:`Row` verdicts under a :class:`Gate`);
* :mod:`.data`: Result files gathered into cases of runs, and how the two sides are matched;
* :mod:`.stats`: the interval and p-value of one change from run-level figures;
* :mod:`.checks`: why two sides may not be comparable (machine, CPUs, runtime versions, ...);
* :mod:`.gate`: the gate from flags and a YAML gate file;
* :mod:`.render`: a comparison as Markdown or JSON.
"""

from __future__ import annotations

from .core import METRICS, Comparison, Gate, Metric, Row, compare

__all__ = ["METRICS", "Comparison", "Gate", "Metric", "Row", "compare"]
