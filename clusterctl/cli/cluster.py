"""CLI for the 'cluster' noun (thin: parse, call the domain layer, render through output)."""

from __future__ import annotations

import typer

from clusterctl.cli import lifecycle


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
    lifecycle.register(app)  # up, down, status, logs, images (cli/lifecycle.py)
