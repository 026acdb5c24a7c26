"""``python -m inferperf`` runs the CLI."""

from .cli import main

main()
