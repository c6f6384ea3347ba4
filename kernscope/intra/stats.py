"""Analyses of decoded intra-kernel tasks: pure functions, DataFrames in, DataFrames/dicts out."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..analyze.timeline import _union_by


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
        return pl.DataFrame(schema={"sm": pl.Int64, "blocks": pl.UInt32, "tasks": pl.UInt32, "busy_ns": pl.Int64, "busy_fraction": pl.Float64})
    span = int(tasks["end_ns"].max() - tasks["start_ns"].min())
    busy = _union_by(tasks.rename({"start_ns": "ts", "end_ns": "end"}), ["sm"]).rename({"len": "busy_ns"})
    per = tasks.group_by("sm").agg(pl.col("block").n_unique().alias("blocks"), pl.len().alias("tasks"))
    return per.join(busy, on="sm").with_columns((pl.col("busy_ns") / max(span, 1)).alias("busy_fraction")).sort("sm")


def kernel_summary(tasks: pl.DataFrame) -> dict[str, Any]:
    """Kernel-level facts: span, tail (last block end vs median block end), SM imbalance."""
    if tasks.height == 0:
        return {"tasks": 0, "blocks": 0, "sms": 0, "span_ns": 0}
    t0 = int(tasks["start_ns"].min())
    blocks = tasks.group_by("block").agg(pl.col("end_ns").max().alias("end"), pl.col("start_ns").min().alias("start"))
    sms = sm_stats(tasks)
    busy = sms["busy_ns"]
    return {
        "tasks": tasks.height,
        "blocks": blocks.height,
        "sms": sms.height,
        "span_ns": int(tasks["end_ns"].max() - t0),
        "last_block_end_ns": int(blocks["end"].max() - t0),
        "median_block_end_ns": float(blocks["end"].median() - t0),
        "tail_ns": float(blocks["end"].max() - blocks["end"].median()),
        "tail_ratio": float((blocks["end"].max() - t0) / max(blocks["end"].median() - t0, 1)),
        "sm_busy_mean_ns": float(busy.mean()),
        "sm_busy_max_ns": int(busy.max()),
        "sm_imbalance": float(busy.max() / busy.mean()) if busy.mean() else 0.0,
        "sm_busy_fraction_mean": float(sms["busy_fraction"].mean()),
    }
