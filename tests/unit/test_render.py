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
    assert f"95 % CI reaches 0, up to {2.0 * tp.queries_per_s:.1f} (too noisy to bound: --repeat >= 3)" in out
