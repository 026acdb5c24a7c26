"""A library tune refuses what ``inferperf tune`` refuses, with the CLI's one line (issue 25 item 2).

Each refused combination is given to the library's settings (:class:`~inferperf.tune.objective.Goal`,
:class:`~inferperf.tune.run.TuneSpec`) directly: the refusal comes from their validators, before any trial,
and :func:`inferperf.errors.settings_message` is the line the CLI prints (tests/e2e/test_tune_cli.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from inferperf.config import BenchConfig
from inferperf.errors import UsageError, settings_message
from inferperf.tune.objective import Goal
from inferperf.tune.run import TuneSpec, tune
from inferperf.tune.served import ServedEvaluator
from inferperf.tune.simulate import SurfaceEvaluator
from inferperf.backends.null import LatencySurface
from inferperf.tune.space import TuneSpace
from inferperf.tune.trial import TrialPlan


def _spec(out: Path, **kw: Any) -> TuneSpec:
    args: dict[str, Any] = dict(model="null", base=BenchConfig(backend="null"), space=TuneSpace(concurrency=[1, 2]),
                                goal=Goal("throughput", slo_p99_ms=20.0), plan=TrialPlan(duration_s=1.0), n_trials=12,
                                output=out)
    args.update(kw)
    return TuneSpec(**args)


def _refusal(make: Any) -> str:
    with pytest.raises(ValidationError) as e:
        make()
    line = settings_message(e.value)
    assert "\n" not in line and "Value error" not in line and "pydantic" not in line
    return line


@pytest.mark.parametrize("make,expect", [
    (lambda: Goal("p98"), "--objective 'p98': choose throughput, throughput-per-core or p99"),
    (lambda: Goal("throughput", min_throughput=10.0), "--min-throughput is the constraint of --objective p99"),
    (lambda: Goal("throughput", slo_p99_ms=0.0), "--slo-p99-ms 0: give a p99 bound > 0 ms"),
    (lambda: Goal("p99", min_throughput=-1.0), "--min-throughput -1: give a floor > 0 samples/s"),
])
def test_goal_refuses_what_the_flags_refuse(make: Any, expect: str) -> None:
    assert _refusal(make).startswith(expect)


def test_a_goal_the_cli_accepts_is_accepted() -> None:
    assert Goal("p99", min_throughput=60.0).min_throughput == 60.0
    assert Goal("multi", slo_p99_ms=5.0).directions == ["maximize", "minimize"]


@pytest.mark.parametrize("kw,expect", [
    ({"sampler": "cmaes"}, "--sampler 'cmaes': choose from tpe, gp, random, grid"),
    ({"validate_top": 0}, "--validate-top must be >= 1 and --validation-rounds >= 2"),
    ({"validation_rounds": 1}, "--validate-top must be >= 1 and --validation-rounds >= 2"),
    ({"n_trials": 0, "validate": False}, "--n-trials must be >= 1"),
    ({"n_trials": 9}, "--n-trials 9 leaves no search trial after 9 validation runs ((2 candidates + defaults) x 3"),
    ({"timeout_s": 0.0}, "--timeout-s 0: give seconds > 0"),
    ({"space": TuneSpace()}, "the search space is empty"),
    ({"space": TuneSpace(max_batch_size=[0, 4])}, "are serving axes: add --serve"),
    ({"space": TuneSpace(instance_count=[1, 2])}, "are serving axes: add --serve"),
    ({"serve_base": {"max_queue_delay_us": 100}}, "are serving axes: add --serve"),
    ({"served": True, "space": TuneSpace(concurrency=[2], session_mode=["shared", "per-stream"])},
     "--session-mode is an in-process axis"),
    ({"space": TuneSpace(execution_mode=["fast"])}, "--execution-mode 'fast': unknown value: choose from sequential,"),
    ({"space": TuneSpace(graph_optimization_level=["max"])}, "--graph-optimization-level 'max': unknown value"),
    ({"space": TuneSpace(concurrency=[2], session_mode=["solo"])}, "--session-mode 'solo': unknown value"),
    ({"space": TuneSpace(allocator=["system", "mimalloc"])}, "--allocator 'mimalloc': unknown value: choose from"
                                                             " system, jemalloc, tcmalloc"),
    ({"served": True, "space": TuneSpace(allocator=["system", "jemalloc"])}, "--allocator is an in-process axis"),
    ({"space": TuneSpace(concurrency=[2], session_config={"session.x": []})}, "--session-config session.x: give one"),
    ({"space": TuneSpace(precision=["fp16"])}, "--precision needs --variants DIR"),
    ({"space": TuneSpace(precision=["fp32", "int8-dynamic"]), "variants": {"fp32": "a.onnx", "fp16": "b.onnx"}},
     "--precision int8-dynamic: not among the variants that passed their accuracy gate; these did: fp16, fp32"),
])
def test_tune_spec_refuses_what_the_flags_refuse(tmp_path: Path, kw: dict[str, Any], expect: str) -> None:
    assert expect in _refusal(lambda: _spec(tmp_path / "t", **kw))


def test_an_output_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "t"
    f.write_text("")
    assert _refusal(lambda: _spec(f)) == f"--output '{f}' is a file: give a folder for the tune's results"


def test_specs_the_cli_accepts_are_accepted(tmp_path: Path) -> None:
    assert _spec(tmp_path, n_trials=10).validation_runs == 9  # one search trial left
    assert _spec(tmp_path, n_trials=1, validate=False).validation_runs == 0
    served = _spec(tmp_path, served=True, space=TuneSpace(max_batch_size=[0, 4], instance_count=[1, 2]))
    assert served.served
    both = _spec(tmp_path, space=TuneSpace(precision=["fp16"]), variants={"fp32": "a.onnx", "fp16": "b.onnx"})
    assert both.space.precision == ["fp16"]
    alloc = _spec(tmp_path, space=TuneSpace(allocator=["system", "jemalloc"]))
    assert alloc.space.axes() == {"allocator": ["system", "jemalloc"]}


def test_an_allocator_trial_runs_with_its_allocator() -> None:
    """Issue 31 item 3: the tune axis sets BenchConfig.allocator, which the trial's worker preloads."""
    from inferperf.config import BenchConfig
    from inferperf.tune.space import apply

    assert apply(BenchConfig(), {"allocator": "tcmalloc", "intra_op_num_threads": 1}).allocator == "tcmalloc"
    assert apply(BenchConfig(), {"intra_op_num_threads": 1}).allocator == "system"


def test_tune_refuses_an_evaluator_of_the_other_kind(tmp_path: Path) -> None:
    surface = SurfaceEvaluator(LatencySurface(base_ms=5.0, parallel_fraction=0.5, cpus=2))
    with pytest.raises(UsageError, match="a served tune .* needs a served evaluator"):
        tune(_spec(tmp_path / "a", served=True, space=TuneSpace(instance_count=[1, 2])), surface)
    with pytest.raises(UsageError, match="a served tune .* needs a served evaluator"):
        tune(_spec(tmp_path / "b"), ServedEvaluator())
