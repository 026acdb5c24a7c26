"""``inferperf bench --soak-s N`` (issue 13 item 6): the leak verdict over an in-process run's RSS timeline.

The bench runs for exactly ``N`` measured seconds with the resource sampler on
(``samples.timeline``: ``t_s``, ``rss_bytes``). :func:`inferperf.stats.leak_verdict`,
the same verdict as ``load --soak-s`` (settle period, troughs of a periodic
structure, level shift, HAC lag for a persistent series), judges every raw
sample and gives the slope in bytes/hour and bytes/request (requests taken as
spread evenly over the run: ``count * t / duration``). The ``intervals`` shown
are the samples averaged into ``n_bins`` bins (default 30), for display only:
averaging would hide the troughs the verdict reads. The verdict goes into
``metrics.resources.soak``: ``{interval_s, duration_s, rss_source: "psutil",
intervals: [{t_s, requests, rss_bytes}], rss: {...}, verdict}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import BenchConfig
from ..errors import UsageError
from ..stats import leak_verdict

#: 1 MiB/h and 1 KiB per 1,000 requests, as for load --soak-s.
DEFAULT_BYTES_PER_HOUR = 1024 * 1024
DEFAULT_BYTES_PER_1000_REQUESTS = 1024


def soak_config(config: BenchConfig, soak_s: float) -> BenchConfig:
    """``config`` set for a soak of exactly ``soak_s`` measured seconds (``bench --soak-s``): min = max duration,
    any number of queries.

    Raises:
        UsageError: ``soak_s`` <= 0, or the resource sampler off (the verdict reads its RSS timeline).
    """
    if not soak_s > 0 or not config.sampler:
        raise UsageError("--soak-s N needs N > 0 seconds and the sampler on (drop --no-sampler)")
    stop = {"min_duration_s": soak_s, "max_duration_s": soak_s, "min_iterations": 1}
    return BenchConfig.model_validate({**config.model_dump(exclude_unset=True), "stop": stop})


def _timeline(result: Any) -> dict | None:
    tl = result.samples.timeline
    if tl and "runs" in tl:
        tl = next((r for r in tl["runs"] if r), None)
    return tl if tl and tl.get("rss_bytes") else None


def bench_soak_block(result: Any, *, n_bins: int = 30, bytes_per_hour: float = DEFAULT_BYTES_PER_HOUR,
                     bytes_per_1000_requests: float = DEFAULT_BYTES_PER_1000_REQUESTS) -> dict:  # fmt: skip
    """The soak block of a bench Result from its RSS timeline (``verdict`` "no rss source" without one).

    The verdict reads the raw samples; ``intervals`` are ``n_bins`` averages of them (display).
    """
    tl = _timeline(result)
    if tl is None:
        return {"rss_source": None, "intervals": [], "rss": None, "verdict": "no rss source"}
    t = np.asarray(tl["t_s"], dtype=float)
    rss = np.asarray(tl["rss_bytes"], dtype=float)
    k = min(n_bins, t.size)
    bins = np.array_split(np.arange(t.size), k)
    tb = np.array([t[b].mean() for b in bins])
    rb = np.array([rss[b].mean() for b in bins])
    duration = float(t[-1] - t[0]) if t.size > 1 else 0.0
    count = result.metrics.latency_ms.count
    req = count * (tb - t[0]) / duration if duration > 0 else np.zeros_like(tb)
    intervals = [{"t_s": float(a), "requests": float(q), "rss_bytes": float(r)} for a, q, r in zip(tb, req, rb)]
    block: dict[str, Any] = {"interval_s": duration / k if k else None, "duration_s": duration,
                             "rss_source": "psutil", "intervals": intervals, "rss": None,
                             "verdict": "too few intervals"}  # fmt: skip
    if k >= 3 and duration > 0:
        block["rss"] = leak_verdict(t, rss, count * (t - t[0]) / duration, bytes_per_hour=bytes_per_hour,
                                    bytes_per_1000_requests=bytes_per_1000_requests)  # fmt: skip
        block["verdict"] = ("leak" if block["rss"]["leak"] else "no leak") if block["rss"]["judged"] else "too few intervals"
    return block


def apply_bench_soak(result: Any) -> dict:
    """Attach :func:`bench_soak_block` as ``metrics.resources.soak`` (+ a note); returns the block."""
    block = bench_soak_block(result)
    if result.metrics.resources is not None:
        setattr(result.metrics.resources, "soak", block)
    line = f"soak {block.get('duration_s', 0) or 0:.0f} s: {block['verdict']}"
    if block["rss"]:
        line += f" ({block['rss']['reason']})"
    result.notes.append(line + "; in-process RSS includes inferperf's own per-request samples and warm-up growth")
    return block
