"""Excel: one sheet per table (frozen, filterable header; µs as ``#,##0.000``; charts where a view adds one),
a ``facts`` sheet first when the result has facts and no layout, and a ``definitions`` sheet from the glossary."""

from __future__ import annotations

import polars as pl

from ...result import Result
from ..excel import Sheet, workbook
from ..views import OMIT, Options, Walk


def facts_sheet(facts: dict[str, object]) -> pl.DataFrame:
    """Facts as a two-column (key, value) table of text."""
    return pl.DataFrame({"key": list(facts), "value": [str(v) for v in facts.values()]},
                        schema={"key": pl.String, "value": pl.String})


def sheets(result: Result, options: Options) -> dict[str, Sheet]:
    """The result's sheets in order (name -> sheet): the xlsx layout's parts, through their views."""
    walk = Walk("xlsx", result, options)
    out: dict[str, Sheet] = {}
    if not walk.has_layout() and walk.facts:
        out["facts"] = Sheet(facts_sheet(walk.facts))
    for s, view in walk:
        if view is not None:
            got = view(s)
            if got is not OMIT:
                out[got.name or s.name] = got
        elif s.name in s.tables:
            out[s.name] = Sheet(s.df)
    return out


class Xlsx:
    """The ``xlsx`` format: the workbook's bytes."""

    def render(self, result: Result, options: Options) -> bytes:
        return workbook(sheets(result, options))


#: this module's renderer (the format's name is the module's)
RENDERER = Xlsx
