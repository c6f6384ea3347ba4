"""Excel (xlsxwriter) and CSV-directory report renderers. Formatting only.

Every sheet has a frozen, filterable header, µs columns in ``#,##0.000``, percentages shown with ``%``,
widths that fit the data (names capped), a chart where one helps, and a ``definitions`` sheet from the
glossary. Text is written as text: a kernel named ``=cmd|...`` stays a string, never a formula.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import polars as pl

from ..files import atomic_dir
from ..sink import write_bytes
from .glossary import TERMS
from .tables import csv_text, rounded

NAME_WIDTH_CAP = 60


@dataclass(frozen=True)
class Chart:
    """A chart of one sheet: ``kind`` (bar/column/pie), category column, value column, title."""

    kind: str
    categories: str
    values: str
    title: str
    max_rows: int = 20


REPORT_CHARTS = {
    "gpu_timeline": Chart("bar", "type", "time_us", "GPU timeline (µs)"),
    "category_summary": Chart("pie", "category", "total_us", "GPU time by category"),
    "library_summary": Chart("pie", "library", "total_us", "GPU time by library"),
    "ops_summary": Chart("bar", "launcher", "total_us", "GPU time by launching op (µs), top 20"),
    "steps": Chart("column", "name", "kernel_time_us", "Kernel time per step (µs)", max_rows=200),
}


def _is_pct(name: str) -> bool:
    return name in ("pct", "percent", "pct_wall", "pct_of_launcher", "pct_of_peak", "overlap_pct") or name.endswith("_pct")


def _write_sheet(wb: Any, ws: Any, df: pl.DataFrame, fmt: dict[str, Any], chart: Chart | None, sheet: str) -> None:
    df = rounded(df)
    cols = df.columns
    for j, c in enumerate(cols):
        ws.write_string(0, j, c, fmt["header"])
    for j, (c, dt) in enumerate(df.schema.items()):
        style = fmt["us"] if c.endswith("_us") or c == "time_us" else fmt["pct"] if _is_pct(c) else None
        values = df[c].to_list()
        numeric = dt.is_numeric()
        for i, v in enumerate(values, start=1):
            if v is None:
                continue
            if isinstance(v, bool):
                ws.write_boolean(i, j, v)
            elif numeric and isinstance(v, (int, float)):
                if isinstance(v, float) and not math.isfinite(v):
                    continue
                ws.write_number(i, j, v, style) if style else ws.write_number(i, j, v)
            else:
                ws.write_string(i, j, str(v) if not isinstance(v, (list, dict)) else repr(v))
        if numeric:
            width = max(len(c), 12) + 1
        else:
            longest = max([len(c)] + [len(str(v)) for v in values[:2000] if v is not None])
            width = min(longest, NAME_WIDTH_CAP) + 2
        ws.set_column(j, j, width)
    ws.freeze_panes(1, 0)
    if df.height:
        ws.autofilter(0, 0, df.height, len(cols) - 1)
    if chart and df.height and chart.categories in cols and chart.values in cols:
        n = min(df.height, chart.max_rows)
        ci, vi = cols.index(chart.categories), cols.index(chart.values)
        ch = wb.add_chart({"type": chart.kind})
        ch.add_series({"name": chart.title, "categories": [sheet, 1, ci, n, ci], "values": [sheet, 1, vi, n, vi]})
        ch.set_title({"name": chart.title})
        if chart.kind != "pie":
            ch.set_legend({"none": True})
        ch.set_size({"width": 720, "height": 360 if chart.kind != "bar" else max(300, 22 * n)})
        ws.insert_chart(1, len(cols) + 1, ch)


@dataclass(frozen=True)
class Sheet:
    """One sheet of a workbook: its table and, where one helps, a chart of it."""

    df: pl.DataFrame
    chart: Chart | None = None
    name: str | None = None  #: the sheet's name when it is not the part's


def workbook(sheets: dict[str, Sheet]) -> bytes:
    """A workbook of ``sheets`` (name -> sheet, in order) and a ``definitions`` sheet, as bytes."""
    import io

    import xlsxwriter

    buf = io.BytesIO()
    wb = xlsxwriter.Workbook(buf, {"strings_to_formulas": False, "strings_to_urls": False, "in_memory": True,
                                   "strings_to_numbers": False, "nan_inf_to_errors": False})
    fmt = {
        "header": wb.add_format({"bold": True, "bg_color": "#DDE4EE", "bottom": 1, "text_wrap": False}),
        "us": wb.add_format({"num_format": "#,##0.000"}),
        "pct": wb.add_format({"num_format": '0.00"%"'}),
    }
    used: set[str] = set()
    for name, sh in sheets.items():
        sheet = name[:31]
        ws = wb.add_worksheet(sheet)
        _write_sheet(wb, ws, sh.df, fmt, sh.chart, sheet)
        used.update(sh.df.columns)
    _definitions(wb, fmt, used)
    import xlsxwriter.exceptions

    try:
        wb.close()
    except xlsxwriter.exceptions.FileCreateError as e:  # xlsxwriter wraps the OSError of a full disk
        cause = e.__cause__ or e.__context__ or (e.args[0] if e.args else e)
        raise cause if isinstance(cause, OSError) else OSError(str(cause)) from None
    return buf.getvalue()


def write_xlsx(path: str | os.PathLike[str], sheets: dict[str, pl.DataFrame], charts: dict[str, Chart] = REPORT_CHARTS) -> None:
    """Write ``sheets`` (with the ``charts`` of the sheets named there) and a ``definitions`` sheet to ``path``,
    atomically."""
    write_bytes(path, workbook({name: Sheet(df, charts.get(name)) for name, df in sheets.items()}))


def _definitions(wb: Any, fmt: dict[str, Any], columns: set[str]) -> None:
    ws = wb.add_worksheet("definitions")
    for j, h in enumerate(("column", "unit", "meaning")):
        ws.write_string(0, j, h, fmt["header"])
    row = 1
    for name in sorted(columns):
        t = TERMS.get(name)
        if t is None:
            continue
        ws.write_string(row, 0, t.name)
        ws.write_string(row, 1, t.unit)
        ws.write_string(row, 2, t.meaning)
        row += 1
    ws.set_column(0, 0, 26)
    ws.set_column(1, 1, 8)
    ws.set_column(2, 2, 120)
    ws.freeze_panes(1, 0)


def write_csv_dir(directory: str | os.PathLike[str], sheets: dict[str, pl.DataFrame]) -> None:
    """One CSV per sheet in ``directory`` (written to a temp dir, then moved in)."""
    with atomic_dir(directory) as tmp:
        for name, df in sheets.items():
            (tmp / f"{name}.csv").write_text(csv_text(df), encoding="utf-8")
