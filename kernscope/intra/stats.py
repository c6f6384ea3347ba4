"""Analyses of decoded intra-kernel tasks: pure functions, DataFrames in, DataFrames/dicts out."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..intervals import union_by
from ..scalars import as_float, as_int


def task_stats(tasks: pl.DataFrame) -> pl.DataFrame:
    """Per task: count, mean/p50/p95/max duration (ns) and total time."""
    return (
        tasks.group_by("task")
        .agg(
            pl.len().alias("count"),
            pl.col("duration_ns").mean().alias("mean_ns"),
            pl.col("duration_ns").quantile(0.5, "nearest").alias("p50_ns"),
            pl.col("duration_ns").quantile(0.95, "nearest").alias("p95_ns"),
            pl.col("duration_ns").max().alias("max_ns"),
            pl.col("duration_ns").sum().alias("total_ns"),
        )
        .sort("total_ns", descending=True)
    )


def sm_stats(tasks: pl.DataFrame) -> pl.DataFrame:
    """Per SM: blocks, tasks, busy time (union of its task intervals) and busy fraction of the kernel span."""
    if tasks.height == 0:
        return pl.DataFrame(schema={"sm": pl.Int64, "blocks": pl.UInt32, "tasks": pl.UInt32, "busy_ns": pl.Int64,
                                    "busy_fraction": pl.Float64})
    span = as_int(tasks["end_ns"].max()) - as_int(tasks["start_ns"].min())
    busy = union_by(tasks, ["sm"], start="start_ns", end="end_ns").rename({"len": "busy_ns"})
    per = tasks.group_by("sm").agg(pl.col("block").n_unique().alias("blocks"), pl.len().alias("tasks"))
    return per.join(busy, on="sm").with_columns((pl.col("busy_ns") / max(span, 1)).alias("busy_fraction")).sort("sm")


def kernel_summary(tasks: pl.DataFrame) -> dict[str, Any]:
    """Kernel-level facts: span, tail (last block end vs median block end), SM imbalance."""
    if tasks.height == 0:
        return {"tasks": 0, "blocks": 0, "sms": 0, "span_ns": 0}
    t0 = as_int(tasks["start_ns"].min())
    blocks = tasks.group_by("block").agg(pl.col("end_ns").max().alias("end"), pl.col("start_ns").min().alias("start"))
    sms = sm_stats(tasks)
    busy_mean = as_float(sms["busy_ns"].mean())
    busy_max = as_int(sms["busy_ns"].max())
    last_end = as_int(blocks["end"].max()) - t0
    median_end = as_float(blocks["end"].median()) - t0
    return {
        "tasks": tasks.height,
        "blocks": blocks.height,
        "sms": sms.height,
        "span_ns": as_int(tasks["end_ns"].max()) - t0,
        "last_block_end_ns": last_end,
        "median_block_end_ns": median_end,
        "tail_ns": last_end - median_end,
        "tail_ratio": last_end / max(median_end, 1.0),
        "sm_busy_mean_ns": busy_mean,
        "sm_busy_max_ns": busy_max,
        "sm_imbalance": busy_max / busy_mean if busy_mean else 0.0,
        "sm_busy_fraction_mean": as_float(sms["busy_fraction"].mean()),
    }
