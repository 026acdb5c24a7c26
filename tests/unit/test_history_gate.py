"""Issue 28 item 4 (the gate): the newest point against the segment since the last change; verdicts on
must-say-yes and must-say-no cases; acks; environment changes; exit codes; false-alarm and catch rates."""

from __future__ import annotations

import datetime as _dt
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from inferperf.history import gate, store
from inferperf.history.ingest import add
from inferperf.history.query import Point, Series, ack, all_series
from tests.history_results import make

T0 = _dt.datetime(2026, 12, 1)


def _db(tmp_path: Path, levels: list[float], **kw) -> object:
    e = store.open_store(str(tmp_path / "h.db"))
    add(e, [(str(i), make(lv, seed=i, created_at=f"2026-12-01T00:{i:02d}:00+00:00", **kw))
            for i, lv in enumerate(levels)])
    return e


def _by_metric(report: gate.CheckReport) -> dict[str, str]:
    return {r.series.metric: r.verdict for r in report.rows}


def test_a_10_percent_slower_newest_point_fails_the_gate(tmp_path: Path) -> None:
    e = _db(tmp_path, [2.0] * 10 + [2.2])
    rep = gate.check(e, "*p50*")
    assert _by_metric(rep) == {"p50_ms": "regression"} and rep.exit_code == 3
    (row,) = rep.rows
    assert row.baseline_n == 10 and row.worse == pytest.approx(0.10, abs=0.02) and row.pvalue < 0.05
    assert _by_metric(gate.check(e, "*samples_per_s*")) == {"samples_per_s": "regression"}  # higher is better


def test_a_newest_point_within_noise_passes(tmp_path: Path) -> None:
    e = _db(tmp_path, [2.0] * 10 + [2.02])
    rep = gate.check(e)
    assert set(_by_metric(rep).values()) == {"ok"} and rep.exit_code == 0


def test_a_small_significant_change_under_the_threshold_passes(tmp_path: Path) -> None:
    e = _db(tmp_path, [2.0] * 10 + [2.06], noise=0.001)
    assert _by_metric(gate.check(e, "*samples*", max_regression=0.05)) == {"samples_per_s": "ok"}
    assert _by_metric(gate.check(e, "*samples*", max_regression=0.02)) == {"samples_per_s": "regression"}


def test_a_faster_newest_point_is_an_improvement_exit_0(tmp_path: Path) -> None:
    e = _db(tmp_path, [2.0] * 10 + [1.7])
    rep = gate.check(e, "*p50*")
    assert _by_metric(rep) == {"p50_ms": "improvement"} and rep.exit_code == 0
    assert rep.rows[0].pvalue < 0.05  # the improvement's own p (issue 37 item 4: it printed the "worse" test's 0.999)


def test_an_unacknowledged_step_stands_until_acked(tmp_path: Path) -> None:
    e = _db(tmp_path, [2.0] * 10 + [2.4] * 5)
    rep = gate.check(e, "*p50*")
    (row,) = rep.rows
    assert row.verdict == "regression" and "not acknowledged" in row.reason and rep.exit_code == 3
    (s,) = all_series(e, "*p50*")
    ack(e, s, str(row.since.id), "new pre-processing, intended")
    after = gate.check(e, "*p50*")
    assert _by_metric(after) == {"p50_ms": "ok"} and after.exit_code == 0
    assert after.rows[0].baseline_n == 4  # the points from the acked one on, the newest left out


def test_an_acked_newest_point_is_acknowledged(tmp_path: Path) -> None:
    e = _db(tmp_path, [2.0] * 10 + [2.5])
    (s,) = all_series(e, "*p50*")
    ack(e, s, "latest", "bigger model")
    assert _by_metric(gate.check(e, "*p50*")) == {"p50_ms": "acknowledged"}


def test_a_runtime_major_change_at_the_newest_point_is_an_environment_change(tmp_path: Path) -> None:
    e = store.open_store(str(tmp_path / "h.db"))
    add(e, [(str(i), make(2.0, seed=i, created_at=f"2026-12-01T00:{i:02d}:00+00:00")) for i in range(10)])
    add(e, [("new", make(3.0, seed=99, created_at="2026-12-01T01:00:00+00:00", runtime="2.0.0"))])
    rep = gate.check(e, "*p50*")
    assert _by_metric(rep) == {"p50_ms": "environment"} and rep.exit_code == 0
    assert "onnxruntime 2" in rep.rows[0].reason


def test_an_invalid_newest_point_fails_the_gate_unless_allowed(tmp_path: Path) -> None:
    """Issue 37 item 1: a run 1.5x slower that measured INVALID had passed silently (the previous point judged)."""
    e = _db(tmp_path, [2.0] * 10)
    add(e, [("bad", make(3.0, seed=50, created_at="2026-12-01T02:00:00+00:00", valid=False))])
    rep = gate.check(e, "*p50*")
    assert _by_metric(rep) == {"p50_ms": "invalid"} and rep.exit_code == 3
    (row,) = rep.rows
    assert row.newest.median > 2.5 and row.reason.startswith(f"the newest point {row.newest.id} (") and \
        "measured INVALID: nothing new was judged" in row.reason
    allowed = gate.check(e, "*p50*", allow_invalid=True)
    assert _by_metric(allowed) == {"p50_ms": "ok"} and allowed.exit_code == 0
    assert allowed.rows[0].newest.median < 2.5 and f"INVALID point(s) {row.newest.id} passed over" in allowed.rows[0].reason
    add(e, [("good", make(2.0, seed=51, created_at="2026-12-01T03:00:00+00:00"))])  # a VALID point after it: judged
    assert _by_metric(gate.check(e, "*p50*")) == {"p50_ms": "ok"}


