"""serve's spec refuses contradictions through the library call itself (issue 38 item 1): the command only maps
its flags onto :class:`ServeSpec`, so a caller of :func:`run_serve` gets the same one-line refusals, before any
model loads or any port is bound (tests/e2e/test_serve_cli.py and tests/integration/test_repository_serve.py run
the same through the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from inferperf.config import BenchConfig
from inferperf.errors import UsageError, settings_message
from inferperf.serve.spec import RepositoryControl, ServeSpec, run_serve

REPO = Path(__file__).resolve().parents[2] / "examples" / "repository"
MISSING = "/nonexistent-inferperf-dir/model.onnx"  # never loaded: every refusal comes first


@pytest.mark.parametrize(("kw", "words"), [
    ({"api_key": " "}, "--api-key is empty"),
    ({"metrics_auth": True}, "--metrics-auth needs --api-key KEY"),
    ({"access_log": "/nonexistent-inferperf-dir/a.jsonl"}, "--access-log '/nonexistent-inferperf-dir/a.jsonl' cannot"),
    ({"model": None}, "give a MODEL (ONNX file or zoo:NAME) or --model-repository DIR"),
    ({"control": RepositoryControl(load_models=["mlp"])}, "--load-model / --exit-on-error need --model-repository"),
    ({"control": RepositoryControl(mode="explicit")}, "--model-control-mode"),
    ({"control": RepositoryControl(exit_on_error=True)}, "--exit-on-error need --model-repository"),
    ({"warmup": -1}, "--warmup -1: use 0 (ready without warm-up) or more runs"),
    ({"model": None, "model_repository": REPO, "model_flags": ["--max-batch-size", "--shape"]},
     "--max-batch-size, --shape with --model-repository: set them per model"),
    ({"model_repository": REPO}, "MODEL with --model-repository"),
    ({"model": None, "model_repository": REPO, "model_name": "m", "result": True},
     "--model-name, --output with --model-repository"),
    ({"model": None, "model_repository": REPO, "cfg": BenchConfig()}, "cfg with --model-repository"),
])
def test_run_serve_refuses(kw: dict, words: str) -> None:
    """Each refusal is one line naming the flag, whoever calls."""
    spec = ServeSpec(**{"model": MISSING, "port": 0, **kw})
    with pytest.raises(UsageError) as e:
        run_serve(spec)
    assert words in str(e.value) and "\n" not in str(e.value), e.value
    with pytest.raises(UsageError):
        spec.check()


@pytest.mark.parametrize(("kw", "line"), [
    ({"port": 70000}, "--port 70000 is not a TCP port: use 0..65535"),
    ({"grace_s": -1.0}, "--grace-s -1: use seconds >= 0"),
    ({"limit_concurrency": -1}, "--limit-concurrency -1: use 0 (no limit) or more"),
    ({"timeout_keep_alive_s": 0}, "--timeout-keep-alive-s 0: use seconds >= 1"),
    ({"request_receipt_timeout_s": -2.0}, "--request-receipt-timeout-s -2: use seconds >= 0 (0 = no deadline)"),
])
def test_run_serve_refuses_settings_out_of_range(kw: dict, line: str) -> None:
    """The listening and connection settings refuse as their settings models do (the CLI prints the same line)."""
    with pytest.raises(ValidationError) as e:
        run_serve(ServeSpec(model=MISSING, **kw))
    assert settings_message(e.value) == line


def test_run_serve_refuses_a_bad_stack_before_loading() -> None:
    """A bad --loop is refused before the (missing) model would load."""
    with pytest.raises(UsageError, match="--loop 'tokio': use one of auto, uvloop, asyncio"):
        run_serve(ServeSpec(model=MISSING, port=0, loop="tokio"))


def test_auth_refusals_come_first_and_exposure_warns() -> None:
    """An empty key is refused before a bad port; listening on every address without a key warns (once the
    caller asks for warnings), with a key it does not."""
    with pytest.raises(UsageError, match="--api-key is empty"):
        ServeSpec(model=MISSING, api_key="", port=70000).check()
    lines: list[str] = []
    ServeSpec(model=MISSING, host="0.0.0.0").check(warn=lines.append)
    assert lines == ["--host 0.0.0.0 without --api-key: anyone who can reach this port can use the server; pass"
                     " --api-key KEY (or INFERPERF_API_KEY)"]
    ServeSpec(model=MISSING, host="::", api_key="k").check(warn=lines.append)
    ServeSpec(model=MISSING).check(warn=lines.append)  # loopback: no warning
    assert len(lines) == 1


def test_good_specs_pass_check(tmp_path: Path) -> None:
    """One model with every setting in range, and a repository with its control settings, pass (nothing loads:
    check reads no model); the access log is appendable."""
    log = tmp_path / "access.jsonl"
    one = ServeSpec(model=MISSING, port=0, grace_s=1.0, api_key="k", metrics_auth=True, access_log=str(log),
                    model_name="m", warmup=0, cfg=BenchConfig(), result=True, model_flags=["MODEL", "--output"])
    assert one.check() is one and log.exists()
    assert one.connection_limits().timeout_keep_alive_s == 30
    repo = ServeSpec(model_repository=REPO, control=RepositoryControl("explicit", ["mlp"], 2, 1, True), port=0)
    assert repo.check() is repo and repo.control.given
