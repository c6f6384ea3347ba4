"""Views of the kernels' hardware counters (``kernscope counters``, :class:`~kernscope.analyze.counters.KernelCounters`):
terminal tables, JSON, CSV and sheets. Formatting only."""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

from .excel import Sheet
from .formats.json import whole
from .names import term
from .terminal import Col, count, fit_table, si, size
from .views import Section, layout, view

layout("table", "counters", ("trace", "kernels", "metrics"))
layout("json", "counters", ("schema_version", "trace", "kernels_profiled", "linked", "derived", "notes", "kernels", "metrics",
                            "ranges"))
layout("csv", "counters", ("kernels",))
layout("xlsx", "counters", ("kernels", "metrics", "ranges"))

#: headers of the derived columns in the terminal
DERIVED_HEADERS = {"flops_fp64": "FLOP fp64", "flops_fp32": "FLOP fp32", "flops_fp16": "FLOP fp16", "flops": "FLOP",
                   "dram_bytes": "DRAM bytes", "flops_per_byte": "FLOP/byte"}
#: the counters shown in the terminal besides the derived columns (JSON, CSV and the sheets have every one)
TERMINAL_METRICS = 4


def short_metric(name: str) -> str:
    """A counter's name without the parts every SASS or DRAM counter has: ``smsp__sass_thread_inst_executed_op_ffma
    _pred_on.sum`` → ``ffma``, ``dram__bytes_read.sum`` → ``dram read``."""
    n = re.sub(r"^smsp__sass_thread_inst_executed_op_(\w+?)_pred_on\.sum$", r"\1", name)
    n = re.sub(r"^dram__bytes_(\w+)\.sum$", r"dram \1", n)
    return n


def _cell(col: str, v: float | None) -> str:
    if col == "dram_bytes" or col.startswith("dram__bytes"):
        return size(v)
    if col == "flops_per_byte":
        return "-" if v is None else f"{v:,.2f}"
    return si(v)


@view("table", "counters.trace")
def _console_head(s: Section, out: Console) -> None:
    f = s.facts
    out.print(term(f"{f['trace']}: {count(f['kernels_profiled'])} kernels profiled with hardware counters (CUPTI's range "
                   f"profiler){'' if f['linked'] else '; not matched to their launches'}", "bold"), overflow="fold")
    for n in s.result.notes:
        out.print(Text(n, style="yellow"), overflow="fold")
    out.print()


@view("table", "counters.kernels")
def _console_kernels(s: Section, out: Console) -> None:
    d = s.shown
    derived = s.facts["derived"]
    metrics = [c for c in s.df.columns if c not in ("name", "op", "count") and c not in derived]
    shown = metrics[:TERMINAL_METRICS] if derived else metrics[:TERMINAL_METRICS * 2]
    cols = [Col("kernel", weight=3, min_width=12, kernel=True), Col("op", weight=2, min_width=14), Col("count", True),
            *(Col(DERIVED_HEADERS[c], True) for c in derived),
            *(Col(short_metric(m), True, optional=True) for m in shown)]
    rows = [[r["name"] or "", r["op"] or "", count(r["count"]), *(_cell(c, r[c]) for c in (*derived, *shown))]
            for r in d.iter_rows(named=True)]
    out.print(fit_table("Counters by kernel and launching op (summed over its launches)", cols, rows, s.options.width,
                        more=s.df.height - d.height))
    out.print()


@view("table", "counters.metrics")
def _console_metrics(s: Section, out: Console) -> None:
    rows = [[r["metric"], _cell(r["metric"], r["total"]), count(r["kernels"])] for r in s.df.iter_rows(named=True)]
    out.print(fit_table("Counters recorded (totals over every profiled kernel)",
                        [Col("metric", weight=1, min_width=20, tail=True), Col("total", True),
                         Col("kernels (nonzero)", True)], rows, s.options.width))
    out.print()


view("json", "counters.metrics")(whole)


def _sheet(s: Section) -> Sheet:
    return Sheet(s.df, name=f"counters_{s.name}")


for _t in ("kernels", "metrics", "ranges"):
    view("xlsx", f"counters.{_t}")(_sheet)


__all__ = ["DERIVED_HEADERS", "short_metric"]
