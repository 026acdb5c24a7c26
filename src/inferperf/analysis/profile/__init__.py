"""Operator profiles (pure; no runtime imported): what ``inferperf profile`` derives from a trace.

* :mod:`.ops`: per-op and per-node tables from ONNX Runtime's Chrome-trace events, the profiled/unprofiled
  overhead, and the summary of a profile Result (:func:`summarize_profile`);
* :mod:`.diff`: which operator types got faster or slower between two profiles (:func:`diff_profiles`);
* :mod:`.text`: plain-text tables of both.
"""

from __future__ import annotations

from .diff import diff_profiles
from .ops import FAMILIES, family_percent, op_profile, overhead_flag, split_runs, summarize_profile
from .text import diff_table, profile_table

__all__ = ["FAMILIES", "diff_profiles", "diff_table", "family_percent", "op_profile", "overhead_flag",
           "profile_table", "split_runs", "summarize_profile"]
