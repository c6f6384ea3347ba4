"""A progress bar on stderr for work that takes more than a second (the CLI's; library calls get none)."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """A progress bar on stderr for loads that take more than a second (terminal only, not with --quiet).

    ``unit`` "bytes" counts bytes read (then says what comes next, with a spinner, while the trace is linked);
    any other unit counts items, e.g. "ranks": ``2/4 ranks``."""

    def __init__(self, label: str, quiet: bool, unit: str = "bytes", after: str = "linking and analyzing") -> None:
        self.label = label
        self.unit = unit
        self.after = after
        self.enabled = not quiet and sys.stderr.isatty()
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
            from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            count = (DownloadColumn(),) if self.unit == "bytes" else (MofNCompleteColumn(), TextColumn(self.unit))
            self.bar = RichProgress(SpinnerColumn(), "[progress.description]{task.description}", BarColumn(), *count,
                                    TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        described = f"{self.label}: {self.after}" if self.unit == "bytes" and total and done >= total else self.label
        self.bar.update(self.task, completed=done, total=total, description=described)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()

