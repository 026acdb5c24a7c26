"""Long functions that did several jobs are split along their steps (issue 25 item 7): each named function stays
short, so a step is read (and changed) on its own. Lines count from the first statement of the body (a typer
signature or a long argument list does not count) to the end."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import inferperf

SRC = Path(inferperf.__file__).parent
MAX_BODY_LINES = 50

SPLIT = [
    ("pipeline/result.py", "_summary"),
    ("measure/concurrent.py", "measure_concurrent"),
    ("loadgen/driver.py", "run_step"),
    ("tune/search.py", "search"),
    ("tune/search.py", "step"),
]


def body_lines(path: Path, name: str) -> int:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            first = node.body[0]
            start = first.end_lineno + 1 if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                else first.lineno  # the docstring does not count
            return node.end_lineno - start + 1
    raise AssertionError(f"{name} not found in {path}")


@pytest.mark.parametrize(("module", "name"), SPLIT, ids=[f"{m}:{n}" for m, n in SPLIT])
def test_split_functions_stay_short(module: str, name: str) -> None:
    n = body_lines(SRC / module, name)
    assert n <= MAX_BODY_LINES, f"{module}:{name} has {n} body lines (at most {MAX_BODY_LINES}): split it along its steps"
