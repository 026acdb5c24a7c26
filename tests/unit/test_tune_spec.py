"""tune's request refuses contradictions through the library call itself (issue 38 item 1): the command only maps
its flags onto :class:`TuneRequest`, so a caller of :func:`run_tune` gets the same one-line UsageError refusals
(Goal's and TuneSpec's own lines too), before anything is built, measured or written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inferperf.backends.null import LatencySurface
from inferperf.config import BenchConfig
from inferperf.errors import GateFailed, UsageError
from inferperf.system import collect_system
from inferperf.tune.run import TuneOutcome
from inferperf.tune.simulate import SurfaceEvaluator
from inferperf.tune.spec import TuneRequest, TuneSpec, outcome_error, run_tune


OPTIONS = {"n_trials", "sampler", "timeout_s", "validate", "validate_top"}  # TuneSpec's own, passed through


def _info(cpus: int = 4):
    return collect_system().model_copy(update={"effective_cpus": cpus, "cgroup_cpu_limit": None})


def _request(out: Path, **kw: Any) -> TuneRequest:
    options = {"n_trials": 12, **{k: kw.pop(k) for k in list(kw) if k in OPTIONS}}
    args: dict[str, Any] = dict(model="null", base=BenchConfig(backend="null"), axes={"concurrency": [1, 2]},
                                slo_p99_ms=20.0, output=out, options=options)
    args.update(kw)
    return TuneRequest(**args)


@pytest.mark.parametrize(("kw", "words"), [
    ({"variants_dir": Path("v"), "build_variants": ["fp16"]}, "pass --variants DIR .* or --build-variants LIST, not both"),
    ({"objective": "p98"}, "--objective 'p98': choose throughput, throughput-per-core or p99"),
    ({"min_throughput": 5.0}, "--min-throughput is the constraint of --objective p99"),
    ({"slo_p99_ms": 0.0}, "--slo-p99-ms 0: give a p99 bound > 0 ms"),
    ({"sampler": "cmaes"}, "--sampler 'cmaes': choose from tpe, gp, random, grid"),
    ({"n_trials": 9}, "--n-trials 9 leaves no search trial after 9 validation runs"),
    ({"validate_top": 0}, "--validate-top must be >= 1"),
    ({"timeout_s": 0.0}, "--timeout-s 0: give seconds > 0"),
    ({"axes": {"max_batch_size": [0, 4]}}, "are serving axes: add --serve"),
    ({"served": True, "axes": {"concurrency": [2], "session_mode": ["shared", "per-stream"]}},
     "--session-mode is an in-process axis"),
    ({"axes": {"execution_mode": ["fast"]}}, "--execution-mode 'fast': unknown value: choose from sequential"),
    ({"axes": {"backend": ["nosuch"]}}, "--backend 'nosuch': unknown value: choose from"),
    ({"axes": {"threads": [1]}}, "unknown axis 'threads'"),
    ({"precision": ["fp16"]}, "--precision needs --variants DIR"),
    ({"variants_dir": Path("/nonexistent-variants")}, "no optimize-summary.json there"),
    ({"space_file": Path("/nonexistent-space.yaml")}, "--space '/nonexistent-space.yaml'"),
])
def test_run_tune_refuses(tmp_path: Path, kw: dict[str, Any], words: str) -> None:
    """Each refusal is one UsageError line naming its flag, before the study or any output exists."""
    with pytest.raises(UsageError, match=words) as e:
        run_tune(_request(tmp_path / "t", **kw), info=_info())
    assert "\n" not in str(e.value) and "Value error" not in str(e.value)
    assert not (tmp_path / "t").exists()


def test_an_output_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "t"
    f.write_text("")
    with pytest.raises(UsageError, match="is a file: give a folder for the tune's results"):
        run_tune(_request(f), info=_info())


def test_a_good_request_resolves_to_a_checked_spec(tmp_path: Path) -> None:
    """The goal (a p99 SLO: 459 samples a trial), the plan, the axes and the folder; stand-in variants for
    --build-variants make the precision axis before anything is built; no folder: one named after the model."""
    spec = _request(tmp_path / "t", min_throughput=None).check(_info())
    assert isinstance(spec, TuneSpec) and spec.output == tmp_path / "t"
    assert spec.goal.slo_p99_ms == 20.0 and spec.goal.effective_cpus == 4 and spec.plan.min_samples == 459
    assert spec.space.axes() == {"concurrency": [1, 2]} and spec.validation_runs == 9
    staged = TuneRequest("zoo:tiny-cnn", axes={"intra_op_num_threads": [1]}, build_variants=["fp16"],
                         options={"n_trials": 30}).check(_info())
    assert staged.variants == {"fp32": "zoo:tiny-cnn", "fp16": "zoo:tiny-cnn"}
    assert staged.space.precision == ["fp16", "fp32"] and staged.plan.min_samples == 100
    assert staged.output == Path("inferperf-tune-tiny-cnn") and not staged.output.exists()


def test_run_tune_starts_with_the_checked_spec_and_names_no_winner(tmp_path: Path) -> None:
    """A short tune on a scripted surface: ``on_start`` gets the spec it runs, and an SLO nothing meets is the
    command's exit-3 line (:func:`outcome_error`)."""
    surface = LatencySurface(base_ms=20.0, parallel_fraction=0.8, cpus=4, noise_cv=0.04)
    started: list[TuneSpec] = []
    req = _request(tmp_path / "t", slo_p99_ms=0.001, n_trials=3, validate=False, trial_duration_s=1.0)
    outcome = run_tune(req, info=_info(), evaluator=SurfaceEvaluator(surface), on_start=started.append)
    assert started == [outcome.spec] and outcome.spec.output == tmp_path / "t"
    error = outcome_error(outcome)
    assert isinstance(error, GateFailed) and str(error).startswith("no configuration met p99 <= 0.001 ms: closest was")
    met = TuneOutcome(summary={"best": {"config": {}}, "this_pass": {"failed": 0}}, search=outcome.search,
                      spec=outcome.spec)
    assert outcome_error(met) is None
