"""GPU activity <-> runtime launch by ``correlation``; launch <-> CPU op by ``External id``.

Graph launches (``cudaGraphLaunch``/``hipGraphLaunch``) share one correlation with every kernel of
the graph, so the join is many-to-one and graph kernels attach to their launch naturally.
"""

from __future__ import annotations

import polars as pl

from .kinds import GPU_KINDS

GRAPH_LAUNCH_PATTERN = r"(?i)graphlaunch"


def launches(events: pl.DataFrame, among: pl.Series | None = None) -> pl.DataFrame:
    """Runtime/driver events that carry a correlation id, one per correlation (the earliest; of equal starts, the
    first in the file), in order of start. ``among``: only these correlations (the GPU rows': a trace's other runtime
    calls carry correlations too, 219 k of them beside 52 k launches in a 207 MB CUDA-graph trace)."""
    keep = pl.col("kind").is_in(["runtime", "driver"]) & pl.col("correlation").is_not_null()
    # which rows, found on the four columns that decide it; then only those rows' columns are gathered (sorting the
    # launch columns of every runtime call took the 207 MB trace's run to its peak: +58 MB)
    calls = events.lazy().with_row_index("_r").filter(keep).select("_r", "correlation", "ts").collect()
    if among is not None:  # (of the runtime calls only: tested on every event in the same query, 12-17 ms -> 7-9 ms)
        calls = calls.filter(pl.col("correlation").is_in(among.implode()))
    calls = calls.sort("ts", maintain_order=True).select("_r", "correlation")
    # (a correlation id is a call's own, and the ids grow with time: where they do, no id is there twice and the
    # unique below, 6-15 ms of a 200 MB trace's link, finds nothing to drop)
    ids = calls["correlation"].to_numpy()
    if not bool((ids[1:] > ids[:-1]).all()):
        calls = calls.unique("correlation", keep="first", maintain_order=True)
    rows = calls["_r"]
    return events.select(
        pl.col("correlation"),
        pl.col("idx").alias("launch_idx"),
        pl.col("name").alias("launch_name"),  # interned: no string per row
        pl.col("ts").alias("launch_ts"),
        pl.col("dur").alias("launch_dur"),
        pl.col("pid").alias("launch_pid"),
        pl.col("tid").alias("launch_tid"),
        pl.col("external_id").alias("launch_external_id"),
    ).select(pl.all().gather(rows))


def launcher_ops(launch: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Innermost CPU op of each launch, by External id (same pid, op window contains the launch); ``launch``: one
    row per ``launch_idx``, none null."""
    # (lazy: the five columns are read, not every column of the CPU ops copied first; and only of the ops whose
    # External id a launch has: the ns-resolution replica's 335 k ops with one took +41 MB, these +20 MB)
    ext = launch["launch_external_id"].drop_nulls().unique().implode()
    ops = events.lazy().filter((pl.col("kind") == "cpu_op") & pl.col("external_id").is_in(ext)).select(
        pl.col("external_id").alias("launch_external_id"),
        pl.col("pid").alias("launch_pid"),
        pl.col("idx").alias("op_idx"),
        pl.col("ts").alias("_op_ts"),
        pl.col("end").alias("_op_end"),
    ).collect()
    pairs = (launch.select("launch_idx", "launch_external_id", "launch_pid", "launch_ts").sort("launch_idx")
             .join(ops, on=["launch_external_id", "launch_pid"], how="inner", maintain_order="left"))
    # (a launch's pairs side by side: where no launch has two, each one's op is its only one, as in every real trace
    # here with External ids; the sort and unique below took 17 ms of the 200 MB ns-resolution replica's link)
    idx = pairs["launch_idx"].to_numpy()
    if bool((idx[1:] != idx[:-1]).all()):
        return pairs.select("launch_idx", "op_idx")
    return (
        pairs
        .with_columns(
            ((pl.col("_op_ts") <= pl.col("launch_ts")) & (pl.col("launch_ts") <= pl.col("_op_end"))).alias("_inside")
        )
        # inside the op first, then the latest start, then the shorter op (inside the other), then the later event
        .sort(["_inside", "_op_ts", "_op_end", "op_idx"], descending=[True, True, False, True])
        .unique("launch_idx", keep="first")
        .select("launch_idx", "op_idx")
    )


def gpu_events(events: pl.DataFrame) -> pl.DataFrame:
    """GPU activity rows (kernels, memcpy, memset), in the event table's order. Where they are one run of its rows (a
    JAX profile's: its GPU planes' events lie together), that run as a slice: its columns are the event table's
    buffers, one copy in memory, which the parse cache relies on (a GPU table stored by reference to the events',
    ``load.cache._shared_run``)."""
    mask = events["kind"].is_in(GPU_KINDS).fill_null(False)
    n = int(mask.sum())
    # the rows from the first GPU row on, as many as there are, all GPU rows: they are the trace's GPU rows, in order.
    # Decided on the mask, before any column is gathered (not left to polars' filter: 2.2.0's copies a run under half
    # of the rows, as a JAX profile's GPU rows often are, and a copy made to be dropped was 27-34 ms of a 199 MB one)
    if n:
        first = int(mask.arg_max() or 0)
        if mask.slice(first, n).all():
            return events.slice(first, n)
    return events.filter(mask)


def link_gpu(events: pl.DataFrame) -> pl.DataFrame:
    """GPU rows with their launch columns (null where the launch is not in the trace)."""
    g = gpu_events(events)
    launch = launches(events, among=g["correlation"].drop_nulls().unique())
    # the join on the key alone, its columns added beside: the GPU table is wide, a join would copy it
    found = g.select("correlation").join(launch, on="correlation", how="left", maintain_order="left").drop("correlation")
    # graph launch or not: decided once per distinct launch name, rows matched on the interned names (a join of the
    # 1.4 M GPU rows of a JAX profile took 0.04 s)
    names = launch["launch_name"].unique().drop_nulls().cast(pl.String)
    graph_names = names.filter(names.str.contains(GRAPH_LAUNCH_PATTERN)).to_list()
    graph = found.select(pl.col("launch_name").is_in(graph_names).fill_null(False).alias("graph_launch"))["graph_launch"]
    return g.with_columns(found.get_columns()).with_columns(graph)
