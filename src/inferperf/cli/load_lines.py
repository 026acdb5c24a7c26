"""Console lines of ``inferperf load`` that are not table rows: the soak's line per interval, and the one line
that says what an interrupted run kept (issue 23 item 7)."""

from __future__ import annotations

import datetime as _dt
import math
import sys
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_json
from ..loadgen.spec import lost_line, nothing_kept, refused_line, step_label
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
        return nothing_kept(signal_name)
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
        return nothing_kept(signal_name) + tail
    done = len(results)
    where = f" in {_folder(written)}" if written else " (printed above; pass -o DIR to write them)"
    return f"interrupted by {signal_name}: kept {done} finished step{'' if done == 1 else 's'}{where}{tail}"


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


class LoadConsole:
    """What ``inferperf load`` prints and writes while its steps run (hooks of
    :func:`inferperf.loadgen.spec.run_steps`): the table (its header with the first step), each step's notes and
    file, a soak's line per interval (and its :class:`IntervalLog` with ``-o``), a search's lines on stderr; then
    the findings, the server's Result and the CSV. ``shown`` / ``written``: what an interrupted run kept."""

    def __init__(self, output: Path | None, command: list[str]) -> None:
        self.output, self.command = output, command
        self.cfg: Any = None  # the settings as run, once the target answered (:meth:`start`)
        self.shown: list[Any] = []  # the Results handed to the console (what a hard stop keeps)
        self.written: list[Path] = []
        self.log: IntervalLog | None = None
        self.running = False  # between the target's answer and the steps' end: where a signal is a hard stop
        self._header: list[str] = []

    def start(self, cfg: Any) -> None:
        """The target answered: the table's header waits for the first step (an input error comes before it)."""
        self.cfg, self._header, self.running = cfg, [table_header(cfg.mode)], True
        if cfg.soak_s is not None and self.output is not None:
            self.log = IntervalLog(self.output, cfg, self.command)

    def step(self, r: Any) -> None:
        """One step ended: its row, token figures and notes; its Result written with ``-o``."""
        from ..results.io import save
        from .outputs import output_path

        self.shown.append(r)
        if self._header:
            print(self._header.pop(), flush=True)
        print(table_row(r), flush=True)
        if r.metrics.generation is not None:
            from .gen_lines import generation_line

            print(generation_line(r.metrics.generation), flush=True)
        split = (r.metrics.server or {}).get("breakdown_ms")
        if split:
            from ..loadgen.breakdown import breakdown_line

            print(f"  {breakdown_line(split)}", flush=True)
        for note in r.notes:
            print(f"  note: {note}", flush=True)
        if self.output is not None:
            self.written.append(save(r, output_path(self.output, r)))
            print(f"  result written to {self.written[-1]}", file=sys.stderr)

    def end(self) -> None:
        """The steps ended: a signal now is no hard stop of a step."""
        self.running = False

    def interval(self, iv: dict[str, Any]) -> None:
        """A soak interval ended: its line, and the interval log on disk with ``-o``."""
        print(interval_line(iv, soak_intervals(self.cfg)), flush=True)
        if self.log is not None:
            self.log(iv)

    def progress(self, line: str) -> None:
        """A search's plan and a line before each step (stderr: the table stays clean)."""
        print(line, file=sys.stderr, flush=True)

    def finish(self, outcome: Any, csv_path: Path | None) -> None:
        """After the steps: a search's findings, the own server's Result (with ``-o``), the CSV rows."""
        from ..results.io import save
        from .outputs import output_path

        found = (outcome.results[-1].metrics.client or {}).get("stress") if outcome.results else None
        if found:
            print(findings_line(found), flush=True)
        if outcome.server is not None and self.output is not None:
            where = save(outcome.server, output_path(self.output, outcome.server))
            print(f"server result written to {where}", file=sys.stderr)
        if csv_path is not None:
            from ..loadgen.csv import write_csv

            print(f"csv written to {write_csv(outcome.results, csv_path)}", file=sys.stderr)


__all__ = ["IntervalLog", "LoadConsole", "findings_line", "hard_stop_line", "interval_line", "kept_line", "lost_line",
           "refused_line", "soak_intervals", "step_label", "table_header", "table_row"]
