"""The compiled scanners (``_xspace.c``: XSpace lines; ``_kineto.c``: Kineto events) and interval sweep
(``_sweep.c``), loaded with ctypes when the install could build them (:mod:`.nativelib`), wrapped here for numpy arrays.

``pip install`` compiles ``kernscope/load/_xspace.c``, ``_kineto.c`` and ``_sweep.c`` (one library) with the machine's C
compiler (an optional extension: without a compiler the install goes on). :func:`scanner` returns it, or None when it is
missing, of another ABI version, or ``KERNSCOPE_NO_NATIVE=1`` asks for the numpy readers (which give the
same columns: ``tests/test_jax.py`` compares both) and polars' joins.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from typing import Any, Literal, NamedTuple

import numpy as np

from .nativelib import scanner as scanner  # (re-exported: the wrappers' callers ask for it here)


def innermost(group: np.ndarray, start: np.ndarray, end: np.ndarray, qgroup: np.ndarray, qt: np.ndarray) -> np.ndarray | None:
    """For each query (its group and time, sorted by both), the position of its innermost enclosing interval, or
    -1: among the intervals of its group with ``start <= t <= end``, the latest start, of those the earliest end,
    then the later position. The intervals sorted by (group, start, -end, position). All int64 (any unit, the
    same for all). None when the library is not available (``_sweep.c``: ks_innermost)."""
    lib = scanner()
    if lib is None:
        return None
    cols = [np.ascontiguousarray(a, dtype=np.int64) for a in (group, start, end, qgroup, qt)]
    out = np.empty(len(qt), dtype=np.int64)
    stack = np.empty(max(len(start), 1), dtype=np.int64)
    p = [ctypes.c_void_p(a.ctypes.data) for a in (*cols, out, stack)]
    lib.ks_innermost(p[0], p[1], p[2], ctypes.c_int64(len(start)), p[3], p[4], ctypes.c_int64(len(qt)), p[5], p[6])
    return out


def nest(group: np.ndarray, start: np.ndarray, end: np.ndarray, bleed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The call tree's stack nesting of events sorted by (group, start, -end, row): per event the position of its
    parent in that order, or -1, and its depth (int32, roots 0); an end overrun of at most ``bleed`` still nests
    (:mod:`kernscope.link.tree`). All int64 (any unit, the same for all; ``group`` compared for equality only).
    None when the library is not available (``_sweep.c``: ks_nest)."""
    lib = scanner()
    if lib is None:
        return None
    # (uint64 hashes as int64 wrap: equal stays equal)
    cols: list[np.ndarray] = [np.ascontiguousarray(a, dtype=np.int64) for a in (group, start, end)]
    n = len(cols[1])
    parent = np.empty(n, dtype=np.int64)
    depth = np.empty(n, dtype=np.int32)
    stack = np.empty(max(n, 1), dtype=np.int64)
    p = [ctypes.c_void_p(a.ctypes.data) for a in (*cols, parent, depth, stack)]
    lib.ks_nest(p[0], p[1], p[2], ctypes.c_int64(n), ctypes.c_int64(max(-(1 << 63), min(bleed, (1 << 63) - 1))), p[3], p[4], p[5])
    return parent, depth


