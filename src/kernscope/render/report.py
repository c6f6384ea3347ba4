"""Views of one trace's report (:class:`~kernscope.analyze.report.Report`): its workbook (sheets with charts, the
perf device and diff summary as text sheets) and its HTML page (the GPU timeline, breakdown, per-step bars, the
headline, sortable tables, the memory chart). Formatting only."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ..analyze.report import Report
from ..analyze.summary import headline
from .diff import summary_sheet
from .excel import REPORT_CHARTS, Sheet
from .formats.html import sheet_view
from .html.analysis import table, timeline_data
from .memory import chart_data
from .names import NO_SOURCE, sources_title
from .perf import device_sheet
from .tables import records
from .views import OMIT, Section, layout, view

layout("xlsx", "report", lambda r: r.sheet_names())
layout("html", "report", lambda r: ("trace", "timeline", "tables", "critical_path", "annotations", *r.companion_names()))


def _charted(s: Section) -> Sheet:
    return Sheet(s.df, REPORT_CHARTS.get(s.name))


for _name in REPORT_CHARTS:
    view("xlsx", f"report.{_name}")(_charted)


@view("xlsx", "report.perf_device")
def _xlsx_perf_device(s: Section) -> Any:
    return Sheet(device_sheet(s.result.perf)) if s.result.perf is not None else OMIT


@view("xlsx", "report.diff_summary")
def _xlsx_diff_summary(s: Section) -> Any:
    return Sheet(summary_sheet(s.result.diff)) if s.result.diff is not None else OMIT


@view("html", "report.trace")
def _html_trace(s: Section) -> dict[str, Any]:
    from ..version import __version__

    a = s.result.analysis
    f = s.facts["trace"]
    kinds = a.findings_by_kind.select("rule", "title", "text", pl.col("worst_us").alias("win_back_us"), "occurrences", "total_us")
    return {"headline": {**headline(a), "findings": records(kinds.head(3))},  # (by kind: not three steps of one rule)
            "facts": {k: f[k] for k in ("events", "gpu_events", "kernels", "kernel_time_us", "devices", "device_names",
                                        "rank", "world_size", "platform", "steps", "step_source", "graph_launches")},
            "terms": list(f), "subtitle": f"kernscope {__version__} · {a.facts.kernels:,} kernels"}


@view("html", "report.timeline")
def _html_timeline(s: Section) -> dict[str, Any]:
    """The GPU timeline per device and stream (intra-kernel rows below their stream), the breakdown, per-step
    category bars and the memory chart."""
    r: Report = s.result
    a = r.analysis
    flush = None
    if a.benchmark is not None:
        flush = {(k.name, k.ts_ns) for k in a.benchmark.flush_kernels if k.ts_ns is not None}
    step_names, cats, values = _step_category_grid(a.step_categories)
    return {"timeline": timeline_data(a.gpu_interned, a.trace.steps, flush, r.intra_rows),
            "breakdown": records(a.timeline.select("type", "time_us", "percent")),
            # several GPUs: each one's breakdown too (the overall one is their sum, device time)
            "breakdown_by_device": (records(a.timeline_by_device.select("device", "type", "time_us", "percent"))
                                    if a.timeline_by_device["device"].n_unique() > 1 else []),
            "step_categories": {"steps": step_names, "categories": cats, "values": values},
            "memory": chart_data(r.memory, s.facts["t0_ns"]) if r.memory is not None else [],
            "terms": [str(t) for t in a.timeline["type"].to_list()]}


def _step_category_grid(sc: pl.DataFrame) -> tuple[list[str], list[str], list[list[float]]]:
    """The per-step category bars' data from ``step_categories`` (step, name, category, total_us): the step names in
    order, the categories sorted, and each name's µs per category (0 where it has none; of a name that two steps
    share, the later step's). One pass over the rows (a filter per step took 1.2 s of a 3,300-step profile's report)."""
    if not sc.height:
        return [], [], []
    w = sc.select(pl.col("name").cast(pl.String), pl.col("category").cast(pl.String), pl.col("total_us").cast(pl.Float64))
    names = w["name"].unique(maintain_order=True).to_list()
    cats = sorted(w["category"].unique().to_list())
    last = w.unique(["name", "category"], keep="last", maintain_order=True)
    grid = np.zeros((len(names), len(cats)))
    grid[last["name"].cast(pl.Enum(names)).to_physical().to_numpy(),
         last["category"].cast(pl.Enum(cats)).to_physical().to_numpy()] = last["total_us"].fill_null(0.0).to_numpy()
    return names, cats, grid.tolist()


@view("html", "report.tables")
def _html_tables(s: Section) -> dict[str, Any]:
    a = s.result.analysis
    return {"tables": {
        "kernels": table(a.kernels.select("name", "launcher", "category", "count", "total_us", "pct", "mean_us",
                                          "min_us", "max_us", "library",
                                          *[c for c in ("decided_by", "decided_op") if c in a.kernels.columns]),
                         "Kernels by name and launching op"),
        "ops": table(a.ops.select("launcher", "count", "total_us", "pct"), "GPU time by launching CPU op"),
        "categories": table(a.categories.select("category", "count", "total_us", "pct"), "GPU time by category"),
        "libraries": table(a.libraries.select("library", "kernels", "count", "total_us", "pct"),
                           "GPU time by library (who wrote the kernel)"),
        # (the row of GPU records without a line says so, as in the terminal)
        **({"sources": table(a.sources.select(pl.col("source").fill_null(NO_SOURCE), "function", "kernels", "top_kernel",
                                              "count", "total_us", "pct", "mean_us"), sources_title(a.trace.metadata.get("framework")))}
           if a.sources.height else {}),
        "steps": table(a.steps, "Steps"),
    }}


@view("html", "report.critical_path")
def _html_critical_path(s: Section) -> Any:
    cp = s.result.analysis.critical_path
    if cp is None or not cp.steps.height:
        return OMIT
    return {"views": [
        {"name": "critical_path", "title": "Critical path by step (what each step's end waited for)",
         "table": table(cp.steps, "critical_path"), **({"note": " ".join(cp.notes)} if cp.notes else {})},
        {"name": "critical_path_ops", "title": "Host time on the critical path, by top-level CPU op",
         "table": table(cp.ops, "critical_path_ops")},
        {"name": "critical_path_whatif", "title": "What-ifs on the critical path (first order)",
         "table": table(cp.whatif, "critical_path_whatif")}]}


@view("html", "report.annotations")
def _html_annotations(s: Section) -> Any:
    ann = s.result.analysis.annotations
    if ann is None:
        return OMIT
    return {"views": [{"name": "annotations", "title": "GPU time by annotation (times include nested ranges)",
                       "table": table(ann.ranges, "annotations")}]}


@view("html", "report.perf_device")
def _html_perf_device(s: Section) -> Any:
    return {"views": [sheet_view("perf_device", device_sheet(s.result.perf))]} if s.result.perf is not None else OMIT


@view("html", "report.diff_summary")
def _html_diff_summary(s: Section) -> Any:
    return {"views": [sheet_view("diff_summary", summary_sheet(s.result.diff))]} if s.result.diff is not None else OMIT
