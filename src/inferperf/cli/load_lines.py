"""Console lines of ``inferperf load`` that are not table rows: the soak's line per interval, and the one line
that says what an interrupted run kept (issue 23 item 7)."""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_json


def interval_line(iv: dict[str, Any], total: int) -> str:
    """One soak interval as it ends: ``interval 3/24  15 s  102.3 req/s  p99 12.34 ms  RSS 123.4 MiB  slope so
    far +1.20 MiB/h`` (``iv``: :func:`inferperf.loadgen.soak.live_interval`'s figures; RSS parts only with a
    source)."""
    line = (f"  interval {iv['interval']}/{total}  {iv['t_s']:.0f} s  {iv['queries_per_s']:.1f} req/s"
            f"  p99 {iv['p99_ms']:.2f} ms")  # fmt: skip
    if iv.get("rss_bytes") is not None:
        line += f"  RSS {iv['rss_bytes'] / 1048576:.1f} MiB"
    if iv.get("rss_slope_bytes_per_hour") is not None:
        line += f"  slope so far {iv['rss_slope_bytes_per_hour'] / 1048576:+.2f} MiB/h"
    return line


class IntervalLog:
    """A soak's intervals on disk as each ends (a SIGKILL or a power cut keeps them too): ``DIR/MODEL-soak-STAMP
    .intervals.json``, or ``X.intervals.json`` beside ``-o X.json``, rewritten atomically after each interval as
    ``{command, interval_s, soak_s, intervals: [live figures]}``. The soak's Result, written at its end (or
    at Ctrl-C / SIGTERM), holds the full per-interval block; this file is the record until then."""

    def __init__(self, output: Path, cfg: Any, command: list[str]) -> None:
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S")
        name = str(cfg.model or "target").replace("/", "_")
        self.path = (output.with_suffix(".intervals.json") if output.suffix.lower() == ".json"
                     else output / f"{name}-soak-{stamp}.intervals.json")  # fmt: skip
        self.doc: dict[str, Any] = {"command": command, "interval_s": cfg.soak_interval_s, "soak_s": cfg.soak_s,
                                    "intervals": []}  # fmt: skip

    def __call__(self, iv: dict[str, Any]) -> None:
        """Record one finished interval (:func:`inferperf.loadgen.soak.live_interval`'s figures)."""
        self.doc["intervals"].append(iv)
        atomic_write_json(self.path, self.doc)


def soak_intervals(cfg: Any) -> int:
    """How many intervals a soak of ``cfg`` plans (the last one may be short)."""
    return max(1, math.ceil(cfg.soak_s / cfg.soak_interval_s - 1e-9))


def kept_line(cfg: Any, results: list[Any], written: list[Path], signal_name: str) -> str:
    """The one line after Ctrl-C or SIGTERM: what was kept, where, and what did not run.

    Args:
        cfg: the run's LoadConfig (its planned steps, or its soak).
        results: the Results handed to the console so far (the interrupted one, if any, marked).
        written: the files they were written to (empty without ``-o``).
        signal_name: ``SIGINT`` or ``SIGTERM``.
    """
    where = f" in {_folder(written)}" if written else " (printed above; pass -o DIR to write them)"
    head = f"interrupted by {signal_name}"
    if not results:
        return f"{head} before any step finished: nothing measured to keep"
    cut = [r for r in results if (r.metrics.client or {}).get("interrupted")]
    if getattr(cfg, "soak_s", None) is not None:
        ivs = (results[0].metrics.client or {}).get("soak", {}).get("intervals", [])
        whole = sum(1 for iv in ivs if not iv.get("partial"))
        part = " and the partial one after them" if len(ivs) > whole else ""
        return (f"{head} after {whole} of {soak_intervals(cfg)} soak intervals: kept them{part} in one Result"
                f" (INVALID: interrupted){where}")  # fmt: skip
    done = len(results) - len(cut)
    text = f"{head}: kept {done} finished step{'' if done == 1 else 's'}"
    if cut:
        text += f" and the interrupted step {len(results)} (INVALID, partial figures)"
    text += where
    if getattr(cfg, "stress", False) or getattr(cfg, "find_max_rate", False):
        return text + "; the search stopped there (its findings count finished steps only)"
    left = len(cfg.steps) - len(results)
    return text + (f"; {left} step{'' if left == 1 else 's'} not run" if left else "")


def hard_stop_line(cfg: Any, results: list[Any], written: list[Path], signal_name: str,
                   log: IntervalLog | None = None) -> str:  # fmt: skip
    """The one line after a second Ctrl-C or SIGTERM (a hard stop: the step in progress is not written).

    Args: as :func:`kept_line`; ``log``: a soak's interval log, whose finished intervals stay on disk.
    """
    tail = f"; a second {signal_name} stopped at once: the step in progress was dropped"
    if log is not None and log.doc["intervals"]:
        n = len(log.doc["intervals"])
        return (f"interrupted by {signal_name} after {n} of {soak_intervals(cfg)} soak intervals: kept their live"
                f" figures in {log.path}; a second {signal_name} stopped at once: the soak's Result was not written")
    if not results:
        return f"interrupted by {signal_name} before any step finished: nothing measured to keep{tail}"
    done = len(results)
    where = f" in {_folder(written)}" if written else " (printed above; pass -o DIR to write them)"
    return f"interrupted by {signal_name}: kept {done} finished step{'' if done == 1 else 's'}{where}{tail}"


def refused_line(cfg: Any, refused: dict[str, Any]) -> str:
    """The one line for a step the server refused (``metrics.client.rejected``): what happened, then the fix for
    the API spoken. A token-stream request answered 404 or 405 is a server that does not serve that route (not an
    OpenAI-compatible server, or another path): KServe's hints (--shape, --protocol) mean nothing there."""
    said = " ".join(str(refused.get("body") or "").split()) or "(no body)"
    head = f"the server refused the requests ({refused['in_a_row']} answers {refused['status']} in a row; the first said: {said})"
    if getattr(cfg, "api", "kserve") == "kserve":
        return f"{head}: fix --shape, --input-data, --protocol or --model"
    if refused["status"] in (404, 405):
        from ..loadgen.gen_target import request_path

        return (f"{head}: {cfg.url} does not serve POST {request_path(cfg, cfg.model or 'MODEL')} (--api {cfg.api}): "
                "point the URL at an OpenAI-compatible server (or Triton's generate extension with --api triton-generate)")
    return f"{head}: fix --model, --max-tokens or --header"


def _folder(written: list[Path]) -> str:
    parents = {str(Path(p).parent) for p in written}
    return parents.pop() if len(parents) == 1 else ", ".join(str(p) for p in written)


__all__ = ["IntervalLog", "hard_stop_line", "interval_line", "kept_line", "soak_intervals"]
