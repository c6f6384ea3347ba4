"""Renderers for a folder of benchmark traces (:class:`~kernscope.analyze.bench_dir.BenchDir`)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from rich.console import Console
from rich.text import Text

from ..analyze.bench_dir import BenchDir
from .names import term
from .tables import csv_text, records
from .terminal import Col, fit_table, pct, us


def _kernels(names: list[str] | None) -> str:
    if not names:
        return "-"
    return names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1})"


def render(b: BenchDir, console: Console, width: int | None = None) -> None:
    w = width or console.width
    console.print(term(f"{b.root}: {b.cells.height} benchmark traces ({b.layout} layout)", "bold"), overflow="fold")
    for n in b.notes:
        console.print(Text(n, style="yellow"), overflow="fold")
    console.print()
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
        console.print(fit_table(f"{op or 'benchmark'}: per input and impl (* fastest; TFLOP/s from the perf model)", cols,
                                rows, w))
        console.print()


def to_dict(b: BenchDir) -> dict[str, Any]:
    return {"root": b.root, "layout": b.layout, "notes": list(b.notes), "cells": records(b.cells)}


def to_json(b: BenchDir) -> str:
    return json.dumps(to_dict(b), indent=2, ensure_ascii=False)


def to_csv(b: BenchDir) -> str:
    flat = b.cells.with_columns(pl.col("flush_kernels").list.join(" | "), pl.col("compute_kernels").list.join(" | "))
    return csv_text(flat)
