"""Report draws load and serve Results (issue 13 item 8): synthetic steps on the fake clock through loadgen.result."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferperf.clock import FakeClock
from inferperf.loadgen.driver import Closed, Open
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.result import step_result
from inferperf.loadgen.transport import SimulatedServer
from inferperf.policy import arrivals
from inferperf.report.build import ReportOptions, build
from inferperf.report.render import render_html, render_markdown
from inferperf.results.io import save
from tests.unit.test_loadgen_driver import step, target


def closed(c: int):
    clock = FakeClock()
    s = step(clock, SimulatedServer(clock, service_s=0.020, slots=4), Closed(c), duration_s=3.0)
    return step_result(s, target(), LoadConfig(concurrency=[c]), ["inferperf", "load"])


def opened(rate: float, freeze: bool = False):
    clock = FakeClock()
    server = SimulatedServer(clock, service_s=0.001, slots=1, freezes=[(2.0, 2.5)] if freeze else [])
    s = step(clock, server, Open(arrivals.constant(rate), max_connections=1), duration_s=4.0)
    return step_result(s, target(), LoadConfig(request_rate=[rate]), ["inferperf", "load"])


def charts_of(tmp: Path, results, slo=None):
    for i, r in enumerate(results):
        save(r, tmp / f"r{i}.json")
    rep = build([tmp], ReportOptions(slo_p99_ms=slo))
    return rep, {c.id: c for c in rep.charts}


def test_closed_loop_throughput_x_is_concurrency_and_y_each_results_throughput(tmp_path: Path) -> None:
    rs = [closed(c) for c in (1, 2, 4, 8)]
    rep, ch = charts_of(tmp_path, rs, slo=30.0)
    tr = ch["load-tput-0"].figure["data"][0]
    assert tr["x"] == [1, 2, 4, 8]
    assert tr["y"] == pytest.approx([r.metrics.throughput.queries_per_s for r in rs])
    assert tr["y"][2] == pytest.approx(200, rel=0.01)  # 4 slots of 20 ms
    lat = ch["load-lat-0"].figure["data"]
    assert [t["name"] for t in lat[:3]] == ["p50", "p90", "p99"]
    assert lat[2]["y"] == pytest.approx([r.metrics.latency_ms.p99 for r in rs])
    assert "load-err-0" not in ch and "load-tail-0" not in ch  # no errors: no empty error chart; closed loop: no tail
    assert "No request failed in any of the 4 step(s)" in ch["load-lat-0"].caption
    texts = " ".join(s["text"] for s in rep.summary)
    assert "knee at 4" in texts and "highest load meeting p99 <= 30 ms: 4" in texts
    html, md = render_html(rep), render_markdown(rep)
    assert "load-tput-0" in html and "throughput vs concurrency" in md


def test_open_loop_draws_achieved_vs_target_and_corrected_vs_uncorrected(tmp_path: Path) -> None:
    rs = [opened(50), opened(100, freeze=True)]
    _, ch = charts_of(tmp_path, rs)
    tput = ch["load-tput-0"].figure["data"]
    assert tput[0]["x"] == [50, 100] and tput[1]["y"] == [50, 100]
    tail = ch["load-tail-0"].figure["data"]
    assert tail[0]["y"][1] > 300 > tail[1]["y"][1]  # corrected p99 shows the freeze; uncorrected hides it


def test_groups_never_mix_workloads_and_invalid_steps_are_marked(tmp_path: Path) -> None:
    bad = closed(2)
    bad.validity.valid, bad.validity.reasons = False, ["generator-bound: client CPU 95 %"]
    _, ch = charts_of(tmp_path, [closed(1), bad, opened(20)])
    assert {"load-tput-0", "load-tput-1"} <= set(ch)
    inv = [t for t in ch["load-tput-0"].figure["data"] if t["name"] == "INVALID step"]
    assert inv and inv[0]["x"] == [2] and "INVALID steps: 2 (generator-bound" in ch["load-tput-0"].caption


def test_server_split_serve_histogram_locust_mark_and_soak_timeline(tmp_path: Path) -> None:
    a = closed(2)
    a.metrics.server = {"latency_split_ms": {"queue_ms": 1.0, "compute_ms": 15.0, "rest_ms": 4.0}}
    loc = closed(4)
    loc.run["imported"] = "locust"
    soak = closed(1)
    soak.metrics.client["soak"] = {"verdict": "leak", "rss": {"slope_bytes_per_hour": 5 * 2**20, "reason": "grows"},
                                   "intervals": [{"t_s": t, "p99_ms": 20.0, "queries_per_s": 50.0,
                                                  "rss_bytes": 2**20 * (100 + t)} for t in (10, 20, 30)]}  # fmt: skip
    srv = closed(1)
    srv.kind = "serve"
    q = {"min": 0.1, "p50": 1.0, "p90": 2.0, "p99": 3.0, "mean": 1.2}
    srv.metrics.server = {"batch_sizes": {"1": 5, "4": 7}, "queue_ms": q, "compute_ms": q, "execution_count": 12}
    _, ch = charts_of(tmp_path, [a, loc, soak, srv])
    assert [t["y"][0] for t in ch["load-split-0"].figure["data"]] == [1.0, 15.0, 4.0]
    assert "summary-only" in ch["load-tput-0"].caption
    assert ch["serve-batch-0"].figure["data"][0]["x"] == [1, 4] and ch["serve-batch-0"].figure["data"][0]["y"] == [5, 7]
    assert "serve-dist-0" in ch
    s = ch["load-soak-0"]
    assert "LEAK" in s.title and s.figure["data"][2]["y"] == pytest.approx([110, 120, 130])
    assert s.figure["data"][0]["x"] == [10, 20, 30]


def test_a_real_locust_import_is_drawn_summary_only_with_locusts_percentiles(tmp_path: Path) -> None:
    from inferperf.loadgen.locust_import import locust_results

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "locust" / "tiny_binary"
    rs = locust_results(fix, command=["locust"])
    rep, ch = charts_of(tmp_path, rs + [closed(2)])
    loc = [c for c in rep.charts if c.id.startswith("load-lat-") and "summary-only" in c.caption]
    assert loc, [c.caption for c in rep.charts]
    assert loc[0].figure["data"][2]["y"] == pytest.approx([r.metrics.latency_ms.p99 for r in rs])
    assert not any(c.id.startswith("load-tail-") for c in rep.charts)  # no raw samples: no corrected/uncorrected
    assert "summary-only" in render_markdown(rep)


def test_the_soak_caption_says_the_slope_once_and_serve_charts_are_told_apart(tmp_path: Path) -> None:
    """The leak verdict's reason starts with the slope; the caption printed it twice ('RSS slope 450.00 MiB/h
    450.00 MiB/h (threshold ...)'). Two serve Results of one model had the same chart titles (the model file's
    name), and their server-time boxes all sat at x = 0 over each other."""
    from inferperf.stats.leak import leak_verdict

    soak = closed(1)
    rss = leak_verdict([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [2**20 * (100 + 5 * t) for t in range(6)])
    soak.metrics.client["soak"] = {"verdict": "leak" if rss["leak"] else "no leak", "rss": rss,
                                   "intervals": [{"t_s": t, "p99_ms": 20.0, "queries_per_s": 50.0,
                                                  "rss_bytes": 2**20 * (100 + t)} for t in (1, 2, 3)]}  # fmt: skip
    q = {"min": 0.1, "p50": 1.0, "p90": 2.0, "p99": 3.0, "mean": 1.2}
    serves = []
    for c in (1, 2):  # two servers of one model (not copies: their runs differ)
        srv = closed(c)
        srv.kind = "serve"
        srv.metrics.server = {"batch_sizes": {"1": 5}, "queue_ms": q, "compute_ms": q, "request_ms": q,
                              "execution_count": 5}
        serves.append(srv)
    _, ch = charts_of(tmp_path, [soak, *serves])
    cap = ch["load-soak-0"].caption
    slope = rss["reason"].split(" ", 1)[0]
    assert cap.count(slope) == 1 and cap.startswith("Leak verdict: "), cap
    titles = [ch[f"serve-{k}-{i}"].figure["layout"]["title"]["text"] for k in ("batch", "dist") for i in (0, 1)]
    assert len(set(titles)) == 4, titles
    assert ch["serve-batch-0"].figure["layout"]["xaxis"]["type"] == "category"  # one size: no 0.6 .. 1.4 axis
    boxes = ch["serve-dist-0"].figure["data"]
    assert [b["x"] for b in boxes] == [["queue"], ["compute"], ["request"]]


def test_a_doubling_ladder_is_drawn_on_a_log_axis_and_its_bars_as_categories(tmp_path: Path) -> None:
    """A stress ladder 1, 2, 4 ... 64 on a linear axis put the ticks 1, 2 and 4 on top of each other and made
    the server-split bars slivers; it is drawn on a log axis (bars by category). Must-say-no: 1, 2, 4 stays linear."""
    ladder = []
    for c in (1, 2, 4, 8, 16, 32, 64):
        r = closed(c)
        r.metrics.server = {"latency_split_ms": {"queue_ms": 1.0, "compute_ms": 2.0, "rest_ms": 0.5}}
        ladder.append(r)
    _, ch = charts_of(tmp_path / "ladder", ladder)
    assert ch["load-tput-0"].figure["layout"]["xaxis"]["type"] == "log"
    assert ch["load-lat-0"].figure["layout"]["xaxis"]["type"] == "log"
    assert ch["load-split-0"].figure["layout"]["xaxis"]["type"] == "category"
    _, few = charts_of(tmp_path / "few", [closed(c) for c in (1, 2, 4)])
    assert "type" not in few["load-tput-0"].figure["layout"]["xaxis"]


def test_a_serve_rows_batch_is_the_measured_rows_per_call_not_its_limit(tmp_path: Path) -> None:
    """The raw-data row of a serve Result showed batch 4 (its max_batch_size) and 1 stream, though every model
    call ran one row and a server has clients, not streams: batch is inference / execution count."""
    srv = closed(1)
    srv.kind = "serve"
    srv.config.workload.batch_size = 4  # what serve stores: max(1, max_batch_size)
    srv.metrics.server = {"batch_sizes": {"1": 4, "4": 2}, "inference_count": 12, "execution_count": 6}
    rep, _ = charts_of(tmp_path, [srv])
    (row,) = [x for x in rep.rows if x["kind"] == "serve"]
    assert row["batch"] == 2.0 and row["concurrency"] is None


def test_a_step_with_failures_gets_its_error_chart(tmp_path: Path) -> None:
    """Must-say-yes beside the no-errors case above: failures draw the error-rate chart with their share."""
    ok, bad = closed(1), closed(2)
    bad.metrics.errors.count = bad.metrics.latency_ms.count  # half the step's requests failed
    _, ch = charts_of(tmp_path, [ok, bad])
    assert ch["load-err-0"].figure["data"][0]["y"] == [0.0, 50.0]


def test_a_step_where_nothing_completed_shows_no_latency_its_errors_and_target_lost(tmp_path: Path) -> None:
    """Issue 37 item 13: a step where no request completed was drawn at 0 ms, 'No request failed' stood beside its
    connect errors, and a lost target was called a noisy machine."""
    clock = FakeClock()
    dead = step(clock, SimulatedServer(clock, die_at_s=0.0), Closed(2), duration_s=5.0)
    rs = [closed(1), step_result(dead, target(), LoadConfig(concurrency=[2]), ["inferperf", "load"])]
    assert rs[1].metrics.latency_ms.count == 0 and rs[1].metrics.errors.count > 0
    rep, ch = charts_of(tmp_path, rs)
    lat = ch["load-lat-0"].figure["data"]
    pct = [t for t in lat if t["name"] in ("p50", "p90", "p99")]
    assert len(pct) == 3 and all(t["y"][1] is None for t in pct)  # no latency, not 0 ms
    assert lat[0]["y"][0] is not None
    assert "load-err-0" in ch and "No request failed" not in ch["load-lat-0"].caption
    warn = " ".join(w for m in rep.environment for w in m["warnings"])
    assert "target lost: 1 load step(s)" in warn and "noisy machine" not in warn
