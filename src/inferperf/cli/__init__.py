"""Command line: ``inferperf COMMAND``; one module per command, each thin over one library function.

:func:`main` maps the exception tree to exit codes (0 ok, 1 runtime failure,
2 usage/input error, including a settings model's refusal (a pydantic ``ValidationError``, printed as
:func:`~inferperf.errors.settings_message`), 3 gate failed), prints one ``error:`` line, and shows the
traceback only with ``--debug`` (accepted anywhere on the line).
"""

from __future__ import annotations

import os
import sys
import traceback

import typer
from pydantic import ValidationError

from ..errors import InferperfError, Interrupted, settings_message

app = typer.Typer(
    name="inferperf",
    help="Measure and improve AI-model inference performance. Add --debug anywhere for tracebacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: every flag name in full at any width (rich's table cut them at 80)
)

from . import bench as _bench  # noqa: E402,F401  (registers the command)
from . import load as _load  # noqa: E402,F401
from . import backends as _backends  # noqa: E402,F401
from . import compare as _compare  # noqa: E402,F401
from . import optimize as _optimize  # noqa: E402,F401
from . import pipeline as _pipeline  # noqa: E402,F401
from . import plan as _plan  # noqa: E402,F401
from . import history as _history  # noqa: E402,F401
from . import profile as _profile  # noqa: E402,F401
from . import report as _report  # noqa: E402,F401
from . import serve as _serve  # noqa: E402,F401
from . import sweep as _sweep  # noqa: E402,F401
from . import tune as _tune  # noqa: E402,F401
from . import zoo as _zoo  # noqa: E402,F401


def _click_modules() -> list:
    """click's exception modules: the copy newer typer vendors as ``typer._click``, and/or an installed click
    (older typer depends on it). At least one exists wherever typer imports."""
    mods = []
    try:
        import click.exceptions as installed

        mods.append(installed)
    except ImportError:
        pass
    try:
        import typer._click.exceptions as vendored  # typer >= 0.2x vendors click

        mods.append(vendored)
    except ImportError:
        pass
    return mods


_MODS = _click_modules()
_USAGE = tuple(m.UsageError for m in _MODS)
_NO_ARGS = tuple(getattr(m, "NoArgsIsHelpError", m.UsageError) for m in _MODS)
_EXIT = tuple(getattr(m, "Exit", typer.Exit) for m in _MODS) + (typer.Exit,)
_ABORT = tuple(getattr(m, "Abort", typer.Abort) for m in _MODS) + (typer.Abort,)


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def _version(value: bool) -> None:
    if value:
        from .._version import __version__

        print(f"inferperf {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="print the version and exit", callback=_version,
                                 is_eager=True),
) -> None:
    """Measure and improve AI-model inference performance. Add --debug anywhere for tracebacks."""


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and exits with) the exit code.

    Args:
        argv: arguments without the program name (default ``sys.argv[1:]``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("INFERPERF_DEBUG") == "1"
    args = [a for a in args if a != "--debug"]
    import contextlib

    from ..interrupt import STOP, handle_signals

    STOP.reset()
    code = 0
    # SIGINT and SIGTERM alike (inferperf.interrupt): load's steps stop cooperatively and keep their partial
    # figures; elsewhere the signal raises KeyboardInterrupt, and sweep/tune keep their finished runs
    signals = handle_signals() if argv is None else contextlib.nullcontext(STOP)
    try:
        with signals:
            rv = app(args=args, prog_name="inferperf", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
        if code == 130:  # click/typer report Ctrl-C (and SIGTERM outside a cooperative section) as a return value
            _error("interrupted")
    except Interrupted as e:
        print(str(e), file=sys.stderr)
        code = e.exit_code
    except InferperfError as e:
        if debug:
            traceback.print_exc()
        _error(str(e))
        code = e.exit_code
    except ValidationError as e:  # a settings model refused a value or a combination: its one line, exit 2
        if debug:
            traceback.print_exc()
        _error(settings_message(e))
        code = 2
    except _NO_ARGS:
        code = 0
    except _USAGE as e:
        if debug:
            traceback.print_exc()
        hint = f" (see: inferperf {e.ctx.info_name} --help)" if e.ctx and e.ctx.info_name != "inferperf" else ""
        _error(e.format_message().replace("\n", " ") + hint)
        code = 2
    except _EXIT as e:
        code = getattr(e, "exit_code", 0)
        if code == 130:  # typer turns Ctrl-C into Exit(130)
            _error("interrupted")
    except _ABORT:
        _error("interrupted")
        code = 130
    except KeyboardInterrupt:
        _error("interrupted")
        code = 130
    except Exception as e:  # an inferperf bug: still one line unless --debug
        if debug:
            traceback.print_exc()
        _error(f"internal error {type(e).__name__}: {e} (rerun with --debug and report it)")
        code = 1
    if code == 130:
        code = STOP.exit_code  # 143 for SIGTERM: 128 + the signal, as shells report it
    if argv is None:
        sys.exit(code)
    return code
