"""CLI for the 'scenario' noun (thin: parse, call the domain layer, render through output)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
