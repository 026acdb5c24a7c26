"""The plan spec refuses what cannot be planned through the library call itself (issue 38 item 1): the command
only maps flags onto :class:`PlanSpec`, so a caller of :func:`run_spec` gets the same one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferperf.analysis.fleet import PlanOptions
from inferperf.errors import UsageError
from inferperf.plan.spec import LadderSpec, PlanSpec, ValidateSpec, run_spec


def _spec(tmp_path: Path, **kw) -> PlanSpec:
    base = {"model": "zoo:squeezenet", "opts": PlanOptions(target_rate_per_s=100, slo_p99_ms=50),
            "out_dir": tmp_path / "plan", "from_paths": ["unused.json"]}
    base.update(kw)
    return PlanSpec(**base)


@pytest.mark.parametrize(("kw", "flag"), [
    ({"opts": PlanOptions(target_rate_per_s=0, slo_p99_ms=50)}, "--target-rate"),
    ({"opts": PlanOptions(target_rate_per_s=float("nan"), slo_p99_ms=50)}, "--target-rate"),
    ({"opts": PlanOptions(target_rate_per_s=10, slo_p99_ms=-1)}, "--slo-p99-ms"),
    ({"opts": PlanOptions(target_rate_per_s=10, slo_p99_ms=5, burst=0.5)}, "--burst"),
    ({"validate": ValidateSpec(rounds=0)}, "--validate-rounds"),
    ({"validate": ValidateSpec(rounds=3, step_s=0)}, "--validate-step-s"),
    ({"ladder": LadderSpec([1, 2], [1], rounds=0)}, "--measure-rounds"),
    ({"ladder": LadderSpec([0], [1])}, "batch"),
])
def test_run_spec_refuses_bad_settings(tmp_path: Path, kw: dict, flag: str) -> None:
    """Each refusal names its flag, before anything is measured or written."""
    with pytest.raises(UsageError, match=flag):
        run_spec(_spec(tmp_path, **kw))
    assert not (tmp_path / "plan").exists()


def test_run_spec_refuses_output_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "plan"
    f.write_text("x")
    with pytest.raises(UsageError, match="--output"):
        run_spec(_spec(tmp_path, out_dir=f))


def test_check_fills_defaults_and_accepts_good_spec(tmp_path: Path) -> None:
    """Nothing to plan from: the default ladder; no folder named: one named after the model; a good spec passes."""
    s = PlanSpec(model="zoo:squeezenet", opts=PlanOptions(target_rate_per_s=100, slo_p99_ms=50)).check()
    assert s.ladder is not None and s.ladder.batch_sizes == [1, 2, 4, 8] and s.ladder.instances == [1, 2]
    assert s.out_dir == Path("inferperf-plan-squeezenet")
    s2 = _spec(tmp_path, validate=ValidateSpec(rounds=2, step_s=1.0)).check()
    assert s2.ladder is None and s2.out_dir == tmp_path / "plan"


@pytest.mark.parametrize(("kw", "pinned"), [
    ({}, False),  # nothing served: the ladder measures on this process's CPUs
    ({"validate": ValidateSpec(rounds=1, step_s=1.0)}, True),
    ({"calibrate_step_s": 2.0}, True),  # --calibrate without --validate serves the replica on its share too
])
def test_the_ladder_is_pinned_to_the_servers_share_when_a_replica_is_served(tmp_path: Path, monkeypatch, kw: dict,
                                                                             pinned: bool) -> None:
    import os

    import inferperf.plan.spec as spec_mod
    from inferperf.serve.child import split_cpus

    seen = {}
    monkeypatch.setattr(spec_mod, "plan", lambda model, opts, out, paths, ladder, **k: seen.setdefault("l", ladder))
    run_spec(_spec(tmp_path, from_paths=[], ladder=LadderSpec([1], [1], duration_s=1.0, rounds=1), **kw))
    want = split_cpus(sorted(os.sched_getaffinity(0)))[1] if pinned else None
    assert seen["l"]["pin"] == want and (not pinned or want)
