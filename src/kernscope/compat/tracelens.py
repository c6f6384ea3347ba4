"""TraceLens-style entry points, as proposed in the kernel-name categorization seed.

A thin layer over kernscope's own API for users coming from TraceLens::

    perf_analyzer = TreePerfAnalyzer(trace_file, use_kernel_name_categories=True)
    perf_analyzer.get_df_kernel_summary()          # adds a kernel_category column
    perf_analyzer.get_df_kernel_category_summary() # the grouped view: per cpu_op, per category

    generate_perf_report_pytorch(trace_file, output_xlsx_path="report.xlsx", use_kernel_name_categories=True)

Tables are polars DataFrames (``.to_pandas()`` for pandas) with TraceLens's column names; times in
µs unless the column says ms.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl

from ..analyze.categories import Categorizer
from ..analyze.kernels import gpu_table, launcher_category_summary, summarize, wall_time_ns
from ..analyze.summary import Analysis, analyze
from ..model import Trace
from ..pipeline import load


class TreePerfAnalyzer:
    """Kernel and op summaries of one trace; ``use_kernel_name_categories`` adds ``kernel_category``."""

    def __init__(self, trace_file: str | os.PathLike[str] | Trace, use_kernel_name_categories: bool = False,
                 rules: str | os.PathLike[str] | dict[str, Any] | None = None, **load_kwargs: Any) -> None:
        self.trace = trace_file if isinstance(trace_file, Trace) else load(trace_file, **load_kwargs)
        self.use_kernel_name_categories = use_kernel_name_categories
        cat = Categorizer.builtin()
        self.categorizer = cat.with_rules(rules if isinstance(rules, (dict, Path)) else Path(rules)) if rules is not None else cat
        self._gpu = gpu_table(self.trace, self.categorizer)

    @classmethod
    def from_file(cls, profile_filepath: str | os.PathLike[str], *args: Any, **kwargs: Any) -> "TreePerfAnalyzer":
        return cls(profile_filepath, *args, **kwargs)

    def analysis(self) -> Analysis:
        return analyze(self.trace, categorizer=self.categorizer, use_kernel_name_categories=self.use_kernel_name_categories)

    def get_df_kernel_summary(self) -> pl.DataFrame:
        """One row per (cpu_op, [kernel_category,] kernel name, stream)."""
        keys = ["launcher"] + (["category"] if self.use_kernel_name_categories else []) + ["name", "stream"]
        k = self._gpu.filter(pl.col("kind") == "kernel")
        s = summarize(k, keys, wall_ns=wall_time_ns(self._gpu))
        out = s.select(
            pl.col("launcher").alias("Parent cpu_op"),
            *([pl.col("category").alias("kernel_category")] if self.use_kernel_name_categories else []),
            pl.col("name").alias("Kernel name"),
            pl.col("stream").alias("Kernel stream"),
            pl.col("total_us").alias("Kernel duration (µs)_sum"),
            pl.col("count").alias("Kernel duration (µs)_count"),
            pl.col("mean_us").alias("Kernel duration (µs)_mean"),
            pl.col("min_us").alias("Kernel duration (µs)_min"),
            pl.col("max_us").alias("Kernel duration (µs)_max"),
            pl.col("pct").alias("Percent of kernels time (%)"),
            pl.col("pct_wall").alias("Percent of total time (%)"),
        )
        return out

    def get_df_kernel_category_summary(self) -> pl.DataFrame:
        """The seed's grouped view: per cpu_op and kernel_category, count, total time, % of the op's time."""
        if not self.use_kernel_name_categories:
            raise ValueError("construct with use_kernel_name_categories=True for the category view")
        s = launcher_category_summary(self._gpu.filter(pl.col("kind") == "kernel"))
        return s.select(
            pl.col("launcher").alias("cpu_op"),
            pl.col("category").alias("kernel_category"),
            pl.col("count"),
            (pl.col("total_us") / 1000).alias("total_time_ms"),
            pl.col("pct_of_launcher").alias("% of cpu_op time"),
        )

    def get_df_gpu_timeline(self) -> pl.DataFrame:
        """TraceLens ``gpu_timeline``: type, time ms, percent (GPU work launched in the trace window)."""
        from ..analyze.timeline import gpu_timeline

        tl = gpu_timeline(self._gpu, by=None, linked_only=True)
        return tl.select("type", (pl.col("time_us") / 1000).alias("time ms"), "percent")

    def get_df_ops_summary(self) -> pl.DataFrame:
        s = summarize(self._gpu, ["launcher"], wall_ns=wall_time_ns(self._gpu))
        return s.select(pl.col("launcher").alias("name"), pl.col("total_us").alias("total_direct_kernel_time_sum"),
                        pl.col("count").alias("Count"), pl.col("pct").alias("Percentage (%)"))


def generate_perf_report_pytorch(
    profile_json_path: str | os.PathLike[str],
    output_xlsx_path: str | os.PathLike[str] | None = None,
    output_csvs_dir: str | os.PathLike[str] | None = None,
    use_kernel_name_categories: bool = False,
    rules: str | os.PathLike[str] | dict[str, Any] | None = None,
    **load_kwargs: Any,
) -> dict[str, pl.DataFrame]:
    """Build the report tables (and write .xlsx and/or CSVs); returns sheet name -> DataFrame."""
    from ..analyze.report import Report
    from ..render.excel import write_csv_dir, write_xlsx

    pa = TreePerfAnalyzer(profile_json_path, use_kernel_name_categories=use_kernel_name_categories, rules=rules, **load_kwargs)
    a = pa.analysis()
    sheets = Report(a).analysis_tables()
    sheets["gpu_timeline"] = pa.get_df_gpu_timeline()  # TraceLens's columns and linked-only semantics
    sheets["kernel_summary"] = pa.get_df_kernel_summary()
    if use_kernel_name_categories:
        sheets["kernel_category_summary"] = pa.get_df_kernel_category_summary()
    if output_xlsx_path:
        write_xlsx(output_xlsx_path, sheets)
    if output_csvs_dir:
        write_csv_dir(output_csvs_dir, sheets)
    return sheets
