"""The terminal: each part of a result as a table (or, for a fact, a line) fitted to ``options.width``."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console as RichConsole

from ...result import Result
from ..names import term
from ..terminal import Col, fit_table
from ..views import Options, Section, Walk


def cell(v: Any) -> str:
    """A value as a table cell: numbers with thousands separators (floats to 3 decimals), None as ``-``."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def table(s: Section, out: RichConsole, title: str | None = None) -> None:
    """A table part: every column, the first ``top`` rows, numbers never cut."""
    df = s.df
    shown = s.shown
    cols = [Col(c, numeric=t.is_numeric()) for c, t in df.schema.items()]
    rows = [[cell(v) for v in r] for r in shown.iter_rows()]
    name = title if title is not None else s.name.replace("_", " ")
    out.print(fit_table(f"{name} ({df.height:,} row{'s' if df.height != 1 else ''})", cols, rows, s.options.width,
                        more=df.height - shown.height))


def default(s: Section, out: RichConsole) -> None:
    if s.name in s.tables:
        table(s, out)
        out.print()
    else:
        out.print(term(f"{s.name.replace('_', ' ')}: {cell(s.facts[s.name])}"), overflow="fold")


class Console:
    """The ``table`` format: what ``kernscope`` prints by default."""

    def render(self, result: Result, options: Options) -> bytes:
        buf = io.StringIO()
        out = RichConsole(file=buf, width=options.width, force_terminal=options.color, no_color=not options.color,
                          highlight=False, emoji=False)
        for s, view in Walk("table", result, options):
            view(s, out) if view is not None else default(s, out)
        return buf.getvalue().encode()


#: this module's renderer (the format's name is the module's)
RENDERER = Console
