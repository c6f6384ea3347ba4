"""``kernscope analyze --timings``: where a cold analyze of the user's file spent its time, phase by phase."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from .terminal import Col, fit_table


def render_timings(con: Console, path: str, size_bytes: int, rows: list[tuple[str, float]], *,
                   events: int | None = None, gpu_rows: int | None = None) -> None:
    """The phases (seconds, share of their total) and the file's rate through them (MB/s), and where the trace's
    ``events`` and ``gpu_rows`` are given, its events per second through them: the analyses scale with the rows, and a
    JAX profile holds 2-4x the events of a Kineto trace of its size (and most of them GPU rows)."""
    total = sum(s for _, s in rows) or 1e-9
    con.print(Text(f"{path}: {size_bytes / 1e6:,.1f} MB on disk, read cold: {size_bytes / 1e6 / total:,.1f} MB/s "
                   "through these phases", overflow="fold"))  # a path: folded, never cut
    if events is not None:
        rows_of = f", {gpu_rows:,} of them GPU rows" if gpu_rows is not None else ""
        con.print(Text(f"{events:,} events: {events / 1e6 / total:,.2f} M events/s{rows_of}", overflow="fold"))
    body = [[name, f"{s:,.3f}", f"{100 * s / total:.1f}%"] for name, s in rows]
    body.append(["total", f"{total:,.3f}", "100.0%"])
    con.print(fit_table("", [Col("phase"), Col("seconds", numeric=True), Col("share", numeric=True)], body, con.width))
