"""Idle gaps of GPU work, classified by who was late: shared by the rank summaries and the findings.

A gap in the busy union of a group's GPU records (a rank, a step, a device) ends at a record; when that record
was launched after the gap began, the GPU ran dry waiting for the CPU (``host_wait``); when it was launched in
time and the gap is short, it is back-to-back launch overhead (``kernel_wait``); otherwise the GPU waited on
something else (events, other streams).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from ..intervals import covered_within, dense_codes, first_positions, merged_at, stable_order
from ..load.native import idle_gaps
from .kernels import NS_PER_US
from .timeline import device_segments, one_device_filled

#: gaps shorter than this, before a kernel launched in time, count as launch overhead (µs)
KERNEL_WAIT_US = 10.0


def idle_breakdown(g: pl.DataFrame, keys: list[str], *, extent: bool = False,
                   counts: dict[str, pl.Expr] | None = None, ref: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per group of ``keys`` (rows ``ts``, ``end``, ``launch_ts`` in ns): the length of the busy union (``_busy``, ns)
    and its gaps, classified by the launch of the record that ends each gap (µs): ``host_wait_us`` (launched after
    the GPU went idle: the CPU was late; ``host_wait_gaps`` of them), ``kernel_wait_us`` (launched in time, gap
    under :data:`KERNEL_WAIT_US`), ``other_idle_us``. With ``extent``, also ``span_us``: the group's last end minus
    its first start (µs); with ``counts``, per name the number of the group's rows for which the boolean expression
    holds (null: not), from the same sort (a group-by of a JAX profile's 6.7 M rows took 0.3 s).

    ``ref``: the GPU rows ``g``'s were taken from (``ts``, ``end``, and ``device`` where ``keys`` hold it), where a
    group's gaps can hold other work (a step's, on a GPU behind its host): the part of each gap that ``ref``'s rows
    cover is ``other_work_us``, not idle, and the gap is classified by its idle rest (read in numpy: the compiled
    pass gives no gaps).

    Vectorized over every group at once: the groups are laid end to end on one time axis (offset by group code,
    as :func:`~kernscope.intervals.union_by` does), so one sort and one :func:`~kernscope.intervals.merged` find
    every group's busy segments and gaps."""
    counts = counts or {}
    have = g.schema
    schema = pl.Schema({**{k: have[k] for k in keys}, "_busy": pl.Int64(), "host_wait_us": pl.Float64(),
                        "kernel_wait_us": pl.Float64(), "other_idle_us": pl.Float64(), "host_wait_gaps": pl.Int64(),
                        **({"span_us": pl.Float64()} if extent else {}), **{c: pl.Int64() for c in counts},
                        **({"other_work_us": pl.Float64()} if ref is not None else {})})
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
    cover = _cover(t, keys, code, n, span, t0, ref) if ref is not None else None
    swept = (idle_gaps(start, en, launch, has_launch, code, order, span, t0, KERNEL_WAIT_US * NS_PER_US, n)
             if cover is None else None)
    other_work = np.zeros(n)
    if swept is not None:  # one compiled pass, no gather (1 GB JAX profile: 0.4 -> 0.1 s)
        del start
        busy = swept.busy.astype(np.int64)
        host, kern, other = swept.host / NS_PER_US, swept.kern / NS_PER_US, swept.other / NS_PER_US
        late_n, first = swept.late_n, swept.first
        ext = swept.max_end - ts[first] if extent else None
    else:
        busy, host, kern, other, late_n, first, ext, other_work = _idle_numpy(
            code, start, en, has_launch, launch, start - ts, order, span, n, extent, cover)
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
    if ref is not None:
        out = out.with_columns(pl.Series("other_work_us", other_work / NS_PER_US))
    return out.cast(dict(schema))  # type: ignore[arg-type]


#: the covered part of gaps: (each gap's group code, its start and end on the shifted axis) -> ns covered
Cover = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _cover(t: pl.DataFrame, keys: list[str], code: np.ndarray, n: int, span: int, t0: int, ref: pl.DataFrame) -> Cover:
    """How much of each gap of a group (on :func:`idle_breakdown`'s shifted axis) ``ref``'s rows on the group's device
    (all of them where ``keys`` hold no ``device``) cover, ns: each device's rows merged once, a search per gap."""
    by_dev = "device" in keys and "device" in ref.columns
    dev_of = t["device"].gather(first_positions(code, n)) if by_dev else None
    devices = dev_of.unique().to_list() if dev_of is not None else None
    segments = [(seg_s, seg_e, None if dev_of is None else (dev_of.is_null() if dev is None else dev_of == dev).to_numpy())
                for dev, seg_s, seg_e in device_segments(one_device_filled(ref)[0], devices)]

    def covered(gc: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        shift = gc * span - t0  # the shifted axis back to the trace's clock
        out = np.zeros(len(gc), dtype=np.int64)
        for seg_s, seg_e, mine in segments:
            at = slice(None) if mine is None else mine[gc]
            out[at] = covered_within(seg_s, seg_e, lo[at] - shift[at], hi[at] - shift[at])
        return out

    return covered


def _idle_numpy(code: np.ndarray, start: np.ndarray, en: np.ndarray, has_launch: np.ndarray, launch: np.ndarray,
                off: np.ndarray, order: np.ndarray | None, span: int, n: int,
                extent: bool, cover: Cover | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                                   np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """:func:`idle_breakdown`'s per-group sums without the compiled library: the rows gathered in order, their busy
    segments merged (:func:`~kernscope.intervals.merged_at`) and each gap classified by the record that ends it; with
    ``cover``, each gap's covered part taken out of it first (and summed per group: the last array)."""
    if order is not None:
        code, start, en, has_launch, launch, off = (a[order] for a in (code, start, en, has_launch, launch, off))
    s, e, seg_at = merged_at(start, np.maximum(en + off, start))
    seg_code = s // span
    busy = np.bincount(seg_code, weights=(e - s).astype(np.float64), minlength=n).astype(np.int64)
    host = np.zeros(n)
    kern = np.zeros(n)
    other = np.zeros(n)
    late_n = np.zeros(n, dtype=np.int64)
    covered_n: np.ndarray = np.zeros(n)
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
        if cover is not None:  # (the other work in the gap is not idle: out of it, classified by what is left)
            got = cover(gc, gap_start, gap)
            covered_n = np.bincount(gc, weights=got.astype(np.float64), minlength=n)
            gap -= got
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
    return busy, host, kern, other, late_n, first, ext, covered_n
