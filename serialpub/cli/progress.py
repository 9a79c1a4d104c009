"""The steps of ``serialpub release`` on a terminal: a progress bar over the release's
steps with the elapsed time, and one line per finished step with its seconds
(:mod:`serialpub.workflow.progress` reports them). Off a terminal (a pipe, a log, CI) the
command prints what it printed before; the steps are still logged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from serialpub.workflow import progress


class _Bar:
    """A :class:`serialpub.workflow.progress.Listener` drawing the steps with rich."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("starting", total=len(progress.RELEASE_STEPS))

    def started(self, name: str) -> None:
        self.progress.update(self.task, description=name)

    def ended(self, name: str, seconds: float, ok: bool) -> None:
        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        self.progress.console.print(f"  {mark} {name:<45} {seconds:7.2f} s")
        done = min(self.progress.tasks[0].completed + 1, len(progress.RELEASE_STEPS))
        self.progress.update(self.task, completed=done)


@contextmanager
def shown(console: Console) -> Iterator[None]:
    """Show the release's steps inside the block when ``console`` is a terminal."""
    if not console.is_terminal:
        yield
        return
    bar = _Bar(console)
    with bar.progress, progress.listening(bar):
        yield
