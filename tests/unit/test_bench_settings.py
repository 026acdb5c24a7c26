"""A library bench refuses what ``inferperf bench`` refuses, with the same line (issue 25 item 2).

The refusals live in the settings (:class:`~inferperf.config.BenchConfig`), in
:func:`~inferperf.measure.soak.soak_config` and in :func:`~inferperf.measure.bench.bench` itself, so a
library call meets them as the CLI does; the CLI prints the same line and exits 2.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from inferperf.cli import main
from inferperf.config import BenchConfig
from inferperf.errors import UsageError, settings_message
from inferperf.measure.bench import bench
from inferperf.measure.soak import soak_config
from inferperf.measure.staged import Staging

CONTRADICTS = "--scenario single-stream contradicts --concurrency 4: drop one"


def test_an_explicit_single_stream_with_streams_is_refused() -> None:
    with pytest.raises(ValidationError) as e:
        BenchConfig(scenario="single-stream", concurrency=4)
    assert settings_message(e.value) == CONTRADICTS
    with pytest.raises(ValidationError):
        BenchConfig.model_validate({"scenario": "single-stream", "concurrency": 4})


def test_streams_alone_still_imply_concurrent() -> None:
    assert BenchConfig(concurrency=4).scenario == "concurrent"
    assert BenchConfig(scenario="single-stream", concurrency=1).scenario == "single-stream"
    assert BenchConfig(scenario="concurrent", concurrency=4).concurrency == 4


def test_the_cli_prints_the_same_line(tmp_path, capsys) -> None:
    assert main(["bench", "--backend", "null", "--scenario", "single-stream", "--concurrency", "4"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {CONTRADICTS}"
    f = tmp_path / "c.yaml"
    f.write_text("scenario: single-stream\n")  # the file's scenario and the flag's streams contradict too
    assert main(["bench", "--backend", "null", "--config", str(f), "--concurrency", "4"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {CONTRADICTS}"


def test_soak_settings_refuse_no_duration_and_no_sampler() -> None:
    for cfg, soak_s in ((BenchConfig(), 0.0), (BenchConfig(), -1.0), (BenchConfig(sampler=False), 10.0)):
        with pytest.raises(UsageError, match=r"--soak-s N needs N > 0 seconds and the sampler on"):
            soak_config(cfg, soak_s)
    stop = soak_config(BenchConfig(concurrency=2), 7.5).stop
    assert (stop.min_duration_s, stop.max_duration_s, stop.min_iterations) == (7.5, 7.5, 1)
    assert soak_config(BenchConfig(concurrency=2), 7.5).concurrency == 2


def _staging() -> Staging:
    return Staging(lambda raw: raw, None, items=[b"x"], source="generator:m:gen", pre_ref="m:pre", post_ref=None)


@pytest.mark.parametrize("workload", [{"batch_size": 4}, {"shapes": {"x": [1, 3]}}, {"dims": {"h": 8}},
                                      {"values": {"x": 1.0}}, {"int_ranges": {"x": (0, 3)}}])
def test_a_pre_function_with_feed_settings_is_refused_by_the_library(workload: dict) -> None:
    cfg = BenchConfig(backend="null", workload=workload)
    with pytest.raises(UsageError, match=r"^--pre makes the model's feeds: drop --batch-size"):
        bench("null", cfg, staging=_staging())


def test_the_cli_refuses_a_pre_function_with_feed_settings_with_the_same_line(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "hsmpre.py").write_text("def pre(x):\n    return x\n\ndef gen():\n    yield 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "zoo:tiny-cnn", "--pre", "hsmpre:pre", "--pre-input", "hsmpre:gen", "--dim", "h=8"]) == 2
    assert capsys.readouterr().err.startswith("error: --pre makes the model's feeds: drop --batch-size")


def test_one_settings_file_loader_with_one_line_errors(tmp_path) -> None:  # noqa: ANN001
    """Issue 38 item 2: sweep's and tune's YAML loaders (and pipeline's, the gate's, the mock's) were copies."""
    from inferperf.config import load_mapping
    from inferperf.errors import UsageError

    f = tmp_path / "s.yaml"
    f.write_text("a: 1\nb: [1, 2]\n")
    assert load_mapping(f, "--x 's.yaml'", "a mapping") == {"a": 1, "b": [1, 2]}
    for text, msg in (("a: [1\n", r"^--x 's.yaml' is not valid YAML \(line 2\): "), ("- 1\n", r"^--x 's.yaml' must be a mapping$"),
                      ("", r"must be a mapping$")):
        f.write_text(text)
        with pytest.raises(UsageError, match=msg):
            load_mapping(f, "--x 's.yaml'", "a mapping")
    assert load_mapping(f, "--x", "a mapping", empty_ok=True) == {}
    with pytest.raises(UsageError, match=r"^--x 'nope.yaml' not found \(or not a file\): check the path$"):
        load_mapping(tmp_path / "nope.yaml", "--x 'nope.yaml'", "a mapping")
