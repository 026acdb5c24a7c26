"""The console table never prints a clipped interval as if it were measured (issue 10 item 9)."""

from __future__ import annotations

from rich.console import Console

from inferperf.cli.render import result_table
from tests.unit.test_results import make


def _text(r) -> str:
    console = Console(width=200, record=True)
    console.print(result_table(r))
    return console.export_text()


def test_a_measured_interval_is_printed_and_a_clipped_one_is_not() -> None:
    r = make()
    tp = r.metrics.throughput
    tp.per_run = [tp.queries_per_s] * 3
    tp.queries_per_s_ci95 = [0.5 * tp.queries_per_s, 1.5 * tp.queries_per_s]
    assert f"95 % CI [{0.5 * tp.queries_per_s:.1f}, {1.5 * tp.queries_per_s:.1f}] over 3 runs" in _text(r)
    tp.queries_per_s_ci95 = [0.0, 2.0 * tp.queries_per_s]  # the runner clipped a t interval that reached below 0
    out = _text(r)
    assert "[0.0," not in out
    # the advice asks for more runs than were used (3 runs used: --repeat >= 3 was issue 24 item 15)
    assert f"95 % CI reaches 0, up to {2.0 * tp.queries_per_s:.1f} (too noisy to bound: --repeat 6)" in out


def test_values_print_plainly_never_as_python_reprs() -> None:
    """Issue 24 item 15: ``errors_began_at=None``, ``{'connect': 2952}`` and ``3.943e+04`` were printed."""
    from inferperf.cli.load_lines import findings_line
    from inferperf.cli.render import plain
    from inferperf.measure.speedup import sig

    assert sig(39431.2) == "39431" and sig(1234.5678) == "1235" and sig(0.5) == "0.5"
    assert plain(None) == "none" and plain({"connect": 2952, "timeout": 3}) == "connect 2952, timeout 3"
    assert plain([100.0, 200.0]) == "[100, 200]" and plain(39431.2) == "39431"
    line = findings_line({"knee": 8, "max_load_meeting_slo": None, "errors_began_at": None,
                          "stop_reason": "p99 30.00 ms > SLO 20 ms", "bracket": [100.0, 125.5]})
    assert line == ("findings: knee 8, max load meeting the SLO none, errors began at none, bracket [100, 125.5],"
                    " stopped: p99 30.00 ms > SLO 20 ms")
    r = make()
    r.metrics.errors.count, r.metrics.errors.by_kind = 2952, {"connect": 2952}
    out = _text(r)
    assert "2952: connect 2952" in out and "{" not in out
