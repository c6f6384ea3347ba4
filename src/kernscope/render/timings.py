"""``kernscope analyze --timings``: where a cold analyze of the user's file spent its time, phase by phase."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from .terminal import Col, fit_table


def render_timings(con: Console, path: str, size_bytes: int, rows: list[tuple[str, float]]) -> None:
    """The phases (seconds, share of their total) and the file's rate through them (MB/s)."""
    total = sum(s for _, s in rows) or 1e-9
    con.print(Text(f"{path}: {size_bytes / 1e6:,.1f} MB on disk, read cold: {size_bytes / 1e6 / total:,.1f} MB/s "
                   "through these phases", overflow="fold"))  # a path: folded, never cut
    body = [[name, f"{s:,.3f}", f"{100 * s / total:.1f}%"] for name, s in rows]
    body.append(["total", f"{total:,.3f}", "100.0%"])
    con.print(fit_table("", [Col("phase"), Col("seconds", numeric=True), Col("share", numeric=True)], body, con.width))
