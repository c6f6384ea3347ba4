"""Per-thread call tree of host events by interval nesting.

Events of one (pid, tid) are sorted by (start asc, end desc) and nested with a stack. Kineto
rounds times independently per event, so a child may end a little after its parent
("boundary bleed"); an end overrun of at most ``bleed_ns`` still counts as nested.

The stack runs in the compiled library (``load/_sweep.c``: ks_nest); where it could not be built, :func:`_nest`
does the same in Python, ~1 s per million events (the 200 MB ns-resolution replica's 550 K host events: the whole
``call_tree``, its filter and sort included, 0.68 s with the loop, 0.13 s with the compiled stack).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..load import native
from .kinds import CPU_TREE_KINDS

#: Tolerated child-past-parent end overrun (ns).
DEFAULT_BLEED_NS = 1000


def _nest(order_idx: np.ndarray, starts: np.ndarray, ends: np.ndarray, groups: np.ndarray, bleed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stack nesting over pre-sorted arrays; returns (parent row idx or -1, depth): the compiled stack's, or where
    the library is not available the same loop in Python."""
    compiled = native.nest(groups, starts, ends, bleed)
    if compiled is not None:
        pos, depth = compiled
        return np.where(pos >= 0, order_idx[np.maximum(pos, 0)], -1), depth
    n = len(order_idx)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    idx_l = order_idx.tolist()
    s_l = starts.tolist()
    e_l = ends.tolist()
    g_l = groups.tolist()
    par = [-1] * n
    dep = [0] * n
    stack: list[int] = []  # positions in sorted arrays
    prev_g = None
    for i in range(n):
        g = g_l[i]
        if g != prev_g:
            stack.clear()
            prev_g = g
        s = s_l[i]
        e = e_l[i]
        while stack:
            top = stack[-1]
            te = e_l[top]
            if te <= s or e > te + bleed:  # ended before we start
                stack.pop()
            else:
                break
        if stack:
            top = stack[-1]
            par[i] = idx_l[top]
            dep[i] = dep[top] + 1
        stack.append(i)
    parent[:] = par
    depth[:] = dep
    return parent, depth


def call_tree(events: pl.DataFrame, bleed_ns: int = DEFAULT_BLEED_NS) -> pl.DataFrame:
    """Return ``idx, parent_idx, depth`` for host events (roots have null parent)."""
    host = (
        events.filter(pl.col("kind").is_in(CPU_TREE_KINDS) & (pl.col("ph") == "X"))
        .select("idx", "pid", "tid", "ts", "end")
        .with_columns(pl.struct(pl.col("pid").to_physical(), pl.col("tid").to_physical()).hash().alias("_g"))
        .sort(["_g", "ts", "end", "idx"], descending=[False, False, True, False])
    )
    if host.height == 0:
        return pl.DataFrame(schema={"idx": pl.Int64, "parent_idx": pl.Int64, "depth": pl.Int32})
    parent, depth = _nest(
        host["idx"].to_numpy(), host["ts"].to_numpy(), host["end"].to_numpy(), host["_g"].to_numpy(), bleed_ns
    )
    return pl.DataFrame(
        {
            "idx": host["idx"],
            "parent_idx": pl.Series(parent).replace(-1, None).cast(pl.Int64),
            "depth": pl.Series(depth, dtype=pl.Int32),
        }
    )
