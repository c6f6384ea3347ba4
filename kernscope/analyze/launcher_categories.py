"""Categories that use the launching op: a second signal for kernels whose name says little.

A kernel named for what it does locally (a fill, a copy, an index or segment kernel, a small cuDNN
helper) gets the category of the innermost enclosing CPU op that an ``[[op_category]]`` rule names
(``aten::embedding_dense_backward`` -> Embedding/Indexing), when its name-based category is ``Other`` or
one of ``[launcher].generic`` and the op's is not generic. ``decided_by`` says which signal won: ``name``,
``op``, or ``graph`` (the op around a graph launch). Vectorized: one nesting pass over the named ops.
"""

from __future__ import annotations

import polars as pl

from ..model import Trace
from .attribute import op_gpu_pairs
from .categories import OTHER, Categorizer


def refine_by_launcher(trace: Trace, gpu: pl.DataFrame, categorizer: Categorizer) -> pl.DataFrame:
    """``gpu`` (categorized rows with launch columns) with ``category`` refined and a ``decided_by`` column."""
    out = gpu.with_columns(pl.lit("name").alias("decided_by"))
    generic = categorizer.generic | {OTHER}
    if not categorizer.op_rules or gpu.height == 0:
        return out
    cand = (out.with_row_index("_g")
            .filter((pl.col("kind").cast(pl.String) == "kernel") & pl.col("category").cast(pl.String).is_in(sorted(generic))
                    & pl.col("launch_ts").is_not_null()))
    if cand.height == 0:
        return out
    ev = trace.events
    cpu = ev.filter(pl.col("kind") == "cpu_op")
    names = cpu.select(pl.col("name").cast(pl.String).unique()).drop_nulls()["name"].to_list()
    op_cat = categorizer.op_categories(names).drop_nulls()
    op_cat = op_cat.filter(~pl.col("category").is_in(sorted(generic)))
    if op_cat.height == 0:
        return out
    ops = (cpu.with_columns(pl.col("name").cast(pl.String).alias("_n"))
           .join(op_cat.rename({"name": "_n", "category": "_op_cat"}), on="_n", how="inner")
           .select("idx", "pid", "tid", "ts", "end", "_op_cat"))
    pairs = op_gpu_pairs(ops.drop("_op_cat"), cand.select("_g", "launch_pid", "launch_tid", "launch_ts", "dur"))
    if pairs.height == 0:
        return out
    best = (pairs.filter(pl.col("innermost")).join(ops.select(pl.col("idx").alias("op_idx"), "_op_cat"), on="op_idx")
            .select("_g", "_op_cat").unique("_g", keep="first"))
    new = out.with_row_index("_g").join(best, on="_g", how="left", maintain_order="left")
    changed = pl.col("_op_cat").is_not_null() & (pl.col("_op_cat") != pl.col("category").cast(pl.String))
    graph = pl.col("graph_launch").fill_null(False) if "graph_launch" in new.columns else pl.lit(False)
    dtype = gpu.schema["category"]
    return new.with_columns(
        pl.when(changed).then(pl.col("_op_cat")).otherwise(pl.col("category").cast(pl.String)).cast(dtype).alias("category"),
        pl.when(changed & graph).then(pl.lit("graph")).when(changed).then(pl.lit("op")).otherwise(pl.lit("name"))
        .alias("decided_by"),
    ).drop("_g", "_op_cat")
