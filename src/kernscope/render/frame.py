"""Any DataFrame as a terminal table, JSON (records) or CSV: the ``kernscope sql`` output. Formatting only."""

from __future__ import annotations

import json

import polars as pl
from rich.console import Console

from .terminal import Col, fit_table


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def render(df: pl.DataFrame, console: Console, title: str, width: int, top: int | None = None) -> None:
    """``df`` fitted to ``width`` (numbers never cut; columns that do not fit are named below)."""
    shown = df.head(top) if top is not None else df
    cols = [Col(c, numeric=t.is_numeric()) for c, t in df.schema.items()]
    rows = [[_cell(v) for v in r] for r in shown.iter_rows()]
    more = df.height - shown.height
    console.print(fit_table(f"{title} ({df.height:,} row{'s' if df.height != 1 else ''})", cols, rows, width, more=more))


def to_json(df: pl.DataFrame) -> str:
    """``{"columns": [...], "rows": [{...}, ...]}``; non-finite floats as null."""
    rows = df.with_columns(pl.col(pl.Float64, pl.Float32).replace([float("inf"), float("-inf")], None).fill_nan(None)
                           ).to_dicts()
    return json.dumps({"columns": df.columns, "rows": rows}, indent=2, default=str, allow_nan=False)


def to_csv(df: pl.DataFrame) -> str:
    """CSV with a header; nested values as JSON text."""
    nested = [c for c, t in df.schema.items() if isinstance(t, (pl.List, pl.Struct, pl.Array))]
    flat = df.with_columns(pl.col(c).map_elements(lambda v: json.dumps(v, default=str), return_dtype=pl.String)
                           for c in nested) if nested else df
    return flat.write_csv()