def search_right(hay: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.searchsorted(hay, q, side="right")`` (int64: how many of ``hay``, sorted, are at or below each of ``q``).
    The compiled library (``_sweep.c``: ks_search_right) starts each search from the previous query's answer, so
    queries that come nearly in order (GPU records by stream and time, nodes by time) cost O(1) each: 6.7 M queries
    into 6.7 M sorted ends 0.30 -> 0.04 s, into 15,500 step starts 0.19 -> 0.01 s (queries in no order: about numpy's
    time). Without the library, numpy's search."""
    lib = scanner()
    if lib is None:
        out: np.ndarray = np.searchsorted(hay, q, side="right")
        return out
    h, x = (np.ascontiguousarray(a, dtype=np.int64) for a in (hay, q))
    out = np.empty(len(x), dtype=np.int64)
    lib.ks_search_right(ctypes.c_void_p(h.ctypes.data), ctypes.c_int64(len(h)), ctypes.c_void_p(x.ctypes.data),
                        ctypes.c_int64(len(x)), ctypes.c_void_p(out.ctypes.data))
    return out


def window_of(start: np.ndarray, end: np.ndarray, end_ok: np.ndarray, value: np.ndarray, value_ok: np.ndarray,
              q: np.ndarray, q_ok: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """For each query ``q`` (where ``q_ok``): the ``value`` of the window that starts last at or before it (``start``
    sorted; of equal starts the last), where that window's ``end`` (where ``end_ok``) is after the query and it has a
    value (``value_ok``). Returns (value: int64, 0 where none; found: bool) in one compiled pass (``ks_window_of``:
    the search of :func:`search_right`, the checks and the gather together, no array of the windows found: 6.7 M GPU
    rows into 15,500 steps 0.14 -> 0.02 s); None without the library."""
    lib = scanner()
    if lib is None:
        return None
    s, e, v, x = (np.ascontiguousarray(a, dtype=np.int64) for a in (start, end, value, q))
    eo, vo, xo = (np.ascontiguousarray(a, dtype=np.bool_) for a in (end_ok, value_ok, q_ok))
    out, found = np.empty(len(x), dtype=np.int64), np.empty(len(x), dtype=np.bool_)
    lib.ks_window_of(ptr(s), ptr(e), ptr(eo), ptr(v), ptr(vo), ctypes.c_int64(len(s)), ptr(x), ptr(xo),
                     ctypes.c_int64(len(x)), ptr(out), ptr(found))
    return out, found


def node_windows(time: np.ndarray, time_ok: np.ndarray, end_of: np.ndarray, end_of_ok: np.ndarray,
                 windows: tuple[np.ndarray, ...], keys: np.ndarray, key_start: np.ndarray,
                 table: tuple[np.ndarray, int] | None, pred: np.ndarray,
                 has: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The critical path's cut of each node's link to its predecessor in two compiled passes (``ks_node_windows``;
    :func:`kernscope.analyze.critical_path.critical_path` has the numpy form): each node's step window (``windows``:
    start, start valid, end, end valid, step, sorted by start; ``end_of`` where ``end_of_ok`` instead), then the
    links cut (``pred`` set to -1 in place) that come from no node, a node of no or another step, or from before the
    start of the node's step (``keys`` sorted, ``key_start`` beside them; ``table``: first positions of keys from a
    lowest value, or None: a binary search). Returns (pt: the predecessor's time, int64; pt_ok: bool, valid and not
    cut); None without the library (``pred`` untouched then)."""
    lib = scanner()
    n = len(time)
    if lib is None or len(pred) != n or pred.dtype != np.int64 or not pred.flags.c_contiguous or not pred.flags.writeable:
        return None
    ws, wso, we, weo, wst = windows
    ints = [np.ascontiguousarray(a, dtype=np.int64) for a in (time, end_of, ws, we, wst, keys, key_start)]
    flags = [np.ascontiguousarray(a, dtype=np.bool_) for a in (time_ok, end_of_ok, wso, weo, has)]
    tab, lo = (np.ascontiguousarray(table[0], dtype=np.int64), table[1]) if table is not None else (None, 0)
    step, step_ok = np.empty(n, np.int64), np.empty(n, np.bool_)
    pt, pt_ok = np.empty(n, np.int64), np.empty(n, np.bool_)
    lib.ks_node_windows(ptr(ints[0]), ptr(flags[0]), ptr(ints[1]), ptr(flags[1]), ctypes.c_int64(n), ptr(ints[2]),
                        ptr(flags[2]), ptr(ints[3]), ptr(flags[3]), ptr(ints[4]), ctypes.c_int64(len(ints[2])),
                        ptr(ints[5]), ptr(ints[6]), ctypes.c_int64(len(ints[5])), ptr(tab), ctypes.c_int64(lo),
                        ctypes.c_int64(0 if tab is None else len(tab)), ptr(pred), ptr(flags[4]), ptr(step),
                        ptr(step_ok), ptr(pt), ptr(pt_ok))
    return pt, pt_ok


def chain_depths(pred: np.ndarray, root: int, starts: np.ndarray, max_links: int) -> np.ndarray | Literal[False] | None:
    """The number of nodes on each start's chain (the start, its predecessor ``pred[start]``, ... up to ``root``, root
    excluded; ``pred[root] == root``), in one compiled pass (``ks_chain_depths``;
    :func:`kernscope.analyze.critical_path._depths` has the numpy form: a numpy call per link of every chain, 5-8 ms of
    a 200 MB Kineto trace's 2,200-link chains). False where a chain is longer than ``max_links`` (a cycle's has no
    end); None without the library, or where a link leads outside ``pred`` (the numpy form says so)."""
    lib = scanner()
    if lib is None:
        return None
    p, x = np.ascontiguousarray(pred, dtype=np.int64), np.ascontiguousarray(starts, dtype=np.int64)
    depth = np.empty(len(x), dtype=np.int64)
    rc = lib.ks_chain_depths(ptr(p), ctypes.c_int64(len(p)), ptr(x), ctypes.c_int64(len(x)), ctypes.c_int64(root),
                             ctypes.c_int64(max_links), ptr(depth))
    return depth if rc == 0 else (False if rc == -1 else None)


def chain_nodes(pred: np.ndarray, starts: np.ndarray, depth: np.ndarray) -> np.ndarray | None:
    """Every node on each start's chain, the chains one after the other, each from its start back (``depth`` nodes
    each, as :func:`chain_depths` counts them), in one compiled pass (``ks_chain_nodes``); None without the library,
    or where a link leads outside ``pred``."""
    lib = scanner()
    if lib is None:
        return None
    p, x = np.ascontiguousarray(pred, dtype=np.int64), np.ascontiguousarray(starts, dtype=np.int64)
    d = np.ascontiguousarray(depth, dtype=np.int64)
    node = np.empty(int(d.sum()), dtype=np.int64)
    rc = lib.ks_chain_nodes(ptr(p), ctypes.c_int64(len(p)), ptr(x), ptr(d), ctypes.c_int64(len(x)), ptr(node))
    return node if rc == len(node) else None


def group_last_max(key: np.ndarray, key_ok: np.ndarray, value: np.ndarray,
                   max_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per distinct ``key`` (int64, rows where ``key_ok``): the key, the largest ``value`` of its rows and the last row
    holding it, in key order, in one compiled pass over a table of the keys' range (``ks_group_last_max``); None
    without the library, or where the range is over ``max_size``."""
    lib = scanner()
    if lib is None:
        return None
    k, v = np.ascontiguousarray(key, dtype=np.int64), np.ascontiguousarray(value, dtype=np.int64)
    ok = np.ascontiguousarray(key_ok, dtype=np.bool_)
    if not ok.any():
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    valid = k[ok]
    lo, hi = int(valid.min()), int(valid.max())
    if hi - lo >= max_size:
        return None
    size = hi - lo + 1
    best, arg, seen = np.empty(size, np.int64), np.empty(size, np.int64), np.zeros(size, np.bool_)
    if lib.ks_group_last_max(ptr(k), ptr(ok), ctypes.c_int64(lo), ctypes.c_int64(size), ptr(v), ctypes.c_int64(len(k)),
                             ptr(best), ptr(arg), ptr(seen)) < 0:
        return None
    at = np.flatnonzero(seen)
    return at + lo, best[at], arg[at]


