"""A progress bar on stderr for work that takes more than a second (the CLI's; library calls get none)."""

from __future__ import annotations

import os
import stat
import sys
import time
from typing import Any


class Progress:
    """A progress bar on stderr for loads that take more than a second: on a terminal only, never when the output goes
    to a pipe (``kernscope analyze t --format json | jq``: the bar would draw over what reads the pipe), never with
    --quiet.

    ``unit`` "bytes" counts bytes read (then says what comes next, with a spinner, while the trace is linked);
    any other unit counts items, e.g. "ranks": ``2/4 ranks``."""

    def __init__(self, label: str, quiet: bool, unit: str = "bytes", after: str = "linking and analyzing") -> None:
        self.label = label
        self.unit = unit
        self.after = after
        self.enabled = not quiet and sys.stderr.isatty() and not stdout_is_pipe()
        self.t0 = time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.monotonic() - self.t0 < 1.0:
                return
            from rich.console import Console
            from rich.progress import Progress as RichProgress

            console = Console(stderr=True)
            self.bar = RichProgress(*columns(self.unit, console.width), console=console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        described = f"{self.label}: {self.after}" if self.unit == "bytes" and total and done >= total else self.label
        self.bar.update(self.task, completed=done, total=total, description=described)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def stdout_is_pipe() -> bool:
    """Whether the standard output is a pipe (or a socket): the output is read by another program."""
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError, AttributeError):  # (no real stdout: a test's capture, a closed stream)
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


#: the columns but the description take about this many of a terminal's: spinner, a bar of BAR_WIDTH, the count
#: ("975.2/975.2 MB"), the rate ("245.3 MB/s"), the time left, and the gaps between them
BAR_WIDTH = 20
OTHER_COLUMNS = 57


def columns(unit: str, width: int) -> tuple[Any, ...]:
    """The bar's columns for a terminal ``width`` columns wide: a spinner, the description, the bar, the count (bytes
    read and their rate, or items of ``unit``), the time left. The description is cut with an ellipsis to what the
    others leave; the count, rate and time never wrap (at 80 columns "975.2/975.2 MB" was wrapped onto a second
    line, redrawn at every update)."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.table import Column

    def whole() -> Column:
        return Column(no_wrap=True)

    count = ((DownloadColumn(table_column=whole()), TransferSpeedColumn(table_column=whole())) if unit == "bytes"
             else (MofNCompleteColumn(table_column=whole()), TextColumn(unit, table_column=whole())))
    room = max(10, width - OTHER_COLUMNS)
    return (SpinnerColumn(),
            TextColumn("[progress.description]{task.description}",
                       table_column=Column(no_wrap=True, overflow="ellipsis", max_width=room)),
            BarColumn(bar_width=BAR_WIDTH), *count, TimeRemainingColumn(table_column=whole()))
