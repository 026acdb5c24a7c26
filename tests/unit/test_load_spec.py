"""load's spec refuses contradictions through the library call itself (issue 38 item 1): the command only maps its
flags onto :class:`LoadSpec`, so a caller of :func:`run_load` / :func:`run_load_spec` gets the same one-line
refusals, and :func:`outcome_error` decides the exit code of a finished run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import inferperf.loadgen.spec as load_spec
from inferperf.errors import GateFailed, Interrupted, MeasurementError, UsageError
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.spec import LoadOutcome, LoadSpec, outcome_error, run_load, run_steps, runner_for
from inferperf.tune.served import run_load_spec

URL = "http://127.0.0.1:9"  # nothing listens: every refusal comes before a connection


@pytest.mark.parametrize(("kw", "words"), [
    ({"target": URL, "from_locust_csv": "stats"}, "--from-locust-csv takes no TARGET"),
    ({}, "give a TARGET"),
    ({"target": URL, "settings": {"request_rate": [0.0]}}, "--request-rate"),
    ({"target": URL, "settings": {"concurrency": [1], "request_rate": [5.0]}}, "not both"),
    ({"target": URL, "settings": {"fail_on_leak": True}}, "--fail-on-leak needs --soak-s"),
    ({"target": URL, "settings": {"bogus": 1}}, "--bogus"),
    ({"target": "zoo:squeezenet", "settings": {"api": "openai-chat"}}, "--api openai-chat loads a running server"),
    ({"target": URL, "history": True}, "--history adds the step Results"),
    ({"target": URL, "settings": {"arrival": "trace:/nonexistent/offsets.txt"}}, "trace file"),
])
def test_run_load_refuses(kw: dict, words: str) -> None:
    """Each refusal is one UsageError line, from either library call, before any request or server."""
    with pytest.raises(UsageError, match=words):
        run_load(LoadSpec(**kw))
    with pytest.raises(UsageError, match=words):
        run_load_spec(LoadSpec(**kw))


def test_run_load_refuses_what_it_does_not_drive() -> None:
    """A model is served first only by the composition in tune/; a Locust import drives nothing."""
    with pytest.raises(UsageError, match="drives a running server"):
        run_load(LoadSpec("zoo:squeezenet"))
    with pytest.raises(UsageError, match="Locust import"):
        run_load_spec(LoadSpec(from_locust_csv="stats"))


def test_a_good_spec_passes_check(tmp_path: Path) -> None:
    spec = LoadSpec(URL, {"concurrency": [1, 4], "model": "m"}, output=tmp_path, history=True).check()
    assert spec.is_url and spec.cfg is not None
    assert (spec.cfg.url, spec.cfg.concurrency, spec.cfg.model) == (URL, [1, 4], "m")
    served = LoadSpec("zoo:squeezenet", LoadConfig(request_rate=[50.0], url="http://elsewhere:1")).check()
    assert not served.is_url and served.cfg.url == LoadConfig().url  # its own server's URL comes later
    assert LoadSpec(from_locust_csv="stats").check().cfg is None


def test_runner_for_dispatches_by_mode() -> None:
    from inferperf.loadgen.run import load
    from inferperf.loadgen.soak import soak
    from inferperf.loadgen.stress import stress

    assert runner_for(LoadConfig()) is load
    assert runner_for(LoadConfig(soak_s=30.0)) is soak
    assert runner_for(LoadConfig(stress=True)) is stress
    assert runner_for(LoadConfig(find_max_rate=True, slo_p99_ms=5.0)) is stress


def _step(client: dict[str, Any] | None = None, valid: bool = True, reasons: list[str] | None = None) -> Any:
    return SimpleNamespace(metrics=SimpleNamespace(client=client), validity=SimpleNamespace(valid=valid,
                           reasons=reasons or []), config=SimpleNamespace(scenario="server", concurrency=1,
                           placement=SimpleNamespace(cpus=None)), run={}, notes=[])  # fmt: skip


def test_outcome_error_decides_the_exit_code() -> None:
    """Refused requests exit 2, a lost target 1, the gates 3 (only when asked); a clean run None."""
    ok = _step({"target_rate": 100.0, "achieved_rate": 99.0, "scheduled_rate": 100.0})
    short = _step({"target_rate": 100.0, "achieved_rate": 50.0, "scheduled_rate": 100.0})
    invalid = _step({"target_rate": 50.0}, valid=False, reasons=["too few samples"])
    refused = _step({"rejected": {"in_a_row": 5, "status": 400, "body": "bad shape"}})
    lost = _step({"target_rate": 200.0, "target_lost": True, "lost_reason": "connection refused"})
    cfg = LoadConfig(request_rate=[100.0])
    assert outcome_error(LoadOutcome(cfg, [ok, short, invalid])) is None
    e = outcome_error(LoadOutcome(cfg, [ok, refused]))
    assert isinstance(e, UsageError) and "the server refused the requests (5 answers 400" in str(e)
    e = outcome_error(LoadOutcome(cfg, [ok, lost]))
    assert isinstance(e, MeasurementError) and "at 200 req/s: connection refused; 2 step Result(s) kept" in str(e)
    e = outcome_error(LoadOutcome(LoadConfig(request_rate=[100.0], fail_on_invalid=True), [ok, invalid]))
    assert isinstance(e, GateFailed) and str(e).startswith("--fail-on-invalid: 1 of 2 step(s) INVALID (first, at 50 req/s")
    e = outcome_error(LoadOutcome(LoadConfig(request_rate=[100.0], strict_rate=True), [ok, short]))
    assert isinstance(e, GateFailed) and str(e).startswith("--strict-rate: achieved 50.0 req/s of the 100.0")


def test_run_steps_records_placement_and_says_when_nothing_was_measured(monkeypatch) -> None:  # noqa: ANN001
    """A run on its own server records the CPUs in each step's Result before the console sees it; a signal while
    the target is read ends the run with the one line that nothing was kept (exit 130)."""
    r = _step()
    seen: list[Any] = []
    monkeypatch.setattr("inferperf.loadgen.target.read_target", lambda cfg: "target")
    monkeypatch.setattr(load_spec, "runner_for", lambda cfg: lambda cfg, command, on_step, target: [on_step(r), r][1:])
    placement = {"generator_cpus": [0], "server_cpus": [0], "disjoint": False}
    out = run_steps(LoadConfig(url=URL, model="m"), on_start=seen.append, on_step=seen.append, placement=placement,
                    on_end=lambda: seen.append("end"))
    assert out.results == [r] and out.placement == placement and seen[1:] == [r, "end"]
    assert r.run["placement"] == placement and r.config.placement.cpus == [0]
    assert r.notes == ["one CPU: the generator and the server share it"]

    def interrupted(cfg: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("inferperf.loadgen.target.read_target", interrupted)
    with pytest.raises(Interrupted, match="before any step finished: nothing measured to keep") as e:
        run_steps(LoadConfig(url=URL, model="m"))
    assert e.value.exit_code == 130
