"""Views of a folder of benchmark traces (:class:`~kernscope.analyze.bench_dir.BenchDir`)."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.text import Text

from .excel import Sheet
from .formats.json import whole
from .names import term
from .tables import csv_text
from .terminal import Col, fit_table, pct, us
from .views import Section, layout, view


def _kernels(names: list[str] | None) -> str:
    if not names:
        return "-"
    return names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1})"


layout("table", "bench_dir", ("cells",))
layout("json", "bench_dir", ("root", "layout", "notes", "cells"))
layout("csv", "bench_dir", ("cells",))
layout("xlsx", "bench_dir", ("cells",))


@view("table", "bench_dir.cells")
def _console_cells(s: Section, out: Console) -> None:
    b = s.result
    out.print(term(f"{b.root}: {b.cells.height} benchmark traces ({b.layout} layout)", "bold"), overflow="fold")
    for n in b.notes:
        out.print(Text(n, style="yellow"), overflow="fold")
    out.print()
    for (op,), part in b.cells.group_by(["op"], maintain_order=True):
        rows = []
        for r in part.iter_rows(named=True):
            tf = "-" if r["tflops_per_s"] is None else f"{r['tflops_per_s']:,.2f}"
            rows.append([str(r["input"]), ("* " if r["fastest"] else "  ") + r["impl"], r["step"] or "-",
                         _kernels(r["flush_kernels"]), _kernels(r["compute_kernels"]), us(r["kernel_time_us"]), tf,
                         pct(r["pct_of_peak"]), "-" if r["vs_fastest"] is None else f"{r['vs_fastest']:.2f}x"])
        cols = [Col("input", True), Col("impl", min_width=8), Col("step", min_width=8), Col("flush", weight=2, min_width=8),
                Col("compute kernels", weight=4, min_width=12), Col("kernel time", True), Col("TFLOP/s", True),
                Col("% of peak", True), Col("vs fastest", True)]
        out.print(fit_table(f"{op or 'benchmark'}: per input and impl (* fastest; TFLOP/s from the perf model)", cols,
                            rows, s.options.width))
        out.print()



view("json", "bench_dir.cells")(whole)


@view("csv", "bench_dir.cells")
def _csv_cells(s: Section) -> str:
    return csv_text(s.df.with_columns(pl.col("flush_kernels").list.join(" | "), pl.col("compute_kernels").list.join(" | ")))


@view("xlsx", "bench_dir.cells")
def _xlsx_cells(s: Section) -> Sheet:
    from .html.views import flat

    return Sheet(flat(s.df))
