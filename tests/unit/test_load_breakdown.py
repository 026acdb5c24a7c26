"""Where a served request's time went (loadgen/breakdown.py): the parts add up to the client's mean, each part is
the difference of the right counters, and a server with only Triton's statistics gets perf_analyzer's overhead."""

from __future__ import annotations

import numpy as np
import pytest

from inferperf.loadgen.breakdown import PARTS, breakdown, breakdown_line, client_parts, parse_server_times
from inferperf.loadgen.result import server_block

MS = 1_000_000

EXPOSITION = """# HELP inferperf_request_duration_seconds x
# TYPE inferperf_request_duration_seconds histogram
inferperf_request_duration_seconds_bucket{le="+Inf",model="m"} 10.0
inferperf_request_duration_seconds_count{model="m"} 10.0
inferperf_request_duration_seconds_sum{model="m"} 0.05
inferperf_request_duration_seconds_count{model="other"} 99.0
inferperf_request_duration_seconds_sum{model="other"} 9.0
# HELP inferperf_http_exchange_duration_seconds x
# TYPE inferperf_http_exchange_duration_seconds histogram
# HELP unrelated_total x
# TYPE unrelated_total counter
unrelated_total 3.0
"""


def test_server_times_are_read_per_model_and_a_family_with_nothing_observed_is_zero() -> None:
    t = parse_server_times(EXPOSITION, "m")
    assert t == {"request": (10, 50 * MS), "exchange": (0, 0)}  # decode / encode not exported: left out
    assert parse_server_times("unrelated_total 3\n", "m") == {}


def _stats(success: tuple[int, int], queue: int, compute_infer: int, n: int) -> dict:
    zero = {"count": 0, "ns": 0}
    return {"inference_stats": {"success": {"count": success[0], "ns": success[1]}, "fail": zero,
                                "queue": {"count": n, "ns": queue}, "compute_input": {"count": n, "ns": 0},
                                "compute_infer": {"count": n, "ns": compute_infer},
                                "compute_output": {"count": n, "ns": 0}},
            "batch_stats": [], "execution_count": n, "inference_count": n}  # fmt: skip


