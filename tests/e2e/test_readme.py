"""The README's first lines are the two newcomer commands, and CI runs the second verbatim."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text().splitlines()
    start = text.index("```bash")
    end = text.index("```", start + 1)
    return [line.strip() for line in text[start + 1 : end] if line.strip()]


def test_readme_opens_with_two_commands():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert cmds[0].startswith("pip install .") and "inferperf bench" in cmds[0]
    assert "pytest" in cmds[1] and "rapidocr-onnxruntime" in cmds[1]
    # the code block is the first thing after the title
    head = [line for line in (ROOT / "README.md").read_text().splitlines()[:4] if line.strip()]
    assert head[0].startswith("# ") and head[1] == "```bash"


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in [line.strip() for line in ci if not line.lstrip().startswith("#")]
    assert any("set -euo pipefail" in line for line in ci)  # a failing (or no-test, exit 5) pytest fails CI
