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


def _help_texts() -> dict[str, str]:
    group = typer.main.get_command(app)
    ctx = group.make_context("inferperf", ["--help"], resilient_parsing=True)
    out = {}
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        sub = cmd.make_context(name, [], parent=ctx, resilient_parsing=True, terminal_width=200, max_content_width=200)
        out[name] = cmd.get_help(sub)
    return out


def test_help_texts_say_what_the_commands_do_now() -> None:
    """Issue 24 item 15: a literal ``%%`` in load --help, "server: see load, later", bench --config without YAML,
    report --help naming only four kinds of Result."""
    texts = _help_texts()
    for name, text in texts.items():
        assert "%%" not in text, f"inferperf {name} --help shows a literal %%"
        assert "later)" not in text, f"inferperf {name} --help promises a feature 'later'"
    assert "95 % of" in " ".join(texts["load"].split())
    assert ".yaml" in texts["bench"].split("--config")[1].split("--")[0]
    words = " ".join(texts["report"].split())
    for kind in ("bench", "sweep", "optimize", "runtime", "serve", "load", "tune", "profile", "pipeline"):
        assert kind in words.split("Options:")[0], f"report --help does not name {kind} Results"


def test_load_prints_no_table_header_before_an_input_error(tmp_path) -> None:
    """Issue 24 item 15: the header came before the one-line input error."""
    p = subprocess.run([sys.executable, "-m", "inferperf", "load", "http://127.0.0.1:9/", "--model", "m",
                        "--concurrency", "1", "--duration-s", "1"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2, p.stderr
    assert "unreachable" in p.stderr and "concurrency" not in p.stdout and "req/s" not in p.stdout


def test_session_and_workload_flags_are_declared_once() -> None:
    """Issue 25 item 2: --intra-op-num-threads, --shape, --dim, --session-config ... were declared again in bench,
    serve, optimize, profile, tune and sweep, each with its own help text. Each now comes from one alias in
    cli/options.py: one help text for one value, one for an axis (a comma list). The exceptions are other flags
    that share a name: bench's --backend takes a list (a runtime comparison), sweep's --shape/--dim are axes of
    their own format, tune's --session-config takes KEY=V1|V2, load's flags speak to an HTTP server."""
    import typing

    from inferperf.cli import options

    def help_of(alias: object) -> str:
        return typing.get_args(alias)[1].help

    flag_of = {"Backend": "backend", "IntraOpThreads": "intra_op_num_threads",
               "InterOpThreads": "inter_op_num_threads", "ExecutionMode": "execution_mode",
               "GraphOptimizationLevel": "graph_optimization_level", "Providers": "providers",
               "SessionConfig": "session_config", "Shape": "shape", "Dim": "dim", "BatchSize": "batch_size",
               "InputData": "input_data", "Concurrency": "concurrency", "SessionMode": "session_mode"}
    shared: dict[str, set[str]] = {}
    for alias_name in dir(options):
        alias = getattr(options, alias_name)
        if typing.get_origin(alias) is typing.Annotated and alias_name.removesuffix("Axis") in flag_of:
            shared.setdefault(flag_of[alias_name.removesuffix("Axis")], set()).add(help_of(alias))
    exempt = {("bench", "backend"), ("sweep", "shape"), ("sweep", "dim"), ("tune", "session_config"),
              ("serve", "input_data"),  # serve's --input-data feeds the warm-up (and BYTES inputs)
              ("bench", "concurrency"), ("bench", "session_mode")}  # one value: bench's own scenario flags
    group = typer.main.get_command(app)
    ctx = group.make_context("inferperf", ["--help"], resilient_parsing=True)
    seen = 0
    for name in ("bench", "serve", "optimize", "profile", "tune", "sweep"):
        cmd = group.get_command(ctx, name)
        for param in cmd.params:
            if param.name in shared and (name, param.name) not in exempt:
                assert param.help in shared[param.name], f"inferperf {name} declares --{param.name} again: {param.help!r}"
                seen += 1
    assert seen >= 40
