"""Profiler steps (``ProfilerStep#N``) and the step of each GPU event, chosen by its *launch* time."""

from __future__ import annotations

import polars as pl

STEP_PATTERN = r"^ProfilerStep#(\d+)$"


def steps(events: pl.DataFrame) -> pl.DataFrame:
    """One row per CPU-side ``ProfilerStep#N``: step, name, start, end (ns)."""
    s = events.filter(
        pl.col("kind").is_in(["user_annotation", "cpu_op"]) & pl.col("name").cast(pl.String).str.contains(STEP_PATTERN)
    )
    return (
        s.group_by(pl.col("name").cast(pl.String))
        .agg(pl.col("ts").min().alias("start"), pl.col("end").max().alias("end"))
        .with_columns(pl.col("name").str.extract(STEP_PATTERN, 1).cast(pl.Int64).alias("step"))
        .select("step", "name", "start", "end")
        .sort("start")
    )


def assign_steps(gpu: pl.DataFrame, step_table: pl.DataFrame) -> pl.DataFrame:
    """Add ``step`` to GPU rows: the step whose CPU window contains the launch (null if none)."""
    if step_table.height == 0 or gpu.height == 0:
        return gpu.with_columns(pl.lit(None, dtype=pl.Int64).alias("step"))
    windows = step_table.select(
        pl.col("start").alias("launch_ts"), pl.col("step"), pl.col("end").alias("_step_end")
    ).sort("launch_ts")
    keyed = gpu.with_row_index("_r").sort("launch_ts", nulls_last=True)
    valid = keyed.filter(pl.col("launch_ts").is_not_null())
    joined = valid.join_asof(windows, on="launch_ts", strategy="backward")
    joined = joined.with_columns(
        pl.when(pl.col("launch_ts") < pl.col("_step_end")).then(pl.col("step")).otherwise(None).alias("step")
    ).drop("_step_end")
    rest = keyed.filter(pl.col("launch_ts").is_null()).with_columns(pl.lit(None, dtype=pl.Int64).alias("step"))
    return pl.concat([joined, rest], how="vertical_relaxed").sort("_r").drop("_r")
