"""GPU time of chosen CPU ops: every GPU row launched inside an op (its subtree) counts for it.

Ops of one thread nest, so each op gets a nesting depth among the chosen ops (one sort, no tree walk);
GPU rows are then matched to the enclosing op at each depth with one as-of join per depth level. A row
launched inside nested chosen ops (``aten::linear`` > ``aten::addmm``) counts for both; its *innermost*
op is the one totals use, so nothing is counted twice.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..intervals import nesting_depth
from ..link.ops import thread_key
from ..scalars import as_int


def holding(ops: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``ops`` (``idx, pid, tid, ts, end``) that hold a launch of ``gpu`` (``launch_pid, launch_tid,
    launch_ts``) of their thread, start and end included (:func:`_held`): the only ops :func:`op_gpu_pairs` can
    pair. ``ops`` itself where the threads' codes or times do not allow finding them so."""
    held = _held(ops, gpu)
    return ops if held is None else ops.filter(pl.Series(held))


def _held(ops: pl.DataFrame, gpu: pl.DataFrame) -> np.ndarray | None:
    """Whether each op of ``ops`` holds a launch of ``gpu`` of its thread (see :func:`holding`), in numpy on the ops'
    own columns, so that many ops and few launches (a trace's CPU ops and its sync calls) are not copied, sorted and
    joined whole first (the blocking-sync finding at 10 GB: 3.06 M CPU ops, of which 11 k hold a call). None where
    ``pid``/``tid`` are not interned alike on both sides, a time is null, or the threads' stretches of one time axis
    would not fit in an int64."""
    interned = all(isinstance(ops.schema[c], pl.Categorical) and gpu.schema[f"launch_{c}"] == ops.schema[c]
                   for c in ("pid", "tid"))
    if not interned or ops.height == 0 or ops["ts"].null_count() or ops["end"].null_count():
        return None
    # threads as one int64 each (a null pid or tid: no thread, matching nothing, as in an as-of join's ``by``)
    g = gpu.select(thread_key("launch_pid", "launch_tid"), "launch_ts").drop_nulls()
    if g.height == 0:
        return None
    launches = g["_g"].to_numpy()
    threads = np.unique(launches)
    at = np.searchsorted(threads, launches)
    ts = ops["ts"].to_numpy()
    end = ops["end"].to_numpy()
    launch_ts = g["launch_ts"].to_numpy()
    lo = min(int(ts.min()), int(launch_ts.min()))
    span = max(int(end.max()), int(launch_ts.max())) - lo + 1
    if len(threads) * span >= 2**62:
        return None
    # each time laid out on its thread's own stretch of one axis: the launches sorted there, and an op holds one when
    # fewer launches lie before its start than at or before its end
    marks = np.sort(at * span + (launch_ts - lo), kind="stable")  # (launches come nearly in time order: timsort's runs)
    key = ops.select(thread_key("pid", "tid").fill_null(-1))["_g"].to_numpy()  # (-1: no launch's thread)
    row = np.searchsorted(threads, key)
    np.minimum(row, len(threads) - 1, out=row)
    known = threads[row] == key
    del key
    row *= span  # (in place: each op's stretch, then its start and end on the axis)
    row -= lo
    first = np.searchsorted(marks, row + ts, side="left")
    row += end
    keep: np.ndarray = np.searchsorted(marks, row, side="right") > first
    del row, first
    keep &= known
    return keep


def op_gpu_pairs(ops: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """(GPU row, enclosing op) pairs.

    Args:
        ops: ``idx, pid, tid, ts, end`` of the chosen ops (ns).
        gpu: GPU rows with ``_g`` (row id), ``launch_pid``, ``launch_tid``, ``launch_ts``, ``dur``.

    Returns:
        ``_g, op_idx, depth, dur, innermost`` (innermost: the deepest enclosing op of that GPU row; ``depth``
        counts among the ops that hold a launch).
    """
    schema = pl.Schema({"_g": pl.UInt32(), "op_idx": pl.Int64(), "depth": pl.Int32(), "dur": pl.Int64(),
                        "innermost": pl.Boolean()})
    g = gpu.filter(pl.col("launch_ts").is_not_null()).select("_g", "launch_pid", "launch_tid", "launch_ts", "dur")
    if ops.height == 0 or g.height == 0:
        return pl.DataFrame(schema=schema)
    # only ops that hold a launch can pair: the others are dropped before the nesting pass (a sync call's op
    # among 200 k CPU ops: 28 -> ~10 ms); depths are then counted among the ops kept (still nested: only
    # ``innermost`` is used). Found in numpy before any op is copied (:func:`_held`), else by an as-of join: an op
    # holds one when the first launch of its thread at or after its start is not after its end
    held = _held(ops, g)
    if held is not None:
        ops = ops.filter(pl.Series(held)).filter(pl.col("end") > pl.col("ts")).sort("ts")
    else:
        launches = g.select(pl.col("launch_pid").alias("pid"), pl.col("launch_tid").alias("tid"),
                            pl.col("launch_ts").alias("_next")).sort("_next")
        ops = (ops.filter(pl.col("end") > pl.col("ts")).sort("ts")
               .join_asof(launches, left_on="ts", right_on="_next", by=["pid", "tid"], strategy="forward",
                          check_sortedness=False)
               .filter(pl.col("_next") <= pl.col("end")).drop("_next"))
    if ops.height == 0:
        return pl.DataFrame(schema=schema)
    ops = ops.with_columns(nesting_depth(ops))
    g = g.sort("launch_ts")
    found = []
    for d in range(as_int(ops["depth"].max()) + 1):
        level = (ops.filter(pl.col("depth") == d)
                 .select(pl.col("idx").alias("op_idx"), pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"),
                         pl.col("ts").alias("launch_ts"), pl.col("end").alias("_end"), "depth")
                 .sort("launch_ts"))
        hit = (g.join_asof(level, on="launch_ts", by=["launch_pid", "launch_tid"], strategy="backward",
                           check_sortedness=False)
               .filter(pl.col("op_idx").is_not_null() & (pl.col("launch_ts") <= pl.col("_end")))
               .select("_g", "op_idx", "depth", "dur"))
        found.append(hit)
    pairs = pl.concat(found)
    return pairs.with_columns((pl.col("depth") == pl.col("depth").max().over("_g")).alias("innermost")).cast(schema)
