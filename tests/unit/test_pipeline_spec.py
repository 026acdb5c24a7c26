"""The pipeline file: every bad input is one UsageError naming the field and the fix."""

from __future__ import annotations

import pytest

from inferperf.errors import UsageError
from inferperf.pipeline.run import PipelineOptions, apply_overrides, parse_queue_sizes
from inferperf.pipeline.spec import load, parse


def doc(*stages, **more):
    return {"source": {"generator": "m:gen"}, "stages": list(stages), **more}


def fn(name, **kw):
    return {"name": name, "function": f"m:{name}", **kw}


def test_chain_in_file_order_and_by_after():
    spec = parse(doc(fn("a"), fn("b"), fn("c")))
    assert [s.name for s in spec.stages] == ["a", "b", "c"]
    spec = parse(doc(fn("a"), fn("c", after="b"), fn("b", after="a")))
    assert [s.name for s in spec.stages] == ["a", "b", "c"]


@pytest.mark.parametrize(("stages", "needle"), [
    ([fn("a"), fn("b", after="zz")], "unknown stage 'zz'"),
    ([fn("a", after="b"), fn("b", after="a")], "cycle"),
    ([fn("a", after="a")], "after itself"),
    ([fn("a"), fn("b", after="a"), fn("c", after="a")], "fan-out"),
    ([fn("a"), fn("a")], "used twice"),
    ([{"name": "x"}], "exactly one of 'function"),
    ([{"name": "m", "model": "zoo:tiny-cnn"}], "needs 'input: KEY'"),
    ([fn("a", queue={"size": 0})], "size of 0"),
    ([fn("a", workers=0)], "workers"),
    ([fn("a", executor="gpu")], "executor"),
    ([fn("a", wrokers=2)], "unknown field"),
])
def test_bad_stages_are_one_line(stages, needle):
    with pytest.raises(UsageError) as e:
        parse(doc(*stages))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_bad_source_and_top_level():
    with pytest.raises(UsageError, match="exactly one of 'generator"):
        parse({"source": {}, "stages": [fn("a")]})
    with pytest.raises(UsageError, match="'stages' is empty"):
        parse({"source": {"files": "x"}, "stages": []})
    with pytest.raises(UsageError, match="mapping"):
        parse([1, 2])
    with pytest.raises(UsageError, match="size of 0"):
        parse(doc(fn("a"), queues={"size": 0}))


def test_load_refuses_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        load(tmp_path / "nope.yaml")
    bad = tmp_path / "p.yaml"
    bad.write_text("stages: [\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load(bad)


def test_unbounded_queue_and_overrides():
    spec = parse(doc(fn("a"), fn("b", queue={"size": "unbounded"})))
    assert spec.queue_of(spec.stages[1]).size is None
    out = apply_overrides(spec, PipelineOptions(workers={"b": 3}, executors={"a": "processes"},
                                                queue_sizes_by_stage={"a": 7}, queue_policy="reject"))
    assert out.stages[1].workers == 3 and out.stages[0].executor == "processes"
    assert out.queue_of(out.stages[0]).size == 7 and out.queue_of(out.stages[1]).policy == "reject"
    with pytest.raises(UsageError, match="no stage 'zz'"):
        apply_overrides(spec, PipelineOptions(workers={"zz": 2}))


def test_queue_sizes_list():
    assert parse_queue_sizes("2, recommended,unbounded") == [2, "recommended", "unbounded"]
    for bad in ("0", "-1", "big"):
        with pytest.raises(UsageError):
            parse_queue_sizes(bad)
