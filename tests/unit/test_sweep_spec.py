"""sweep's spec refuses contradictions through the library call itself (issue 38 item 1): the command only maps
its flags onto :class:`SweepSpec`, so a caller of :func:`run_spec` gets the same one-line UsageError refusals,
before anything is measured or written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inferperf.errors import UsageError
from inferperf.sweep.outcome import SweepOutcome
from inferperf.sweep.spec import SweepSpec, failure_message, overlay_settings, run_spec
from inferperf.system import collect_system


def _spec(out: Path, **kw: Any) -> SweepSpec:
    args: dict[str, Any] = dict(models=["zoo:tiny-cnn"], axes={"backend": ["null"], "intra_op_num_threads": [1]},
                                output=out)
    args.update(kw)
    return SweepSpec(**args)


@pytest.mark.parametrize(("kw", "words"), [
    ({"output": None, "resume": True}, "--resume needs --output DIR"),
    ({"models": None}, "give a MODEL .* or --matrix FILE.yaml"),
    ({"models": []}, "the matrix expands to no case: list at least one model"),
    ({"matrix": Path("/nonexistent-matrix.yaml")}, "--matrix '/nonexistent-matrix.yaml'"),
    ({"models": ["zoo:nosuch"], "axes": {"intra_op_num_threads": [1]}}, "unknown zoo model"),
    ({"axes": {"backend": ["nosuch"], "intra_op_num_threads": [1]}}, "unknown backend 'nosuch'"),
    ({"axes": {"intra_op_num_threads": [1]}, "shapes": [{"y": [1, 3, 32, 32]}]}, "unknown input"),
    ({"axes": {"concurrency": ["many"]}}, "concurrency"),
    ({"settings": {"stop.min_iterations": -1}}, "min_iterations"),
    ({"repeat": 0}, "--repeat must be >= 1"),
])
def test_run_spec_refuses(tmp_path: Path, kw: dict[str, Any], words: str) -> None:
    """Each refusal is one UsageError line naming the flag or the setting, before the output folder exists."""
    with pytest.raises(UsageError, match=words) as e:
        run_spec(_spec(tmp_path / "s", **kw))
    assert "\n" not in str(e.value)
    assert not (tmp_path / "s").exists()


def test_an_output_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "s"
    f.write_text("")
    with pytest.raises(UsageError, match="is a file: give a folder for the sweep's results"):
        run_spec(_spec(f))


def test_resuming_another_sweep_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "s"
    out.mkdir()
    (out / "index.json").write_text('{"cases": {"0123456789abcdef": {}}}')
    with pytest.raises(UsageError, match="holds a different sweep"):
        run_spec(_spec(out, resume=True))


def test_a_good_spec_expands_and_lays_the_flags_over_the_matrix() -> None:
    """Two thread counts x the model: two cases; the settings given win, the sweep's 2 s minimum is the default;
    no --repeat: the matrix's rounds; no folder: a timestamped one (not created)."""
    spec = SweepSpec(["zoo:tiny-cnn"], axes={"intra_op_num_threads": [1, 2], "session_mode": None},
                     settings={"stop.min_iterations": 10, "warmup.iterations": 2, "placement.cpus": None}
                     ).check(collect_system())
    assert [c.config.session.intra_op_num_threads for c in spec.cases] == [1, 2] and spec.rounds == 1
    cfg = spec.cases[0].config
    assert cfg.stop.min_duration_s == 2.0 and cfg.stop.min_iterations == 10 and cfg.warmup.iterations == 2
    assert spec.output is not None and spec.output.name.startswith("inferperf-sweep-") and not spec.output.exists()
    assert overlay_settings({"stop": {"min_duration_s": 5}}, {"stop.min_duration_s": 1.0})["stop"] == {"min_duration_s": 1.0}


def test_failure_message_when_every_case_failed(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "s")
    failed = SweepOutcome(cases=[], failures={0: [{"round": 0, "type": "ModelError", "message": "boom"}]})
    assert failure_message(spec, failed) == f"every case failed (first: boom); results in {tmp_path / 's'}"
    assert failure_message(spec, SweepOutcome(cases=[])) is None
