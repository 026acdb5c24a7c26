"""Console lines of ``inferperf load`` that are not table rows: the soak's line per interval, and the one line
that says what an interrupted run kept (issue 23 item 7)."""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_json
from .render import plain


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


#: the one latency convention of the table, printed above it.
LATENCY_LEGEND = ("latency: p50/p99 ms over every request of the step (metrics.client.error_adjusted_latency_ms): failed"
                  " ones count as infinitely slow (inf), unanswered ones at their age at the end (>: a lower bound);"
                  " 'p99 ok': answered requests only (metrics.latency_ms); '-': no request to rank")  # fmt: skip


def table_header(mode: str) -> str:
    """The console table's header of a load run (``closed``: concurrency, else rate), under its latency legend."""
    step = "concurrency" if mode == "closed" else "rate/s"
    return (f"{LATENCY_LEGEND}\n{step:>11} {'req/s':>9} {'p50 ms':>9} {'p99 ms':>9} {'p99 ok':>9} {'p99 unc.':>9}"
            f" {'lag p99':>8} {'errors':>7} {'incompl.':>8}  verdict")  # fmt: skip


def _all_requests(c: dict[str, Any], name: str, answered: float) -> str:
    """One error-adjusted percentile as the table writes it: ``inf`` on failures, ``>x`` for a lower bound."""
    block = c.get("error_adjusted_latency_ms")
    if not block:
        return f"{answered:.2f}"
    if not block.get("count"):  # no request of the span ended or was due in it: nothing to rank (not a failure)
        return "-"
    v = block.get(name)
    if v is None:
        return "inf"
    lower = name in block.get("lower_bounds", [])
    return f"{'>' if lower else ''}{v:.2f}"


def verdict_text(r: Any) -> str:
    """``VALID``, ``INVALID: reasons`` or ``OVERLOADED: reasons``."""
    v = r.validity
    if not v.valid:
        return "INVALID: " + "; ".join(v.reasons)
    return "OVERLOADED: " + "; ".join(v.overloaded) if v.overloaded else "VALID"


def table_row(r: Any) -> str:
    """One console line of a load step (columns: :func:`table_header`)."""
    c = r.metrics.client or {}
    step = r.config.concurrency if r.config.scenario == "concurrent" else (c.get("target_rate") or 0.0)
    lat = r.metrics.latency_ms
    unc = (c.get("uncorrected_latency_ms") or {}).get("p99", 0.0)
    ok_p99, unc_p99 = (f"{lat.p99:.2f}", f"{unc:.2f}") if lat.count else ("-", "-")  # no answer: no latency (not 0)
    return (f"{step:>11g} {r.metrics.throughput.queries_per_s:>9.1f} {_all_requests(c, 'p50', lat.p50):>9}"
            f" {_all_requests(c, 'p99', lat.p99):>9} {ok_p99:>9} {unc_p99:>9}"
            f" {c.get('send_lag_ms', {}).get('p99', 0.0):>8.2f} {r.metrics.errors.count:>7d}"
            f" {c.get('incomplete', 0):>8d}  {verdict_text(r)}")  # fmt: skip


FINDINGS = {"knee": "knee", "max_load_meeting_slo": "max load meeting the SLO", "errors_began_at": "errors began at",
            "goodput_rate": "goodput rate", "bracket": "bracket", "stop_reason": "stopped"}


def findings_line(found: dict[str, Any]) -> str:
    """``findings: knee 8, max load meeting the SLO 16, errors began at none, stopped: ...`` (plain values)."""
    return "findings: " + ", ".join(f"{FINDINGS[k]}{':' if k == 'stop_reason' else ''} {plain(found[k])}"
                                    for k in FINDINGS if k in found)


def step_label(r: Any) -> str:
    """A load step named by its load: ``concurrency 8``, ``50 req/s`` or ``the trace``."""
    c = r.metrics.client or {}
    if r.config.scenario == "concurrent":
        return f"concurrency {r.config.concurrency}"
    return f"{plain(c.get('target_rate'))} req/s" if c.get("target_rate") else "the trace"


def lost_line(r: Any, results: list[Any], cfg: Any) -> str:
    """The one line ``load`` exits 1 with when the target stopped answering during step ``r``."""
    kept = f"{len(results)} step Result(s) kept, no later step run"
    reason = (r.metrics.client or {}).get("lost_reason") or "it stopped answering"
    return (f"the target stopped answering during the step at {step_label(r)}: {reason}; {kept}; check that the"
            f" server at {cfg.url} is up")


__all__ = ["IntervalLog", "hard_stop_line", "interval_line", "kept_line", "soak_intervals"]
