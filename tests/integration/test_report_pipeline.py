"""Pipeline Results in the report: the per-stage table with the bottleneck highlighted, the stage timeline and
queue occupancy charts, the summary line; HTML and Markdown (issue 17 item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferperf.pipeline.engine import StopRule
from inferperf.pipeline.run import PipelineOptions, run_pipeline
from inferperf.pipeline.spec import parse
from inferperf.report.build import build
from inferperf.report.render import render_markdown, write
from inferperf.results.io import save

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    doc = {"name": "toy", "source": {"generator": "pipeline_stages:numbers"},
           "stages": [{"name": "fast", "function": "pipeline_stages:sleep_2ms"},
                      {"name": "slow", "function": "pipeline_stages:sleep_10ms"}]}
    rs = run_pipeline(parse(doc, "toy", HERE), PipelineOptions(
        concurrency=4, warmup=2, standalone_s=0.2, queue_sizes=[2],
        stop=StopRule(min_items=20, min_duration_s=0, max_duration_s=10, drain_timeout_s=10)))
    out = tmp_path_factory.mktemp("pipe")
    save(rs[0], out / "toy.json")
    save(rs[1], out / "toy.queues-2.json")
    return out


def test_report_has_the_stage_table_and_charts(results, tmp_path):
    rep = build([results])
    [block] = rep.pipelines  # the queue-size run is a row of its main run's table, not a second table
    assert block["bottleneck"] == "slow"
    rows = {x["stage"]: x for x in block["rows"]}
    assert rows["slow"]["bottleneck"] and not rows["fast"]["bottleneck"]
    assert [x["queues"] for x in block["queue_sizes"]] == ["as configured", "2"]
    ids = {c.id for c in rep.charts}
    assert {"pipeline-0-timeline", "pipeline-0-queues"} <= ids
    timeline = next(c for c in rep.charts if c.id == "pipeline-0-timeline")
    assert {t["name"] for t in timeline.figure["data"]} == {"fast", "slow"}
    assert all(len(t["base"]) == len(t["x"]) > 0 and min(t["x"]) > 0 for t in timeline.figure["data"])
    assert any(s["kind"] == "pipeline" and "bottleneck 'slow'" in s["text"] for s in rep.summary)
    md = render_markdown(rep)
    assert "## Pipeline stages" in md and "**slow** (bottleneck)" in md
    html = write(rep, tmp_path / "r.html").read_text()
    assert "Pipeline stages" in html and "slow (bottleneck)" in html and "pipeline-0-queues" in html
    labels = [r["label"] for r in rep.rows]
    assert "pipeline toy, 4 in flight" in labels and "pipeline toy, 4 in flight, queues 2" in labels
    assert all(r["reproduce"].startswith("inferperf pipeline") for r in rep.rows)


def test_pipeline_report_draws_in_a_browser(results, tmp_path):
    import re

    from tests.integration.test_report_browser import _dump

    rep = build([results])
    proc = _dump(write(rep, tmp_path / "report.html"))
    m = re.search(r'<[^>]*id="report-status"[^>]*>', proc.stdout)
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(0)))
    assert attrs["done"] == "yes" and attrs["errors"] == ""
    assert attrs["charts-drawn"] == attrs["charts-expected"] == str(len(rep.charts))