def test_no_matching_series_gives_no_rows(tmp_path: Path) -> None:
    e = _db(tmp_path, [2.0] * 3)
    assert gate.check(e, "nothing*").rows == []
    assert _by_metric(gate.check(store.open_store(str(tmp_path / "h.db")), "*p50*")) == {"p50_ms": "ok"}


def _points(levels: np.ndarray, rng, runs: int = 5, noise: float = 0.04) -> list[Point]:
    """Points of ``runs`` per-run values each at ``noise`` between-run noise (relative), median of the runs."""
    out = []
    for i, lv in enumerate(levels):
        values = lv * (1 + noise * rng.standard_normal(runs))
        out.append(Point(id=i, time=T0 + _dt.timedelta(hours=i), commit=None, branch=None, values=values.tolist(),
                         median=float(np.median(values)), lo=None, hi=None, runtime="onnxruntime 1.20.0",
                         env="m|onnxruntime 1", verdict="VALID", ack=None))
    return out


SERIES = Series(1, "k", "s", "p50_ms", "lower", "m", {})


@pytest.mark.parametrize("noise", [0.03, 0.05])
def test_catch_rate_and_false_alarms(noise: float) -> None:
    """Issue 28 item 6's gate targets: a 10 % slowdown caught on the first point after it in >= 80 % of series,
    <= 5 % false alarms on stationary series (21 points of 5 runs each at 3 or 5 % between-run noise; seeded)."""
    rng = np.random.default_rng(2026)
    caught = alarms = 0
    n = 200
    for _ in range(n):
        levels = np.full(21, 100.0)
        alarms += gate.judge(SERIES, _points(levels, rng, noise=noise)).verdict == "regression"
        levels[-1] = 110.0
        caught += gate.judge(SERIES, _points(levels, rng, noise=noise)).verdict == "regression"
    assert caught / n >= 0.80
    assert alarms / n <= 0.05


def test_a_newest_point_whose_own_interval_holds_the_baseline_is_not_a_regression() -> None:
    rng = np.random.default_rng(4)
    pts = _points(np.r_[np.full(10, 100.0), 112.0], rng, noise=0.01)
    assert gate.judge(SERIES, pts).verdict == "regression"  # must say yes: no interval on the newest point
    wide = replace(pts[-1], lo=95.0, hi=130.0)
    row = gate.judge(SERIES, [*pts[:-1], wide])  # 12 % worse, yet its own interval holds the baseline: no call
    assert row.verdict == "inconclusive" and "inside the newest point's own 95 % interval [95, 130]" in row.reason
    near = replace(pts[-1], median=102.0, lo=95.0, hi=130.0)
    assert gate.judge(SERIES, [*pts[:-1], near]).verdict == "ok"  # 2 % worse: under the 5 % threshold


def test_a_tiny_significant_step_is_no_change_point_under_the_minimum_effect() -> None:
    rng = np.random.default_rng(8)
    pts = _points(np.r_[np.full(10, 100.0), np.full(5, 100.5)], rng, noise=0.0005)
    from inferperf.history.query import analyse

    assert [c.index for c in analyse(pts, min_effect=0.0)] == [10]  # must say yes without a minimum effect
    assert analyse(pts) == []  # 0.5 % < the 2 % default
    assert gate.judge(SERIES, pts).baseline_n == 14


def test_the_segment_is_found_without_the_newest_point() -> None:
    """A step down then a newest point far above: the t-test over [step .. newest] would be too wide to confirm
    the step, so the baseline would mix both levels; judged against the points before it, the newest is caught
    against the segment since the step alone."""
    x = np.r_[np.full(9, 1.1505), np.full(6, 1.0005), 1.30]
    rng = np.random.default_rng(1)
    pts = _points(x, rng, noise=0.0005)
    row = gate.judge(SERIES, pts)
    assert row.verdict == "regression" and row.baseline_n == 6
    assert row.baseline_mean == pytest.approx(1.0005, rel=1e-3)


def test_one_slow_newest_point_does_not_erase_the_change_before_it(tmp_path: Path) -> None:
    """Issue 37 item 2: on examples/history (a -13 % change at run 11) plus its slowdown run, ls/show/export (what
    report draws) and compare's history baseline detected over every point: the slow newest point widened the last
    segment and the change at point 32 vanished. They now read the series as the gate does, the newest apart."""
    from inferperf.history.export import export_json
    from inferperf.history.query import established, matching, usable
    from inferperf.results.io import load

    ex = Path(__file__).resolve().parents[2] / "examples" / "history"
    e = store.open_store(str(tmp_path / "h.db"))
    for folder in ("results", "slowdown"):
        add(e, [(str(f), load(f)) for f in sorted((ex / folder).glob("*.json"))])
    (s, pts), = [(s, p) for s, p in matching(e, "*p50_ms*")]
    use = usable(pts)
    (cp,) = [c for c in established(use) if c.kind == "change"]
    assert use[cp.index].id == 32 and cp.rel_change == pytest.approx(-0.13, abs=0.005)
    doc = next(d for d in export_json(e, "*p50_ms*")["series"])
    assert [c["point"] for c in doc["change_points"] if c["kind"] == "change"] == [32]
    assert doc["newest_apart"] == use[-1].id and use[-1].median > 1.25
    assert _by_metric(gate.check(e, "*p50_ms*")) == {"p50_ms": "regression"}  # and the slow newest point fails
