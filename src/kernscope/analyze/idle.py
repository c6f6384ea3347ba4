"""Idle gaps of GPU work, classified by who was late: shared by the rank summaries and the findings.

A gap in the busy union of a group's GPU records (a rank, a step, a device) ends at a record; when that record
was launched after the gap began, the GPU ran dry waiting for the CPU (``host_wait``); when it was launched in
time and the gap is short, it is back-to-back launch overhead (``kernel_wait``); otherwise the GPU waited on
something else (events, other streams).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..intervals import dense_codes, merged_at, stable_order
from ..load.native import idle_gaps
from .kernels import NS_PER_US

#: gaps shorter than this, before a kernel launched in time, count as launch overhead (µs)
KERNEL_WAIT_US = 10.0


def idle_breakdown(g: pl.DataFrame, keys: list[str], *, extent: bool = False,
                   counts: dict[str, pl.Expr] | None = None) -> pl.DataFrame:
    """Per group of ``keys`` (rows ``ts``, ``end``, ``launch_ts`` in ns): the length of the busy union (``_busy``, ns)
    and its gaps, classified by the launch of the record that ends each gap (µs): ``host_wait_us`` (launched after
    the GPU went idle: the CPU was late; ``host_wait_gaps`` of them), ``kernel_wait_us`` (launched in time, gap
    under :data:`KERNEL_WAIT_US`), ``other_idle_us``. With ``extent``, also ``span_us``: the group's last end minus
    its first start (µs); with ``counts``, per name the number of the group's rows for which the boolean expression
    holds (null: not), from the same sort (a group-by of a JAX profile's 6.7 M rows took 0.3 s).

    Vectorized over every group at once: the groups are laid end to end on one time axis (offset by group code,
    as :func:`~kernscope.intervals.union_by` does), so one sort and one :func:`~kernscope.intervals.merged` find
    every group's busy segments and gaps."""
    counts = counts or {}
    have = g.schema
    schema = pl.Schema({**{k: have[k] for k in keys}, "_busy": pl.Int64(), "host_wait_us": pl.Float64(),
                        "kernel_wait_us": pl.Float64(), "other_idle_us": pl.Float64(), "host_wait_gaps": pl.Int64(),
                        **({"span_us": pl.Float64()} if extent else {}), **{c: pl.Int64() for c in counts}})
    if g.height == 0:
        return pl.DataFrame(schema=schema)
    t = g.select(*keys, "ts", "end", "launch_ts", *(e.fill_null(False).alias(c) for c, e in counts.items()))
    code = dense_codes(t, keys)
    # (read in place where polars' buffers are int64 already: each copy was 53 MB of fresh pages at 1 GB)
    ts = t["ts"].to_numpy().astype(np.int64, copy=False)
    en = t["end"].to_numpy().astype(np.int64, copy=False)
    has_launch = t["launch_ts"].is_not_null().to_numpy()
    launch = t["launch_ts"].fill_null(0).to_numpy().astype(np.int64, copy=False)
    t0 = int(min(ts.min(), en.min(), launch[has_launch].min() if has_launch.any() else ts.min()))
    span = int(max(ts.max(), en.max(), launch[has_launch].max() if has_launch.any() else ts.max()) - t0) + 2
    # a group's times shifted onto its own stretch of the axis: by code * span - t0 (in place: one array)
    start = code * span
    start -= t0
    start += ts
    # the rows by group, then start (ties in row order): one stable sort of the shifted starts
    order = stable_order(start)
    n = int(code.max()) + 1
    swept = idle_gaps(start, en, launch, has_launch, code, order, span, t0, KERNEL_WAIT_US * NS_PER_US, n)
    if swept is not None:  # one compiled pass, no gather (1 GB JAX profile: 0.4 -> 0.1 s)
        del start
        busy = swept.busy.astype(np.int64)
        host, kern, other = swept.host / NS_PER_US, swept.kern / NS_PER_US, swept.other / NS_PER_US
        late_n, first = swept.late_n, swept.first
        ext = swept.max_end - ts[first] if extent else None
    else:
        busy, host, kern, other, late_n, first, ext = _idle_numpy(code, start, en, has_launch, launch, start - ts, order,
                                                                  span, n, extent)
    extra = []
    if extent:  # ns to µs by a Series' division: polars divides a one-row column exactly and a longer one (and a
        # grouped result) by the reciprocal, so the whole trace and a step analyzed alone differed in the last digit
        extra.append(pl.Series("span_us", ext, dtype=pl.Int64) / NS_PER_US)
    for c in counts:  # (integer counts per group: exact, in any order)
        extra.append(pl.Series(c, np.bincount(code, weights=t[c].to_numpy(), minlength=n).astype(np.int64),
                               dtype=pl.Int64))
    out = t.select(keys)[first].with_columns(pl.Series("_busy", busy, dtype=pl.Int64), pl.Series("host_wait_us", host),
                                              pl.Series("kernel_wait_us", kern), pl.Series("other_idle_us", other),
                                              pl.Series("host_wait_gaps", late_n, dtype=pl.Int64), *extra)
    return out.cast(dict(schema))  # type: ignore[arg-type]


def _idle_numpy(code: np.ndarray, start: np.ndarray, en: np.ndarray, has_launch: np.ndarray, launch: np.ndarray,
                off: np.ndarray, order: np.ndarray | None, span: int, n: int,
                extent: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                       np.ndarray | None]:
    """:func:`idle_breakdown`'s per-group sums without the compiled library: the rows gathered in order, their busy
    segments merged (:func:`~kernscope.intervals.merged_at`) and each gap classified by the record that ends it."""
    if order is not None:
        code, start, en, has_launch, launch, off = (a[order] for a in (code, start, en, has_launch, launch, off))
    s, e, seg_at = merged_at(start, np.maximum(en + off, start))
    seg_code = s // span
    busy = np.bincount(seg_code, weights=(e - s).astype(np.float64), minlength=n).astype(np.int64)
    host = np.zeros(n)
    kern = np.zeros(n)
    other = np.zeros(n)
    late_n = np.zeros(n, dtype=np.int64)
    same = seg_code[1:] == seg_code[:-1]  # a gap lies between two segments of one group
    if same.any():
        # (each array of the gaps freed once read: a 1 GB JAX profile has ~3.7 M segments, 30 MB an array, which
        # glibc keeps in the C heap; held together they grew it by 0.3 GB)
        gc = seg_code[1:][same]
        del seg_code
        gap_start = e[:-1][same]
        del e
        gap = s[1:][same]
        del s
        gap -= gap_start
        first = seg_at[1:][same]  # the record that starts each later segment
        del seg_at, same
        launched = has_launch[first]
        late = launch[first]
        late += off[first]
        late = launched & (late > gap_start)
        del first, gap_start
        quick = ~late & launched & (gap < KERNEL_WAIT_US * NS_PER_US)
        del launched
        host = np.bincount(gc, weights=np.where(late, gap, 0).astype(np.float64), minlength=n) / NS_PER_US
        kern = np.bincount(gc, weights=np.where(quick, gap, 0).astype(np.float64), minlength=n) / NS_PER_US
        other = np.bincount(gc, weights=np.where(~late & ~quick, gap, 0).astype(np.float64), minlength=n) / NS_PER_US
        late_n = np.bincount(gc, weights=late.astype(np.float64), minlength=n).astype(np.int64)
    # each group's keys from its first row (in group order: the codes are sorted)
    at = np.flatnonzero(np.append(True, code[1:] != code[:-1]))
    first = order[at] if order is not None else at
    # a group's first row has its earliest start (sorted by start); its latest end, a reduction
    ext = np.maximum.reduceat(en, at) - (start[at] - off[at]) if extent else None
    return busy, host, kern, other, late_n, first, ext
