"""Arrival schedules (policy/arrivals.py; files and flags: measure/arrivals.py): exact offsets, seeded Poisson, traces,
worker split."""

from __future__ import annotations

import numpy as np
import pytest

from inferperf.errors import UsageError
from inferperf.measure.arrivals import from_arrival, load_trace
from inferperf.policy import arrivals


def take(schedule: arrivals.Schedule, n: int) -> list[int | None]:
    return [schedule.next_offset_ns() for _ in range(n)]


def test_constant_rate_spaces_sends_exactly() -> None:
    assert take(arrivals.constant(3), 4) == [0, 333_333_333, 666_666_667, 1_000_000_000]
    assert arrivals.constant(100).describe() == {"arrival": "constant", "rate_per_s": 100.0}


@pytest.mark.parametrize("rate", [0, -1, float("nan"), float("inf")])
def test_a_rate_that_is_not_positive_is_a_usage_error(rate: float) -> None:
    with pytest.raises(UsageError, match="positive"):
        arrivals.constant(rate)


def test_poisson_is_seeded_and_has_the_asked_mean_rate() -> None:
    a = take(arrivals.poisson(200, seed=7), 20_000)
    assert a == take(arrivals.poisson(200, seed=7), 20_000)
    assert a != take(arrivals.poisson(200, seed=8), 20_000)
    gaps = np.diff(np.asarray([0, *a], dtype=np.int64))
    assert (gaps >= 0).all()
    assert abs(gaps.mean() / 5e6 - 1) < 0.03  # mean gap 5 ms within 3 % over 20k gaps
    assert abs(gaps.std() / gaps.mean() - 1) < 0.05  # exponential: CV 1


def test_trace_replays_exactly_and_ends() -> None:
    offs = [0, 10, 10, 5_000_000, 1_000_000_000]
    assert take(arrivals.trace(offs), 6) == [*offs, None]
    assert take(arrivals.trace(offs, speed=2), 6) == [0, 5, 5, 2_500_000, 500_000_000, None]


@pytest.mark.parametrize("offsets,match", [([0, -1], "negative"), ([5, 3], "goes back"), ([], "at least one")])
def test_bad_traces_are_usage_errors(offsets: list[int], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        arrivals.trace(offsets)


def test_load_trace_reads_units_comments_and_refuses_bad_files(tmp_path) -> None:  # noqa: ANN001
    f = tmp_path / "t.txt"
    f.write_text("# recorded\n0\n250ms\n\n500000us  # a comment\n1.5\n2000000000ns\n")
    assert load_trace(f).tolist() == [0, 250_000_000, 500_000_000, 1_500_000_000, 2_000_000_000]
    f.write_text("0\n1\n0.5\n")
    with pytest.raises(UsageError, match="line|offset 3 goes back"):
        load_trace(f)
    f.write_text("0\nsoon\n")
    with pytest.raises(UsageError, match=":2:"):
        load_trace(f)
    with pytest.raises(UsageError, match="not found"):
        load_trace(tmp_path / "missing.txt")


def test_strided_workers_together_send_the_global_schedule_exactly() -> None:
    whole = take(arrivals.poisson(50, seed=3), 30)
    parts = [take(arrivals.strided(arrivals.poisson(50, seed=3), k, 3), 10) for k in range(3)]
    assert sorted(x for p in parts for x in p) == sorted(whole)  # type: ignore[type-var]
    assert parts[1] == whole[1::3]
    t = arrivals.strided(arrivals.trace([0, 1, 2, 3, 4]), 1, 2)
    assert take(t, 3) == [1, 3, None]


def test_from_arrival_builds_each_kind(tmp_path) -> None:  # noqa: ANN001
    assert from_arrival("constant", 10).describe()["rate_per_s"] == 10
    assert from_arrival("poisson", 10, seed=4).describe()["seed"] == 4
    (tmp_path / "t").write_text("0\n1\n")
    tr = from_arrival(f"trace:{tmp_path / 't'}", None, trace_speed=2)
    assert take(tr, 3) == [0, 500_000_000, None]
    with pytest.raises(UsageError, match="needs --request-rate"):
        from_arrival("poisson", None)
    mm = from_arrival("mmpp", 30, seed=2).describe()  # the planner's bursty arrivals (issue 36 item 6)
    assert mm == arrivals.bursty(30, seed=2).describe() and mm["rate_per_s"] == pytest.approx(30)
    assert (mm["rate_low_per_s"], mm["rate_high_per_s"], mm["mean_low_s"]) == pytest.approx((20, 40, 1.0))
