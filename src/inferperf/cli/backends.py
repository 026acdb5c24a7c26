"""``inferperf backends``: each backend, its version and devices, or why it is missing and how to install it."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import app


@app.command("backends")
def backends_command(
    json_out: Annotated[bool, typer.Option("--json", help="print the list as JSON")] = False,
) -> int:
    """List the backends: version and devices when installed, the reason and the install command when not."""
    from ..backends.inventory import backend_report

    report = backend_report()
    if json_out:
        sys.stdout.write(json.dumps([s.to_dict() for s in report], indent=1) + "\n")
        return 0
    t = Table(title="inferperf backends", title_justify="left")
    for col in ("backend", "status", "version", "devices / why not"):
        t.add_column(col)
    for s in report:
        if s.available:
            t.add_row(s.name, "[green]available[/green]", escape(s.version or "-"), escape(", ".join(s.devices) or "-"))
        else:  # escaped: rich would read the [openvino] of "pip install 'inferperf[openvino]'" as markup
            t.add_row(s.name, "[red]missing[/red]", "-", escape(f"{s.reason}: {s.install}"))
    Console().print(t)
    return 0
