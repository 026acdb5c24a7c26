"""Commands are thin (issue 38 item 1): the rule chosen is that a command function's body (below its signature,
its docstring left out) is 40 lines or fewer; typer declares each flag in the signature, so the signature's
length says how many flags a command has, not how much it does. A command builds its validated spec and calls
one library function; anything longer belongs in the library."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "inferperf" / "cli"
MAX_BODY_LINES = 40


def _command_bodies() -> dict[str, int]:
    out = {}
    for f in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef) and any("command" in ast.unparse(d) for d in node.decorator_list):
                body = node.body
                if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    body = body[1:]
                out[f"{f.name}:{node.name}"] = body[-1].end_lineno - body[0].lineno + 1
    return out


def test_every_command_body_is_forty_lines_or_fewer() -> None:
    bodies = _command_bodies()
    assert len(bodies) >= 15  # the check sees the commands (bench, serve, load, sweep, tune, plan, ...)
    over = {k: v for k, v in bodies.items() if v > MAX_BODY_LINES}
    assert not over, f"command bodies over {MAX_BODY_LINES} lines: {over}: move the logic into the command's spec"


def test_session_flags_are_declared_once_for_bench_and_serve() -> None:
    """bench and serve take the same ORT session flags from one declaration (cli/options.py SESSION_FLAGS), and
    serve refuses each of them with --model-repository (it had refused only --intra-op-num-threads and ignored
    the rest)."""
    import inspect

    import pytest

    from inferperf.cli.bench import bench_command
    from inferperf.cli.options import SESSION_FLAGS, with_session_flags
    from inferperf.cli.serve import MODEL_PARAMS, serve_command

    for command in (bench_command, serve_command):
        params = inspect.signature(command).parameters
        assert set(SESSION_FLAGS) <= set(params) and "session" not in params
        assert all(params[n].default == SESSION_FLAGS[n][1] for n in SESSION_FLAGS)
    assert set(SESSION_FLAGS) <= set(MODEL_PARAMS)

    def no_session(model: str) -> int:
        return 0

    def declares_one(model: str, providers: str | None = None, **session: object) -> int:
        return 0

    with pytest.raises(TypeError, match=r"\*\*session"):
        with_session_flags(no_session)
    with pytest.raises(TypeError, match="providers"):
        with_session_flags(declares_one)


def test_serve_session_flags_reach_the_settings_and_are_refused_with_a_repository(tmp_path) -> None:
    from typer.testing import CliRunner

    from inferperf.cli import app
    from inferperf.cli.serve import _settings
    from inferperf.errors import UsageError

    params = {"warmup": None, "dynamic_batching": False, "preferred_batch_size": None, "no_metrics": False,
              "cpus": None, "disable_mem_pattern": True, "execution_mode": "parallel", "inter_op_num_threads": 2}
    cfg, _ = _settings(params, None)
    assert cfg.session.enable_mem_pattern is False and cfg.session.execution_mode == "parallel"
    assert cfg.session.inter_op_num_threads == 2
    (tmp_path / "repo").mkdir()
    out = CliRunner().invoke(app, ["serve", "--model-repository", str(tmp_path / "repo"), "--execution-mode", "parallel"])
    assert isinstance(out.exception, UsageError)  # main() turns it into one line, exit 2
    assert str(out.exception).startswith("--execution-mode with --model-repository")
