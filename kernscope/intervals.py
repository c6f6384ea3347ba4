"""Interval arithmetic on int64 ns columns: union lengths per group, vectorized (numpy, one sort).

Shared by the trace timeline, multi-rank overlap and intra-kernel statistics. Imports nothing from kernscope.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl


def union_by(table: pl.DataFrame, keys: Sequence[str], *, start: str = "ts", end: str = "end") -> pl.DataFrame:
    """Per group of ``keys``: total length (ns) of the union of the ``[start, end)`` intervals.

    Groups are laid end to end on one axis (offset by group code), so one :func:`merged` finds every
    merged segment of every group at once.

    Returns:
        One row per group: the key columns and ``len`` (Int64 ns).
    """
    keys = list(keys)
    schema: dict[str, pl.DataType] = {**{k: table.schema[k] for k in keys}, "len": pl.Int64()}
    if table.height == 0:
        return pl.DataFrame(schema=schema)
    if keys:
        codes = table.select(pl.struct(keys).rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
    else:
        codes = np.zeros(table.height, dtype=np.int64)
    ts = table[start].to_numpy().astype(np.int64, copy=False)
    en = table[end].to_numpy().astype(np.int64, copy=False)
    t0 = int(ts.min())
    span = int(max(int(en.max()), int(ts.max())) - t0) + 1
    seg_s, seg_e = merged((ts - t0) + codes * span, (en - t0) + codes * span)  # groups never touch on this axis
    n_groups = int(codes.max()) + 1
    lengths = np.zeros(n_groups, dtype=np.int64)
    np.add.at(lengths, seg_s // span, seg_e - seg_s)
    first = np.zeros(n_groups, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    if not keys:
        return pl.DataFrame({"len": lengths}, schema={"len": pl.Int64})
    out: pl.DataFrame = table[first.tolist()].select(keys).with_columns(pl.Series("len", lengths, dtype=pl.Int64))
    return out


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length (ns) of the union of half-open intervals ``[start, end)``."""
    if len(starts) == 0:
        return 0
    d = pl.DataFrame({"ts": np.asarray(starts, dtype=np.int64), "end": np.asarray(ends, dtype=np.int64)})
    return int(union_by(d, [])["len"][0])


def merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of ``[start, end)`` intervals as sorted, disjoint segments (starts, ends)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.maximum(np.asarray(ends, dtype=np.int64), s)
    if len(s) == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run[:-1]
    seg = np.cumsum(new) - 1
    out_e = np.zeros(int(new.sum()), dtype=np.int64)
    np.maximum.at(out_e, seg, run)
    return s[new], out_e


def overlap_ns(a_starts: np.ndarray, a_ends: np.ndarray, b_starts: np.ndarray, b_ends: np.ndarray) -> int:
    """Length (ns) of the intersection of two interval unions: |A ∪| + |B ∪| − |(A ∪ B) ∪|."""
    a = union_ns(a_starts, a_ends)
    b = union_ns(b_starts, b_ends)
    both = union_ns(np.concatenate([a_starts, b_starts]), np.concatenate([a_ends, b_ends]))
    return a + b - both


def nesting_depth(ops: pl.DataFrame, *, by: tuple[str, str] = ("pid", "tid"), start: str = "ts", end: str = "end") -> pl.Series:
    """Depth of each interval among ``ops`` (groups ``by``, e.g. a thread; ``start``/``end`` ns; non-zero
    durations): how many of the other intervals of its group enclose it. Vectorized: position in (thread, start, -end) order minus the ops
    of the thread that ended by its start."""
    if ops.height == 0:
        return pl.Series("depth", [], dtype=pl.Int32)
    o = ops.with_row_index("_r").with_columns(pl.struct(*by).rank("dense").cast(pl.Int64).alias("_g"))
    o = o.sort(["_g", start, end], descending=[False, False, True])
    g = o["_g"].to_numpy()
    ts = o[start].to_numpy().astype(np.int64)
    en = o[end].to_numpy().astype(np.int64)
    t0 = int(min(ts.min(), en.min()))
    span = int(max(ts.max(), en.max()) - t0) + 2
    key_s = (ts - t0) + g * span
    key_e = np.sort((en - t0) + g * span)
    first_of_group = np.searchsorted(key_s, g * span, side="left")  # rows before this thread's first op
    pos = np.arange(len(o)) - first_of_group
    ended = np.searchsorted(key_e, key_s, side="right") - np.searchsorted(key_e, g * span, side="left")
    depth = np.maximum(pos - ended, 0).astype(np.int32)
    back = o.select("_r").with_columns(pl.Series("depth", depth)).sort("_r")
    return back["depth"]
