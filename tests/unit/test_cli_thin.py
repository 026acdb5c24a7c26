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
