"""Excel (xlsxwriter) and CSV-directory report renderers."""

from __future__ import annotations

import os

import polars as pl

from ..analyze.summary import Analysis
from ..files import atomic_dir, atomic_path


def report_sheets(a: Analysis) -> dict[str, pl.DataFrame]:
    """Sheet name -> table, in report order."""
    return {
        "gpu_timeline": a.timeline,
        "gpu_timeline_by_device": a.timeline_by_device,
        "gpu_timeline_by_step": a.timeline_by_step,
        "kernel_summary": a.kernels_by_stream,
        "category_summary": a.categories,
        "ops_summary": a.ops,
        "ops_summary_by_category": a.ops_by_category,
        "launcher_categories": a.launcher_categories,
        "steps": a.steps,
    }


def write_xlsx(a: Analysis, path: str | os.PathLike[str], sheets: dict[str, pl.DataFrame] | None = None) -> None:
    sheets = sheets if sheets is not None else report_sheets(a)
    with atomic_path(path) as tmp:
        import xlsxwriter

        wb = xlsxwriter.Workbook(str(tmp))
        try:
            for name, df in sheets.items():
                df.write_excel(wb, worksheet=name[:31], autofit=True)
        finally:
            wb.close()


def write_csv_dir(a: Analysis, directory: str | os.PathLike[str], sheets: dict[str, pl.DataFrame] | None = None) -> None:
    """One CSV per sheet in ``directory`` (written to a temp dir, then moved in)."""
    with atomic_dir(directory) as tmp:
        for name, df in (sheets if sheets is not None else report_sheets(a)).items():
            df.write_csv(tmp / f"{name}.csv")