def ptr(a: np.ndarray | None) -> ctypes.c_void_p:
    """The address of ``a``'s data for a call of the library (NULL for None)."""
    return ctypes.c_void_p(a.ctypes.data if a is not None else None)


def _c(a: np.ndarray | None, dtype: Any = np.int64) -> np.ndarray | None:
    """``a`` as a contiguous array of ``dtype`` for the library (a copy only where it is not one already; None stays
    None: a NULL pointer)."""
    return None if a is None else np.ascontiguousarray(a, dtype=dtype)


#: subsets :func:`union_lengths` sweeps in one pass (``ks_union_lengths``' limit)
UNION_SUBSETS = 8


def union_lengths(s: np.ndarray, start: np.ndarray, end: np.ndarray, order: np.ndarray | None, span: int,
                  masks: list[np.ndarray | None], n_groups: int) -> tuple[list[np.ndarray], np.ndarray] | None:
    """Per subset of the rows (``masks``: one boolean array each, None for every row), the length of each group's
    union of intervals (int64, the times' unit), and each group's first row by start (-1 where it has none). Rows
    in row order: ``start`` and ``end`` (int64) unshifted, ``s`` the starts shifted so that group g lies in
    [g * span, (g + 1) * span) (each end is shifted alike), ``order`` listing them by ``s`` (None: in order). One
    pass over the rows for up to :data:`UNION_SUBSETS` subsets, no gather of any array (``_sweep.c``:
    ks_union_lengths). None when the library is not available."""
    lib = scanner()
    if lib is None:
        return None
    n = len(s)
    cols = [_c(a) for a in (s, start, end)]
    at = _c(order)
    first = np.full(n_groups, -1, dtype=np.int64)
    out: list[np.ndarray] = []
    for k in range(0, max(len(masks), 1), UNION_SUBSETS):
        part = [_c(m, np.bool_) for m in masks[k:k + UNION_SUBSETS]]
        ptrs = (ctypes.c_void_p * max(len(part), 1))(*(None if m is None else m.ctypes.data for m in part))
        lengths = np.zeros((len(part), n_groups), dtype=np.int64)
        lib.ks_union_lengths(ptr(cols[0]), ptr(cols[1]), ptr(cols[2]), ctypes.c_int64(n), ptr(at),
                             ctypes.c_int64(span), ptrs, ctypes.c_int64(len(part)), ctypes.c_int64(n_groups),
                             ptr(lengths), ptr(first) if k == 0 else ptr(None))
        out.extend(lengths)
    return out, first


