"""``--help`` names every flag in full at 80 columns (rich's option table cut them: ``--calibration-m...``)."""

from __future__ import annotations

import os
import subprocess
import sys

import typer

from inferperf.cli import app


def test_optimize_help_at_80_columns_names_calibration_flags_in_full() -> None:
    p = subprocess.run([sys.executable, "-m", "inferperf", "optimize", "--help"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "COLUMNS": "80"}, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert "--calibration-method" in p.stdout and "--calibration-samples" in p.stdout
    assert "…" not in p.stdout and "..." not in p.stdout.split("Options:")[1]


def test_every_command_names_every_flag_in_full_at_80_columns() -> None:
    group = typer.main.get_command(app)
    ctx = group.make_context("inferperf", ["--help"], resilient_parsing=True)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        sub = cmd.make_context(name, [], parent=ctx, resilient_parsing=True, terminal_width=80, max_content_width=80)
        text = cmd.get_help(sub)
        for param in cmd.params:
            for flag in [*param.opts, *param.secondary_opts]:
                if flag.startswith("--"):
                    assert flag in text, f"inferperf {name} --help lost {flag}"
