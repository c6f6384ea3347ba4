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


_PAIRS = pl.Schema({"_g": pl.UInt32(), "op_idx": pl.Int64(), "depth": pl.Int32(), "dur": pl.Int64(),
                    "innermost": pl.Boolean()})


def op_gpu_pairs(ops: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """(GPU row, enclosing op) pairs.

    Args:
        ops: ``idx, pid, tid, ts, end`` of the chosen ops (ns).
        gpu: GPU rows with ``_g`` (row id), ``launch_pid``, ``launch_tid``, ``launch_ts``, ``dur``.

    Returns:
        ``_g, op_idx, depth, dur, innermost`` (innermost: the deepest enclosing op of that GPU row; ``depth``
        counts among the ops that hold a launch).
    """
    nested = _nested_ops(ops, gpu)
    if nested is None:
        return pl.DataFrame(schema=_PAIRS)
    ops, g = nested
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
    return pairs.with_columns((pl.col("depth") == pl.col("depth").max().over("_g")).alias("innermost")).cast(_PAIRS)


def innermost_op_pairs(ops: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """The pairs of :func:`op_gpu_pairs` whose op is the GPU row's innermost (one a row: ``innermost`` all true), in
    no set order. Where the pid and tid are interned alike on both sides, each nesting level's ops are searched in
    numpy, one search of every GPU row a level; else (and as the reference) ``op_gpu_pairs`` filtered. The example
    trace's analysis made ~50 polars queries in the levels' as-of joins (two analyses ask: the launchers' categories
    and the blocking-sync finding; the memory timeline a third)."""
    nested = _nested_ops(ops, gpu)
    if nested is None:
        return pl.DataFrame(schema=_PAIRS)
    found = _innermost_by_level(*nested)
    if found is not None:
        return found
    return op_gpu_pairs(ops, gpu).filter(pl.col("innermost"))


def _nested_ops(ops: pl.DataFrame, gpu: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """(the ops that hold a launch of ``gpu``, sorted by start, with their ``depth`` among them; the GPU rows with a
    launch, their columns for the pairs), or None where there is no pair to find."""
    g = gpu.filter(pl.col("launch_ts").is_not_null()).select("_g", "launch_pid", "launch_tid", "launch_ts", "dur")
    if ops.height == 0 or g.height == 0:
        return None
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
        return None
    return ops.with_columns(nesting_depth(ops)), g


def _innermost_by_level(ops: pl.DataFrame, g: pl.DataFrame) -> pl.DataFrame | None:
    """:func:`innermost_op_pairs` of the nested ops (with ``depth``) and GPU rows :func:`_nested_ops` gives: per level,
    as the as-of join of :func:`op_gpu_pairs` finds it (the level's op of the row's thread that starts last at or before
    the launch, where the launch is not after its end), the deepest level that finds one. None where the threads are
    not interned alike or the levels' axis would not fit in an int64 (the caller joins)."""
    interned = all(isinstance(ops.schema[c], pl.Categorical) and g.schema[f"launch_{c}"] == ops.schema[c]
                   for c in ("pid", "tid"))
    if not interned:
        return None
    o_thread = ops.select(thread_key("pid", "tid"))["_g"]
    q_thread = g.select(thread_key("launch_pid", "launch_tid"))["_g"]
    o_ok, q_ok = o_thread.is_not_null().to_numpy(), q_thread.is_not_null().to_numpy()  # (no thread: no pair)
    o_t, q_t = o_thread.fill_null(0).to_numpy(), q_thread.fill_null(0).to_numpy()
    threads = np.unique(o_t[o_ok])
    ts, end = ops["ts"].to_numpy().astype(np.int64), ops["end"].to_numpy().astype(np.int64)
    depth = ops["depth"].to_numpy().astype(np.int64)
    launch = g["launch_ts"].to_numpy().astype(np.int64)
    lo = min(int(ts.min()), int(launch.min()))
    span = max(int(ts.max()), int(launch.max())) - lo + 1
    levels = int(depth.max()) + 1
    if levels * len(threads) * span >= 2**62:
        return None
    # every op on one axis, by (level, thread, start): a launch's candidate at a level is the last op at or before
    # (that level, its thread, its time)
    o_code = np.searchsorted(threads, o_t)
    key = (depth * len(threads) + o_code) * span + (ts - lo)
    key[~o_ok] = -1  # (before every launch's: found by none)
    order = np.argsort(key, kind="stable")
    key = key[order]
    q_code = np.minimum(np.searchsorted(threads, q_t), max(len(threads) - 1, 0))
    q_ok &= threads[q_code] == q_t if len(threads) else np.zeros(len(q_t), dtype=bool)
    best = np.full(len(launch), -1, dtype=np.int64)  # each GPU row's innermost op (a row of ``ops``) and its level
    best_depth = np.full(len(launch), -1, dtype=np.int64)
    for d in range(levels):
        q = (d * len(threads) + q_code) * span + (launch - lo)
        at = np.searchsorted(key, q, side="right") - 1
        row = order[np.maximum(at, 0)]
        hit = q_ok & (at >= 0) & (depth[row] == d) & (o_code[row] == q_code) & o_ok[row] & (launch <= end[row])
        best[hit] = row[hit]
        best_depth[hit] = d
    found = np.flatnonzero(best >= 0)
    rows = best[found]
    return pl.DataFrame({"_g": g["_g"].gather(pl.Series(found)), "op_idx": ops["idx"].gather(pl.Series(rows)),
                         "depth": best_depth[found], "dur": g["dur"].gather(pl.Series(found)),
                         "innermost": np.ones(len(found), dtype=bool)}).cast(_PAIRS)
