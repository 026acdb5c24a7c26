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


def test_ci_installs_no_python_package_beside_the_readme_line():
    """Python dependencies come from the README line (the `test` extra), so a newcomer's run matches CI's."""
    readme_test = readme_commands()[1]
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if not ln.lstrip().startswith("#")]
    extra_pips = [ln for ln in lines if "pip install" in ln and ln != readme_test and "--upgrade --quiet pip" not in ln]
    assert extra_pips == []


def test_test_extra_holds_every_extra_the_tests_ask_for():
    """Every extra a test asks for with ``requires_extra`` is one that ``.[test]`` installs."""
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    test_extra = " ".join(project["optional-dependencies"]["test"])
    installed = {x.strip() for m in re.finditer(r"inferperf\[([^\]]+)\]", test_extra) for x in m.group(1).split(",")}
    asked = {m.group(1) for f in (ROOT / "tests").rglob("*.py")
             for m in re.finditer(r"requires_extra\(\"([\w-]+)\"", f.read_text())}
    assert {"openvino", "torch"} <= asked
    assert asked <= installed, f"tests need extras the test extra lacks: {sorted(asked - installed)}"
    assert "pytest-timeout" in test_extra  # pyproject's per-test timeout needs it


def test_readme_names_everything_ci_installs_beside_the_test_command():
    """Issue 24 item 15: the README said CI "adds only Chromium" while .ci/run also installs the Triton clients,
    Locust and PostgreSQL."""
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if not ln.lstrip().startswith("#")]
    steps = {"apt-get install": "Chromium", "install_triton_clients.sh": "Triton", "install_locust.sh": "Locust", "install_aiperf.sh": "AIPerf", "install_mlserver.sh": "MLServer",
             "start_postgres.sh": "PostgreSQL", "install_prometheus.sh": "Prometheus",
             "install_allocators.sh": "jemalloc"}
    text = " ".join((ROOT / "README.md").read_text().split("inferperf measures how fast")[0].split())
    assert "adds only" not in text
    for step, name in steps.items():
        assert any(step in ln for ln in ci), f".ci/run no longer runs {step}: update this test and the README"
        assert name in text, f"the README's opening does not say CI installs {name}"
    unknown = [ln for ln in ci if ("apt-get install" in ln or "scripts/" in ln) and not any(s in ln for s in steps)]
    assert unknown == [], f".ci/run installs more than the README says: {unknown}"
