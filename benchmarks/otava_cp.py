"""Run inside Otava's own venv (scripts/install_otava.sh): JSON on stdin -> JSON on stdout.

In: ``{"series": [[float, ...], ...], "window_len": 50, "max_pvalue": 0.001, "min_magnitude": 0.0}``.
Out: ``{"change_points": [[index, ...], ...], "version": "..."}``: ``otava.analysis.compute_change_points``'s
indices (the first point after each change), one list per series.
"""

import importlib.metadata
import json
import sys

from otava.analysis import compute_change_points

doc = json.load(sys.stdin)
out = []
for values in doc["series"]:
    cps, _ = compute_change_points(values, window_len=doc.get("window_len", 50), max_pvalue=doc.get("max_pvalue", 0.001),
                                   min_magnitude=doc.get("min_magnitude", 0.0))
    out.append([int(c.index) for c in cps])
json.dump({"change_points": out, "version": importlib.metadata.version("apache-otava")}, sys.stdout)