def test_parts_are_the_counters_differences_and_add_up_to_the_client_mean() -> None:
    """100 requests over the step: request 4 ms, decode 0.5, encode 0.25, exchange 4.75, queue 1, call 2 (means);
    the client saw 6 ms with 0.1 ms send lag and 0.2 ms reading the answer."""
    before = {**_stats((10, 10 * 3 * MS), 10 * MS, 20 * MS, 10),
              "server_times": {"request": (10, 40 * MS), "decode": (10, 5 * MS), "encode": (10, 2 * MS),
                               "exchange": (10, 50 * MS)}}  # fmt: skip
    after = {**_stats((110, 110 * 3 * MS), 110 * MS, 220 * MS, 110),
             "server_times": {"request": (110, 440 * MS), "decode": (110, 55 * MS), "encode": (110, 27 * MS),
                              "exchange": (110, 525 * MS)}}  # fmt: skip
    sched = np.arange(5) * 10 * MS
    client = client_parts(sched, sched + MS // 10, sched + 6 * MS, sched + 6 * MS - MS // 5)
    assert client == pytest.approx({"client_ms": 6.0, "client_send_ms": 0.1, "client_read_ms": 0.2})
    b = server_block(before, after, 6.0, client)["breakdown_ms"]
    assert b["sources"] == ["triton-statistics", "inferperf-metrics"]
    assert b["queue_ms"] == pytest.approx(1.0) and b["model_call_ms"] == pytest.approx(2.0)
    assert b["decode_ms"] == pytest.approx(0.5) and b["encode_ms"] == pytest.approx(0.25)
    assert b["server_http_ms"] == pytest.approx(0.75)  # exchange 4.75 - request 4
    assert b["server_other_ms"] == pytest.approx(4 - 0.5 - 1 - 2 - 0.25)
    assert b["remainder_ms"] == pytest.approx(6 - 0.1 - 4.75 - 0.2)
    assert sum(b[p + "_ms"] for p in PARTS) == pytest.approx(b["client_ms"])
    line = breakdown_line(b)
    assert line.startswith("time per request (mean ms of 6.000): send 0.100, server HTTP 0.750, decode 0.500")
    assert line.endswith("read 0.200, remainder 0.950")


def test_a_server_with_only_triton_statistics_gets_perf_analyzers_overhead() -> None:
    """No inferperf metrics: server other = success - queue - compute (perf_analyzer's "overhead"), and the
    remainder is the rest of the client's mean; no decode, encode or server HTTP part is made up."""
    before, after = _stats((0, 0), 0, 0, 0), _stats((50, 50 * 5 * MS), 50 * MS, 50 * 3 * MS, 50)
    b = server_block(before, after, 7.0, {"client_ms": 7.0, "client_send_ms": 0.0, "client_read_ms": None})
    split = b["breakdown_ms"]
    assert b["request_total_ms"] == pytest.approx(5.0)
    assert split["sources"] == ["triton-statistics"]
    assert split["server_other_ms"] == pytest.approx(5 - 1 - 3) and split["remainder_ms"] == pytest.approx(2.0)
    assert not {"decode_ms", "encode_ms", "server_http_ms", "client_read_ms"} & set(split)


def test_no_success_no_breakdown() -> None:
    empty = np.zeros(0, np.int64)
    assert client_parts(empty, empty, empty, None)["client_ms"] is None
    assert breakdown({"queue_ms": 0, "compute_ms": 0}, client_parts(empty, empty, empty, None), None, None) is None


def test_the_report_stacks_the_parts_in_a_requests_order_and_keeps_the_old_split_for_old_results() -> None:
    """One bar per step, a trace per part in the order the Result holds them (a request's order); a Result from
    before the breakdown keeps its queue / compute / rest split."""
    from pathlib import Path

    from inferperf.report.load import _split_chart
    from inferperf.results.io import load as load_result

    old = load_result(Path("tests/fixtures/report/all/load-closed/tiny-cnn-b8c0df235b9af96f-20261202T175841.json"))
    chart = _split_chart(0, "tiny-cnn", [old], {})
    assert [t["name"] for t in chart.figure["data"]] == ["queue", "compute", "rest"]
    new = old.model_copy(deep=True)
    new.metrics.server["breakdown_ms"] = {"client_send_ms": 0.1, "server_http_ms": 0.2, "decode_ms": 0.3,
                                          "queue_ms": 0.4, "model_call_ms": 1.0, "encode_ms": 0.1,
                                          "server_other_ms": 0.2, "client_read_ms": 0.05, "remainder_ms": -0.05,
                                          "client_ms": 2.3, "sources": ["triton-statistics", "inferperf-metrics"]}
    chart = _split_chart(0, "tiny-cnn", [new], {})
    assert [t["name"] for t in chart.figure["data"]] == [p.replace("_", " ") for p in PARTS]
    assert chart.figure["data"][-1]["y"] == [-0.05] and chart.figure["layout"]["barmode"] == "relative"


def test_the_clients_share_is_its_latency_less_the_servers_whole_exchange() -> None:
    from inferperf.loadgen.breakdown import client_share_ms

    b = {"client_send_ms": 0.01, "server_http_ms": 0.1, "decode_ms": 0.2, "queue_ms": 0.3, "model_call_ms": 1.0,
         "encode_ms": 0.05, "server_other_ms": 0.15, "client_read_ms": 0.02, "remainder_ms": 0.07, "client_ms": 1.9}
    assert client_share_ms(b) == pytest.approx(0.01 + 0.02 + 0.07)
    triton_only = {k: v for k, v in b.items() if k not in ("server_http_ms", "decode_ms", "encode_ms")}
    assert client_share_ms(triton_only) is None  # the exchange was not measured: no share to claim
    assert client_share_ms(None) is None
