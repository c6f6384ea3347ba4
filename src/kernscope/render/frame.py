"""Views of a query's answer (:class:`~kernscope.analyze.sql.QueryResult`, ``kernscope sql``): a terminal table
titled with the query, ``{"columns": [...], "rows": [{...}]}`` in JSON, CSV with nested values as JSON text."""

from __future__ import annotations

import json

import polars as pl
from rich.console import Console

from .formats.json import raw_rows
from .formats.table import table
from .views import Section, layout, view

layout("table", "query", ("rows",))
layout("json", "query", ("columns", "rows"))
layout("csv", "query", ("rows",))


@view("table", "query.rows")
def console_rows(s: Section, out: Console) -> None:
    """The answer fitted to the width (numbers never cut; columns that do not fit are named below)."""
    table(s, out, title=s.result.title)


view("json", "query.rows")(raw_rows)  # row objects; non-finite floats as null


@view("csv", "query.rows")
def csv_rows(s: Section) -> str:
    """CSV with a header; nested values as JSON text."""
    df = s.df
    nested = [c for c, t in df.schema.items() if isinstance(t, (pl.List, pl.Struct, pl.Array))]
    flat = df.with_columns(pl.col(c).map_elements(lambda v: json.dumps(v, default=str), return_dtype=pl.String)
                           for c in nested) if nested else df
    return flat.write_csv()
