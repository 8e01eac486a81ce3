"""A transient spinner on stderr for commands that wait (up, down, images build); stdout stays the result."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress


def spinner() -> "Progress":
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from clusterctl.output import err_console

    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err_console, transient=True
    )