def clip_ends(dev: np.ndarray, stream: np.ndarray, ts: np.ndarray, end: np.ndarray,
              nulls: tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None, np.ndarray | None],
              order: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Each record's end clipped to the next start on its (device, stream) (int64, row order, null cells filled with
    0 and marked in ``nulls``: device, stream, start, end; None where a column has none), ``order`` listing the rows
    by (device, stream, start) (None: in order): the new ends, a boolean mask of the clipped rows and their number.
    One pass, no gather (``_sweep.c``: ks_clip). None when the library is not available."""
    lib = scanner()
    if lib is None:
        return None
    n = len(ts)
    cols = [_c(a) for a in (dev, stream, ts, end)]
    marks = [_c(m, np.bool_) for m in nulls]
    at = _c(order)
    new_end = np.empty(n, dtype=np.int64)
    clipped = np.empty(n, dtype=np.bool_)
    count = lib.ks_clip(*(ptr(a) for a in cols), *(ptr(m) for m in marks), ptr(at), ctypes.c_int64(n),
                        ptr(new_end), ptr(clipped))
    return new_end, clipped, int(count)


class IdleGaps(NamedTuple):
    """What :func:`idle_gaps` finds per group: ``busy``, ``host``, ``kern`` and ``other`` (sums of int64 lengths in
    float64, in the unit of the times), ``late_n`` (int64), ``first`` (the group's first row by start) and
    ``max_end`` (the largest unshifted end of its rows)."""

    busy: np.ndarray
    host: np.ndarray
    kern: np.ndarray
    other: np.ndarray
    late_n: np.ndarray
    first: np.ndarray
    max_end: np.ndarray


def idle_gaps(start: np.ndarray, end: np.ndarray, launch: np.ndarray, has_launch: np.ndarray, code: np.ndarray,
              order: np.ndarray | None, span: int, t0: int, quick: float, n_groups: int) -> IdleGaps | None:
    """The busy union of each group's records and its gaps, classified by the record that ends each gap
    (:func:`kernscope.analyze.idle.idle_breakdown`'s rules; ``quick``: the launch-overhead threshold, in the times'
    unit): rows in row order, each shifted by ``code * span - t0`` (``start`` already shifted; ``end`` and ``launch``
    not), ``order`` listing them by shifted start (None: in order). One pass, no gather (``_sweep.c``: ks_idle_gaps).
    None when the library is not available."""
    lib = scanner()
    if lib is None:
        return None
    n = len(start)
    cols = [_c(a) for a in (start, end, launch, code)]
    launched = _c(has_launch, np.bool_)
    at = _c(order)
    out = IdleGaps(busy=np.zeros(n_groups), host=np.zeros(n_groups), kern=np.zeros(n_groups),
                   other=np.zeros(n_groups), late_n=np.zeros(n_groups, dtype=np.int64),
                   first=np.full(n_groups, -1, dtype=np.int64),
                   max_end=np.full(n_groups, np.iinfo(np.int64).min, dtype=np.int64))
    lib.ks_idle_gaps(ptr(cols[0]), ptr(cols[1]), ptr(cols[2]), ptr(launched), ptr(cols[3]), ptr(at),
                     ctypes.c_int64(n), ctypes.c_int64(span), ctypes.c_int64(t0), ctypes.c_double(quick),
                     *(ptr(a) for a in out))
    return out


#: the most columns :func:`distinct_rows` keys a row by (``ks_distinct_keys``' limit)
DISTINCT_COLUMNS = 8


def distinct_rows(cols: list[np.ndarray], missing: list[np.ndarray | None], mask: np.ndarray | None,
                  max_space: float) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`kernscope.load.xplane.distinct_rows` in two compiled passes over the rows, reading the columns as they
    are: ``cols`` int32 or int64 per row, ``missing`` (one per column, None: none) marks rows that read -1 there,
    ``mask`` (None: every row) the rows numbered. Returns (number: int32 per row, -1 outside ``mask``; first: the
    last row of each number), numbered in the order of the combinations; None where the library is not available,
    the columns are not int32/int64, there are more than :data:`DISTINCT_COLUMNS`, no row, 2**31 rows or more, or
    the product of the columns' ranges is over ``max_space`` (then the caller numbers them otherwise)."""
    lib = scanner()
    n = len(mask) if mask is not None else (len(cols[0]) if cols else 0)
    if (lib is None or not cols or len(cols) > DISTINCT_COLUMNS or n == 0 or n >= 2**31
            or any(c.dtype not in (np.int32, np.int64) or len(c) != n for c in cols)):
        return None
    cs = [np.ascontiguousarray(c) for c in cols]
    ms = [None if m is None else _c(m, np.bool_) for m in missing]
    lo, size = np.zeros(len(cs), dtype=np.int64), np.zeros(len(cs), dtype=np.int64)
    space = 1
    for j, (c, m) in enumerate(zip(cs, ms)):
        got = np.zeros(2, dtype=np.int64)
        lib.ks_code_range(ptr(c), ctypes.c_int64(c.itemsize), ptr(m), ctypes.c_int64(n), ptr(got))
        lo[j], size[j] = got[0], got[1] - got[0] + 1
        space *= int(size[j])
        if space > max_space or space >= 2**31:
            return None
    widths = np.array([c.itemsize for c in cs], dtype=np.int64)
    col_ptrs = (ctypes.c_void_p * len(cs))(*(c.ctypes.data for c in cs))
    miss_ptrs = (ctypes.c_void_p * len(cs))(*(None if m is None else m.ctypes.data for m in ms))
    at = _c(mask, np.bool_) if mask is not None else None
    slot = np.zeros(space, dtype=np.int32)
    number = np.empty(n, dtype=np.int32)
    found = lib.ks_distinct_keys(col_ptrs, ptr(widths), miss_ptrs, ptr(lo), ptr(size), ctypes.c_int64(len(cs)),
                                 ptr(at), ctypes.c_int64(n), ctypes.c_int64(space), ptr(slot), ptr(number))
    if found < 0:
        return None
    first = np.zeros(found, dtype=np.int64)
    lib.ks_distinct_number(ptr(slot), ctypes.c_int64(n), ptr(number), ptr(first))
    return number, first


def mark_used(value: np.ndarray, missing: np.ndarray | None, size: int) -> np.ndarray | None:
    """bool per row of a table of ``size`` rows: whether some ``value`` (int32 rows of it) not ``missing`` names it,
    in one compiled pass (no array of every row's value made first); None where the library is not available, the
    values are not int32 or one is outside the table."""
    lib = scanner()
    if lib is None or value.dtype != np.int32 or (missing is not None and len(missing) != len(value)):
        return None
    v, m = np.ascontiguousarray(value), _c(missing, np.bool_)
    seen = np.zeros(size, dtype=np.bool_)
    if lib.ks_mark_used(ptr(v), ptr(m), ctypes.c_int64(len(v)), ctypes.c_int64(size), ptr(seen)) < 0:
        return None
    return seen


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6") if os.uname().sysname == "Linux" else None
    except OSError:
        return None


#: :func:`trim_heap` leaves the heap alone where the caller's work freed less than this many bytes
TRIM_MIN_BYTES = 16 << 20


def trim_heap(freed: int | None = None) -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere nothing).

    A parse leaves its per-piece numpy buffers (each under glibc's mmap threshold, so in the heap) freed but mapped,
    and the ``kernscope`` process never trims its heap on its own (:func:`kernscope.oneshot.tune_allocators`),
    while linking and the analysis allocate through polars' allocator, which cannot reuse those pages: without this
    the process's peak holds both. Measured after the parse of 200 MB replicas: peak RSS of a cold ``analyze``
    -10 to -15% (ns-resolution trace 529 -> 448 MB), time unchanged (a few ms).

    ``freed``: about how many bytes the caller's work left free in the heap (None: unknown, trim). Under
    :data:`TRIM_MIN_BYTES` nothing is done: a trim hands back every free page of the heap, which the next
    allocations fault in again, so a process that loads many small traces paid for it at every load (25 trims a
    load; the 36 public traces loaded and analyzed twice in one process: 14.2-15.0 s, 6.2-6.9 s of it system time,
    against 13.9-14.0 s and 5.3-5.5 s with this bound)."""
    if freed is not None and freed < TRIM_MIN_BYTES:
        return
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(AttributeError):  # a libc without it (musl)
            libc.malloc_trim(0)
