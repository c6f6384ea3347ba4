"""Analyses of decoded intra-kernel tasks: pure functions, DataFrames in, DataFrames/dicts out."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..intervals import nesting_depth, union_by
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


def _paths(tasks: pl.DataFrame) -> pl.DataFrame:
    """``tasks`` with ``depth`` and ``path`` (names of the enclosing scopes of the same block and group, "/"-joined).

    Nesting is found per (block, group) with one sort (:func:`~kernscope.intervals.nesting_depth`), then each
    level is attached to its parent with one as-of join.
    """
    t = tasks.with_row_index("_row").with_columns(pl.col("task").cast(pl.String).alias("_name"),
                                                pl.max_horizontal(pl.col("end_ns"), pl.col("start_ns") + 1).alias("_end"))
    t = t.with_columns(nesting_depth(t, by=("block", "group"), start="start_ns", end="_end").alias("depth"))
    levels = []
    prev = None
    for d in range(as_int(t["depth"].max()) + 1):
        lvl = t.filter(pl.col("depth") == d).sort("start_ns")
        if prev is None:
            lvl = lvl.with_columns(pl.col("_name").alias("path"))
        else:
            parent = prev.select("block", "group", pl.col("start_ns").alias("_ps"), pl.col("_end").alias("_pe"),
                                 pl.col("path").alias("_pp")).sort("_ps")
            lvl = (lvl.join_asof(parent, left_on="start_ns", right_on="_ps", by=["block", "group"], strategy="backward",
                                 check_sortedness=False)
                   .with_columns(pl.when(pl.col("_pp").is_not_null()).then(pl.col("_pp") + "/" + pl.col("_name"))
                                 .otherwise(pl.col("_name")).alias("path"))
                   .drop("_ps", "_pe", "_pp"))
        levels.append(lvl)
        prev = lvl
    return pl.concat(levels).sort("_row").drop("_row", "_end")


def scope_tree(tasks: pl.DataFrame, *, clock_ghz: float = 1.0) -> pl.DataFrame:
    """Op-measure view: per scope path (nested scopes under their parent), count, total/mean/min/max/p50 in ns
    and in cycles (ns x ``clock_ghz``; Proton's convention is 1 GHz), and normalized per unit: the total
    divided by the (block, group) units that ran the scope, as Proton's ``normalized_cycles`` averages over
    the warps/CTAs that recorded it.

    Columns: path, name, depth, count, units, total_ns, mean_ns, min_ns, p50_ns, max_ns, normalized_ns,
    total_cycles, mean_cycles, normalized_cycles.
    """
    schema = {"path": pl.String, "name": pl.String, "depth": pl.Int32, "count": pl.UInt32, "units": pl.UInt32,
              "total_ns": pl.Int64, "mean_ns": pl.Float64, "min_ns": pl.Int64, "p50_ns": pl.Float64, "max_ns": pl.Int64,
              "normalized_ns": pl.Float64, "total_cycles": pl.Float64, "mean_cycles": pl.Float64,
              "normalized_cycles": pl.Float64}
    if tasks.height == 0:
        return pl.DataFrame(schema=schema)
    t = _paths(tasks)
    out = (t.group_by("path").agg(
        pl.col("_name").first().alias("name"), pl.col("depth").first().cast(pl.Int32), pl.len().alias("count"),
        pl.struct("block", "group").n_unique().cast(pl.UInt32).alias("units"),
        pl.col("duration_ns").sum().alias("total_ns"), pl.col("duration_ns").mean().alias("mean_ns"),
        pl.col("duration_ns").min().alias("min_ns"), pl.col("duration_ns").median().alias("p50_ns"),
        pl.col("duration_ns").max().alias("max_ns"))
        .with_columns((pl.col("total_ns") / pl.col("units")).alias("normalized_ns"))
        .with_columns((pl.col("total_ns") * clock_ghz).alias("total_cycles"), (pl.col("mean_ns") * clock_ghz).alias("mean_cycles"),
                      (pl.col("normalized_ns") * clock_ghz).alias("normalized_cycles"))
        .sort("path"))
    return out.select(list(schema)).cast(schema)  # type: ignore[arg-type]


def shift_durations(tasks: pl.DataFrame, time_shift_ns: float) -> pl.DataFrame:
    """Subtract the profiler's own cost (ns) from every duration, never below 0; ends move, starts stay."""
    shift = int(round(time_shift_ns))
    return (tasks.with_columns(pl.max_horizontal(pl.col("duration_ns") - shift, pl.lit(0)).alias("duration_ns"))
            .with_columns((pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns")))
