"""``inferperf zoo``: list the built-in models and whether each is available here."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..zoo import list_models
from . import app


@app.command("zoo")
def zoo_command() -> None:
    """List built-in models (use them as zoo:NAME wherever a model path goes)."""
    table = Table(title="inferperf zoo (use as zoo:NAME)")
    for col in ("name", "kind", "available", "description", "note"):
        table.add_column(col, overflow="fold")
    for entry, available, path in list_models():
        avail = "yes" if available else f"no: {entry.extra}"
        table.add_row(*(escape(cell) for cell in (entry.name, entry.kind, avail, entry.description, entry.note)))
    Console().print(table)
