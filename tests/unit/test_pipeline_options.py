"""pipeline's options refuse contradictions through the library call itself (issue 38 item 1): the command only
maps its flags onto :class:`PipelineOptions`, so a caller of :func:`run_pipeline` gets the same one-line refusals,
before any stage is built; :func:`gate_message` decides exit 3. (The pipeline file's own checks:
test_pipeline_spec.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inferperf.errors import UsageError
from inferperf.pipeline.options import PipelineOptions, gate_message
from inferperf.pipeline.run import run_pipeline
from inferperf.pipeline.spec import parse
from inferperf.policy.pipeline import StopRule

#: never imported: every refusal comes before the source or a stage is resolved
SPEC = parse({"source": {"generator": "no_such_module:items"}, "stages": [{"name": "a", "function": "no_such_module:f"}]})


@pytest.mark.parametrize(("kw", "words"), [
    ({"queue_policy": "drop"}, "^--queue-policy 'drop': use block or reject"),
    ({"stop": StopRule(min_items=0)}, "^--items 0: must be >= 1"),
    ({"pool_size": 0}, "^--pool-size 0: must be >= 1"),
    ({"concurrency": 0}, "^--concurrency 0: must be >= 1"),
    ({"warmup": -1}, "^--warmup -1: must be >= 0 items"),
    ({"arrival": "poisson"}, "^--arrival poisson needs --request-rate"),
    ({"stop": StopRule(min_duration_s=-1.0)}, "^--duration-s -1: must be >= 0 seconds"),
    ({"stop": StopRule(max_duration_s=0.0)}, "^--max-duration-s 0: must be > 0 seconds"),
    ({"stop": StopRule(drain_timeout_s=0.0)}, "^--drain-timeout-s 0: must be > 0 seconds"),
    ({"standalone_s": 0.0}, "^--standalone-s 0: must be > 0 seconds"),
    ({"concurrency": 2, "request_rate": 5.0}, "--concurrency and --request-rate contradict"),
])
def test_run_pipeline_refuses(kw: dict, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        run_pipeline(SPEC, PipelineOptions(**kw))


def test_a_good_spec_passes_check() -> None:
    """The cap is raised to the minimum duration (``--duration-s 5 --max-duration-s 1`` measures 5 s)."""
    opts = PipelineOptions(request_rate=20.0, arrival="poisson", queue_policy="reject",
                           stop=StopRule(10, 5.0, 1.0, 2.0)).check()
    assert opts.stop == StopRule(10, 5.0, 5.0, 2.0)
    assert PipelineOptions().check().stop == StopRule()


def test_gate_message_only_with_fail_on_invalid() -> None:
    bad = SimpleNamespace(validity=SimpleNamespace(valid=False, reasons=["too few items"]))
    good = SimpleNamespace(validity=SimpleNamespace(valid=True, reasons=[]))
    assert gate_message(PipelineOptions(), [bad]) is None
    assert gate_message(PipelineOptions(fail_on_invalid=True), [good, bad]) is None  # the main Result decides
    assert gate_message(PipelineOptions(fail_on_invalid=True), [bad]) == (
        "result is INVALID (too few items) and --fail-on-invalid is set")
