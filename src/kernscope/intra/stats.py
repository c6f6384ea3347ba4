"""Analyses of decoded intra-kernel tasks: pure functions, DataFrames in, DataFrames/dicts out."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ..intervals import nesting, union_by
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


def _paths(tasks: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``tasks`` with ``depth`` and ``_node`` (the scope-tree node of the task), and the node table: ``_node``,
    ``path`` (the names from the outermost scope down, "/"-joined), ``name``, ``depth`` and ``_key`` (the names
    as a list: tree order, and unambiguous where a name holds a "/").

    Nesting is found per (block, group) with one deterministic sort (:func:`~kernscope.intervals.nesting`),
    which also gives each task its parent task; nodes are then interned level by level as (parent node,
    name) pairs, so a tree has exactly one node per path, whatever the row order or thread count.
    """
    t = tasks.with_columns(pl.col("task").cast(pl.String).alias("_name"),
                           pl.max_horizontal(pl.col("end_ns"), pl.col("start_ns") + 1).alias("_end"))
    depth, parent = nesting(t, by=("block", "group"), start="start_ns", end="_end", parents=True)
    assert parent is not None
    names = t["_name"].fill_null("?")
    code = names.rank("dense").cast(pl.Int64).to_numpy() - 1
    n_names = int(code.max()) + 1
    node = np.full(t.height, -1, dtype=np.int64)
    node_parent: list[np.ndarray] = []
    node_name: list[np.ndarray] = []
    made = 0
    for d in range(int(depth.max()) + 1):  # one vectorized step per nesting level
        sel = np.flatnonzero(depth == d)
        up = node[parent[sel]] if d else np.full(len(sel), -1, dtype=np.int64)
        pairs, inv = np.unique((up + 1) * n_names + code[sel], return_inverse=True)
        node[sel] = made + inv.reshape(-1)
        node_parent.append(pairs // n_names - 1)
        node_name.append(pairs % n_names)
        made += len(pairs)
    first_of_code = pl.DataFrame({"c": code, "n": names}).unique("c").sort("c")["n"].to_list()
    ups, nms = np.concatenate(node_parent).tolist(), np.concatenate(node_name).tolist()
    keys: list[list[str]] = []
    for up, nm in zip(ups, nms):  # one step per tree node (a kernel's scopes), not per task
        keys.append([*keys[up], first_of_code[nm]] if up >= 0 else [first_of_code[nm]])
    nodes = pl.DataFrame({"_node": np.arange(made, dtype=np.int64), "_key": keys},
                         schema={"_node": pl.Int64, "_key": pl.List(pl.String)})
    nodes = nodes.with_columns(pl.col("_key").list.join("/").alias("path"), pl.col("_key").list.last().alias("name"),
                               (pl.col("_key").list.len() - 1).cast(pl.Int32).alias("depth"))
    return t.with_columns(pl.Series("depth", depth, dtype=pl.Int32), pl.Series("_node", node)).drop("_end"), nodes


def scope_tree(tasks: pl.DataFrame, *, clock_ghz: float | None = None, unit: str = "ns") -> pl.DataFrame:
    """Op-measure view: per scope path (nested scopes under their parent), count, total/mean/min/max/p50 in ns
    and in cycles, and normalized per unit: the total divided by the (block, group) units that ran the scope,
    as Proton's ``normalized_cycles`` averages over the warps/CTAs that recorded it.

    ``unit``: what the task times count, ``"ns"`` or ``"cycles"`` (Proton's traces). ``clock_ghz``: the SM
    clock (cycles per ns) when known; the other unit's columns are computed with it, and are null without it
    (cycles are never made up from ns, nor time from cycles).

    Columns: path, name, depth, count, units, total_ns, mean_ns, min_ns, p50_ns, max_ns, normalized_ns,
    total_cycles, mean_cycles, normalized_cycles.
    """
    schema = {"path": pl.String, "name": pl.String, "depth": pl.Int32, "count": pl.UInt32, "units": pl.UInt32,
              "total_ns": pl.Int64, "mean_ns": pl.Float64, "min_ns": pl.Int64, "p50_ns": pl.Float64, "max_ns": pl.Int64,
              "normalized_ns": pl.Float64, "total_cycles": pl.Float64, "mean_cycles": pl.Float64,
              "normalized_cycles": pl.Float64}
    if tasks.height == 0:
        return pl.DataFrame(schema=schema)
    t, nodes = _paths(tasks)
    d = pl.col("duration_ns")
    out = (t.group_by("_node").agg(
        pl.len().alias("count"), pl.struct("block", "group").n_unique().cast(pl.UInt32).alias("units"),
        d.sum().alias("_total"), d.mean().alias("_mean"), d.min().alias("_min"), d.median().alias("_p50"),
        d.max().alias("_max"))
        .with_columns((pl.col("_total") / pl.col("units")).alias("_norm"))
        .join(nodes, on="_node").sort("_key"))  # depth first: each node right under its parent
    to_ns = 1.0 if unit == "ns" else (1.0 / clock_ghz if clock_ghz else None)
    to_cycles = 1.0 if unit == "cycles" else clock_ghz

    def scaled(col: str, k: float | None) -> pl.Expr:
        return pl.col(col) * k if k is not None else pl.lit(None, pl.Float64)

    out = out.with_columns(
        *(scaled(f"_{c}", to_ns).alias(f"{c}_ns") for c in ("total", "mean", "min", "p50", "max")),
        scaled("_norm", to_ns).alias("normalized_ns"), scaled("_total", to_cycles).alias("total_cycles"),
        scaled("_mean", to_cycles).alias("mean_cycles"), scaled("_norm", to_cycles).alias("normalized_cycles"))
    out = out.with_columns(pl.col("total_ns", "min_ns", "max_ns").round())
    return out.select(list(schema)).cast(schema)  # type: ignore[arg-type]


def shift_durations(tasks: pl.DataFrame, time_shift_ns: float) -> pl.DataFrame:
    """Subtract the profiler's own cost (ns) from every duration, never below 0; ends move, starts stay."""
    shift = int(round(time_shift_ns))
    return (tasks.with_columns(pl.max_horizontal(pl.col("duration_ns") - shift, pl.lit(0)).alias("duration_ns"))
            .with_columns((pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns")))


OVERLAP_SCHEMA = {"group_a": pl.Int64, "task_a": pl.String, "group_b": pl.Int64, "task_b": pl.String, "blocks": pl.UInt32,
                  "a_ns": pl.Int64, "b_ns": pl.Int64, "overlap_ns": pl.Int64, "pct_of_a": pl.Float64, "pct_of_b": pl.Float64,
                  "cta_pct_of_a_min": pl.Float64, "cta_pct_of_a_p50": pl.Float64, "cta_pct_of_a_max": pl.Float64}


def group_overlap(tasks: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """How the warp groups' tasks overlap in time inside each CTA (warp-specialized kernels: a producer group's
    loads while the consumer group computes). For every pair of tasks of two different groups: per CTA (block), the
    time each runs (the union of its intervals in that CTA, ns) and the time both run at once (|A ∩ B| =
    |A| + |B| − |A ∪ B|, per CTA); then the totals over CTAs with the overlap as a share of each task's time, and
    its spread across CTAs. Returns (totals per task pair, the per-CTA rows: ``block``, the pair, ``a_ns``,
    ``b_ns``, ``overlap_ns``). Empty when the tasks come from one group."""
    per_cta_schema = {"block": pl.Int64, "group_a": pl.Int64, "task_a": pl.String, "group_b": pl.Int64, "task_b": pl.String,
                      "a_ns": pl.Int64, "b_ns": pl.Int64, "overlap_ns": pl.Int64}
    if tasks.height == 0 or tasks["group"].n_unique() < 2:
        return pl.DataFrame(schema=OVERLAP_SCHEMA), pl.DataFrame(schema=per_cta_schema)
    t = tasks.select(pl.col("block").cast(pl.Int64), pl.col("group").cast(pl.Int64), pl.col("task").cast(pl.String),
                     "start_ns", "end_ns")
    sets = t.select("group", "task").unique().sort("group", "task").rows()
    rows = {k: t.filter((pl.col("group") == k[0]) & (pl.col("task") == k[1])) for k in sets}
    unions = {k: union_by(r, ["block"], start="start_ns", end="end_ns") for k, r in rows.items()}  # |A| per CTA, once
    parts = []
    for ga, ta in sets:
        ua = unions[(ga, ta)].rename({"len": "a_ns"})
        for gb, tb in sets:
            if gb <= ga:
                continue
            ub = unions[(gb, tb)].rename({"len": "b_ns"})
            both = union_by(pl.concat([rows[(ga, ta)], rows[(gb, tb)]]), ["block"], start="start_ns",
                            end="end_ns").rename({"len": "ab_ns"})
            parts.append(both.join(ua, on="block", how="left").join(ub, on="block", how="left")
                         .with_columns(pl.col("a_ns", "b_ns").fill_null(0))
                         .select("block", pl.lit(ga, pl.Int64).alias("group_a"), pl.lit(ta).alias("task_a"),
                                 pl.lit(gb, pl.Int64).alias("group_b"), pl.lit(tb).alias("task_b"), "a_ns", "b_ns",
                                 (pl.col("a_ns") + pl.col("b_ns") - pl.col("ab_ns")).alias("overlap_ns")))
    per_cta = pl.concat(parts).sort("group_a", "task_a", "group_b", "task_b", "block").cast(per_cta_schema)  # type: ignore[arg-type]
    pct = pl.when(pl.col("a_ns") > 0).then(100.0 * pl.col("overlap_ns") / pl.col("a_ns"))
    totals = (per_cta.with_columns(pct.alias("_p"))
              .group_by("group_a", "task_a", "group_b", "task_b", maintain_order=True)
              .agg(pl.len().alias("blocks"), pl.col("a_ns").sum(), pl.col("b_ns").sum(), pl.col("overlap_ns").sum(),
                   pl.col("_p").min().alias("cta_pct_of_a_min"), pl.col("_p").median().alias("cta_pct_of_a_p50"),
                   pl.col("_p").max().alias("cta_pct_of_a_max"))
              .with_columns((100.0 * pl.col("overlap_ns") / pl.col("a_ns").clip(1)).alias("pct_of_a"),
                            (100.0 * pl.col("overlap_ns") / pl.col("b_ns").clip(1)).alias("pct_of_b"))
              .select(list(OVERLAP_SCHEMA)).cast(OVERLAP_SCHEMA))  # type: ignore[arg-type]
    return totals, per_cta
