"""Views of the user's code with each line's GPU time (``kernscope annotate``,
:class:`~kernscope.analyze.listing.SourceListing`): per file a table of its lines, JSON, CSV. Formatting only."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console
from rich.text import Text

from .formats.json import whole
from .names import term
from .terminal import Col, count, fit_table, pct, us
from .views import Section, layout, view

layout("table", "annotate", ("trace", "lines"))
layout("json", "annotate", ("schema_version", "trace", "step", "framework", "no_line_us", "no_line_pct", "notes", "files",
                            "lines"))
layout("csv", "annotate", ("lines",))

#: what the line column means, by framework (PyTorch's tracer names a frame by its function's first line)
LINE_MEANS = {"jax": "the line each kernel's op was traced from",
              "pytorch": "a function's first line: the GPU time of the launches made in it; a backward kernel counts "
                         "for its forward op's function, marked (backward)"}


@view("table", "annotate.trace")
def _console_head(s: Section, out: Console) -> None:
    f = s.facts
    step = "" if f["step"] is None else f" (step {f['step']})"
    out.print(term(f"{f['trace']}{step}: GPU time by line of your code ({LINE_MEANS[f['framework']]})", "bold"),
              overflow="fold")
    if f["no_line_us"]:
        out.print(term(f"{us(f['no_line_us'])} ({f['no_line_pct']:.1f}% of the GPU time) has no line of your code"),
                  overflow="fold")
    for n in s.result.notes:
        out.print(Text(n, style="yellow"), overflow="fold")
    out.print()


def _file_title(r: dict[str, Any]) -> str:
    where = "" if r["found"] is None or r["found"] == r["file"] else f" (read from {r['found']})"
    if r["found"] is None:
        where = " (not found here: no code shown)"
    elif r["changed"]:
        where += " · CHANGED since the profile was recorded: lines may not match"
    lines = f"{count(r['lines'])} line" + ("" if r["lines"] == 1 else "s")
    return f"{r['file']}{where}: {us(r['total_us'])}, {r['pct']:.1f}% of the GPU time, in {lines}"


def _function(r: dict[str, Any]) -> str:
    """The line's function: its qualified name in the file where the line is in it (``Block.forward`` where PyTorch's
    tracer says ``forward``; a backward row keeps its mark), else as the profile names it."""
    f = r["function"] or ""
    if r["scope"] is None or not r["matches"]:
        return f
    return r["scope"] + (" (backward)" if f.endswith(" (backward)") else "")


@view("table", "annotate.lines")
def _console_lines(s: Section, out: Console) -> None:
    files = s.tables["files"]
    shown = files.head(s.top) if s.top is not None else files
    for f in shown.iter_rows(named=True):
        rows = [[str(r["line"]), us(r["total_us"]), pct(r["pct"]), count(r["count"]), _function(r),
                 r["top_kernel"] or "", ("" if r["matches"] is not False else "? ") + (r["code"] or "")]
                for r in s.df.filter(pl.col("file") == f["file"]).iter_rows(named=True)]
        cols = [Col("line", True), Col("total", True), Col("%", True), Col("count", True),
                Col("function", weight=2, min_width=12, tail=True, optional=True),
                Col("top kernel", weight=1, min_width=10, kernel=True, optional=True),
                Col("code", weight=3, min_width=16)]
        out.print(term(_file_title(f), "bold"), overflow="fold")
        out.print(fit_table("", cols, rows, s.options.width))
        out.print()
    if files.height > shown.height:
        more = files.height - shown.height
        out.print(term(f"… {more} more file{'' if more == 1 else 's'} (--top N)"))


view("json", "annotate.files")(whole)
view("json", "annotate.lines")(whole)


__all__ = ["LINE_MEANS"]
