"""GPU timeline breakdown by interval unions (concurrent streams are never double-counted).

Definitions (the same as TraceLens's ``gpu_timeline``):
- computation: union of kernels that are neither communication nor memory copies;
- communication / memcpy: union of Communication-category kernels / memcpy activity (a memset runs
  as a kernel on the SMs, so it counts as computation, as in TraceLens);
- exposed communication: communication not overlapped by computation (of a part of the work, a step's: by any
  computation on its device, the step's own or another's);
- exposed memcpy: memcpy not overlapped by computation or communication (of a part: by any on its device);
- busy: union of everything; total: first start to last end;
- other work: of a part of the GPU work (a step, or the work of ``analyze --step N``), the time in its span when a
  device ran other GPU work (another step's, or work in no step) and none of the part's: a GPU that runs behind its
  host runs the step before's work inside a step's span, which is not idle. 0 for the whole trace's timeline;
- idle = total - busy - other work.
A kernel whose reported end runs past the start of the next kernel on the same stream is clipped
to it (a ROCm timestamp artifact) and counted in ``clipped_kernels``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..intervals import covered_within, dense_codes, first_positions, merged, union_many
from ..load.native import clip_ends, union_lengths

TIMELINE_ROWS = (
    "computation_time",
    "exposed_comm_time",
    "exposed_memcpy_time",
    "busy_time",
    "other_work_time",
    "idle_time",
    "total_time",
    "total_comm_time",
    "total_memcpy_time",
)


def clip_overruns(table: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Clip each event's end to the next start on the same (device, stream).

    Returns the table, in its own row order, with a boolean ``clipped`` column, and the number of clipped events.
    The next start is found on one stable sort of the rows by (device, stream, start) (records that start together
    follow their row order; a null start sorts first in its stream and clips nothing before it; no sort where the
    rows come in that order), then one pass of the compiled library (:func:`~kernscope.load.native.clip_ends`), or
    numpy's gathers without it; the table itself is not reordered.
    """
    n = table.height
    if n == 0:
        return table.with_columns(pl.lit(False).alias("clipped")), 0

    def key(c: str) -> tuple[np.ndarray, np.ndarray]:
        col = table[c]
        return col.fill_null(0).to_numpy().astype(np.int64, copy=False), col.is_null().to_numpy()

    (dev, dev_null), (stream, stream_null), (ts, ts_null), (end, end_null) = (key(c) for c in ("device", "stream", "ts", "end"))
    if not (dev_null.any() or stream_null.any() or ts_null.any()) and _in_stream_order(dev, stream, ts):
        order = None  # (the rows come sorted, as a JAX profile's do: read in place, no sort and no gathers)
    else:
        order = np.lexsort((ts, ~ts_null, stream, stream_null, dev, dev_null))  # the last key sorts first

    def marks(m: np.ndarray) -> np.ndarray | None:
        return m if m.any() else None

    swept = clip_ends(dev, stream, ts, end, (marks(dev_null), marks(stream_null), marks(ts_null), marks(end_null)), order)
    if swept is not None:  # (one compiled pass: a JAX profile's 6.7 M GPU rows, 0.1-0.17 -> 0.03 s)
        ends, clipped, count = swept
    else:
        ends, clipped = _clipped_numpy(dev, dev_null, stream, stream_null, ts, ts_null, end, end_null, order)
        count = int(clipped.sum())
    new_end = pl.Series("end", ends)
    if end_null.any():
        new_end = new_end.set(pl.Series(end_null), None)
    out = table.with_columns(new_end.cast(table.schema["end"]), pl.Series("clipped", clipped))
    return out, count


def _clipped_numpy(dev: np.ndarray, dev_null: np.ndarray, stream: np.ndarray, stream_null: np.ndarray, ts: np.ndarray,
                   ts_null: np.ndarray, end: np.ndarray, end_null: np.ndarray,
                   order: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`clip_overruns`' new ends and clipped mask in numpy, from the rows' ``order`` (None: in order)."""
    n = len(ts)
    same = np.ones(n - 1, dtype=bool)  # each sorted row and the next: the same stream
    nxt = np.zeros(n, dtype=np.int64)
    has_next = np.zeros(n, dtype=bool)
    if order is None:
        for key_of in (dev, stream):
            same &= key_of[1:] == key_of[:-1]
        nxt[:-1] = ts[1:]
        has_next[:-1] = same
    else:
        for key_of in (dev, dev_null, stream, stream_null):
            k = key_of[order]
            same &= k[1:] == k[:-1]
        nxt[order[:-1]] = ts[order[1:]]
        has_next[order[:-1]] = same & ~ts_null[order[1:]]
    clipped = has_next & ~end_null & (end > nxt)
    return np.where(clipped, nxt, end), clipped


def _in_stream_order(dev: np.ndarray, stream: np.ndarray, ts: np.ndarray) -> bool:
    """Whether rows (without nulls) are already sorted by (device, stream, start)."""
    if len(ts) < 2:
        return True
    d_up, d_eq = dev[1:] > dev[:-1], dev[1:] == dev[:-1]
    if not (d_up | d_eq).all():
        return False
    s_up, s_eq = stream[1:] > stream[:-1], stream[1:] == stream[:-1]
    return bool((d_up | (d_eq & (s_up | (s_eq & (ts[1:] >= ts[:-1]))))).all())


def one_device_filled(rows: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """``rows`` with a null device read as the device where every other row ran (a GPU record without a device in a
    one-GPU trace ran on it), and the number of devices (a null device, where several others exist, counts as one)."""
    if "device" not in rows.columns or rows.height == 0:
        return rows, 1
    dev = rows["device"]
    nulls, lo, hi = dev.null_count(), dev.min(), dev.max()  # (no distinct values found where min and max agree)
    if lo is None or lo == hi:
        return (rows.with_columns(dev.fill_null(lo)) if nulls and lo is not None else rows), 1
    return rows, dev.drop_nulls().n_unique() + (1 if nulls else 0)


def _per_device(rows: pl.DataFrame, groups: list[str]) -> pl.DataFrame:
    """:func:`_breakdown` per (group of ``groups``, device), each device's ``total_time`` the group's span over every
    device (:func:`timeline_of`'s device time). ``groups`` ``["_all"]``: the rows as one group."""
    if groups == ["_all"] and "_all" not in rows.columns:
        rows = rows.with_columns(pl.lit(0).alias("_all"))
    span = rows.group_by(groups).agg((pl.col("end").max() - pl.col("ts").min()).alias("_span"))
    return (_breakdown(rows, [*groups, "device"]).join(span, on=groups, nulls_equal=True)
            .with_columns(pl.col("_span").alias("total_time"), (pl.col("_span") - pl.col("busy_time")).alias("idle_time"))
            .drop("_span"))


def _sum_devices(per: pl.DataFrame, groups: list[str], devices: int) -> pl.DataFrame:
    """The rows of :func:`_per_device` summed per group: every one of the ``devices`` counts the group's span, those
    without work in it as idle all along."""
    summed = per.group_by(groups).agg(
        *(pl.col(c).sum() for c in TIMELINE_ROWS if c not in ("total_time", "idle_time")),
        pl.col("clipped_kernels").sum().cast(pl.Int64), pl.col("total_time").first().alias("_span"))
    return summed.with_columns((devices * pl.col("_span")).alias("total_time")).with_columns(
        (pl.col("total_time") - pl.col("busy_time") - pl.col("other_work_time")).alias("idle_time")).drop("_span")


def device_segments(rows: pl.DataFrame, devices: list[Any] | None) -> list[tuple[Any, np.ndarray, np.ndarray]]:
    """Each device's rows of ``rows`` (``ts``/``end`` ns; the device None: the rows without one) merged into sorted,
    disjoint segments, as (device, starts, ends); ``devices`` None: every row as one (device None). Rows without a
    start or end are left out."""
    rows = rows.filter(pl.col("ts").is_not_null() & pl.col("end").is_not_null())
    out = []
    for dev in [None] if devices is None else devices:  # (a few devices: one merge each)
        on = rows if devices is None else rows.filter(pl.col("device").is_null() if dev is None else pl.col("device") == dev)
        out.append((dev, *merged(on["ts"].to_numpy(), on["end"].to_numpy())))
    return out


def span_cover(rows: pl.DataFrame, groups: list[str], ref: pl.DataFrame, *, by_device: bool) -> pl.DataFrame | None:
    """Per group of ``groups`` of ``rows`` (and per device of ``rows`` with ``by_device``; otherwise summed over them):
    ``_cov``, how much of the group's span (first start to last end of its rows over every device) ``ref``'s rows (a
    superset of ``rows``, ``ts``/``end`` ns) on each device covered, ns. None where nothing but the groups' own work
    can lie in their spans: every row of ``ref`` is one of ``rows`` and no group's span overlaps another's (a JAX
    profile's steps: no search)."""
    if groups == ["_all"] and "_all" not in rows.columns:
        rows = rows.with_columns(pl.lit(0).alias("_all"))
    spans = rows.group_by(groups).agg(pl.col("ts").min().alias("_lo"), pl.col("end").max().alias("_hi"))
    lo = spans["_lo"].to_numpy().astype(np.int64, copy=False)
    hi = spans["_hi"].to_numpy().astype(np.int64, copy=False)
    by_lo = np.argsort(lo, kind="stable")
    if ref.height == rows.height and bool((lo[by_lo][1:] >= hi[by_lo][:-1]).all()):
        return None
    have_dev = "device" in rows.columns and "device" in ref.columns
    segments = device_segments(one_device_filled(ref)[0], rows["device"].unique().to_list() if have_dev else None)
    cover = pl.concat(spans.select(groups).with_columns(
        pl.Series("_cov", covered_within(seg_s, seg_e, lo, hi)),
        pl.lit(dev, dtype=rows.schema["device"] if have_dev else pl.Int64).alias("device")) for dev, seg_s, seg_e in segments)
    return cover if by_device else cover.group_by(groups).agg(pl.col("_cov").sum())


def hidden_ns(rows: pl.DataFrame, keys: list[str], ref: pl.DataFrame, part: pl.Expr, hiding: pl.Expr) -> pl.DataFrame:
    """Per group of ``keys`` of ``rows`` (with ``device`` among them where the rows have one): how much of the union of
    its rows for which ``part`` holds ``ref``'s rows on the group's device for which ``hiding`` holds cover, ns
    (``_hid``). A step's communication hidden by any computation on its GPU, the step's own or another's: the group's
    part merged per group on one shifted axis (one sort), each device's hiding rows merged once, a search per
    segment."""
    t = rows.filter(part.fill_null(False))
    schema = {**{k: rows.schema[k] for k in keys}, "_hid": pl.Int64()}
    if t.height == 0:
        return pl.DataFrame(schema=schema)
    code = dense_codes(t, keys)
    n = int(code.max()) + 1
    ts = t["ts"].to_numpy().astype(np.int64, copy=False)
    en = np.maximum(t["end"].to_numpy().astype(np.int64, copy=False), ts)
    t0, span = int(ts.min()), int(en.max() - ts.min()) + 1
    off = code * span - t0
    seg_s, seg_e = merged(ts + off, en + off)
    seg_code = seg_s // span
    back = seg_code * span - t0  # the shifted axis back to the trace's clock
    seg_s, seg_e = seg_s - back, seg_e - back
    first = first_positions(code, n)
    dev_of = t["device"].gather(first) if "device" in keys else None
    hid = np.zeros(len(seg_s), dtype=np.int64)
    for dev, h_s, h_e in device_segments(one_device_filled(ref)[0].filter(hiding.fill_null(False)),
                                         dev_of.unique().to_list() if dev_of is not None else None):
        mine = slice(None) if dev_of is None else (dev_of.is_null() if dev is None else dev_of == dev).to_numpy()[seg_code]
        hid[mine] = covered_within(h_s, h_e, seg_s[mine], seg_e[mine])
    sums = np.bincount(seg_code, weights=hid.astype(np.float64), minlength=n).astype(np.int64)
    return t.select(keys)[first].with_columns(pl.Series("_hid", sums, dtype=pl.Int64))


@dataclass(frozen=True)
class _Found:
    """What :func:`_other_work` adds, per group and device: ``cover`` (:func:`span_cover`'s ``_cov``) and ``hidden``
    (the communication's, then the memcpy's, :func:`hidden_ns`'s ``_hid``). Found once where both a sum over the devices
    and each device's are wanted: the sum's are these summed."""

    cover: pl.DataFrame
    hidden: tuple[pl.DataFrame, pl.DataFrame]


#: the columns :func:`_other_work` writes from :attr:`_Found.hidden`: (column, the total it is taken from)
_EXPOSED = (("exposed_comm_time", "total_comm_time"), ("exposed_memcpy_time", "total_memcpy_time"))


def _find_other_work(rows: pl.DataFrame, groups: list[str], ref: pl.DataFrame) -> _Found | None:
    """:class:`_Found` of the groups of ``groups`` of ``rows`` (by device too) against ``ref``'s rows; None where
    nothing but the groups' own work lies in their spans (:func:`span_cover`). A group's exposed communication (memcpy)
    is what no computation (nor communication) on its device hid, the group's own or another's (other steps' compute
    running beside a step's all-reduce hides it as well)."""
    if rows.height == 0:
        return None
    cover = span_cover(rows, groups, ref, by_device=True)
    if cover is None:
        return None
    if groups == ["_all"] and "_all" not in rows.columns:
        rows = rows.with_columns(pl.lit(0).alias("_all"))
    keys = [*groups, "device"] if "device" in rows.columns and "device" not in groups else groups
    is_mem = pl.col("kind") == "memcpy"
    is_comm = (pl.col("category") == "Communication") & ~is_mem
    return _Found(cover, (hidden_ns(rows, keys, ref, is_comm, ~is_mem & ~is_comm), hidden_ns(rows, keys, ref, is_mem, ~is_mem)))


def _other_work(wide: pl.DataFrame, groups: list[str], found: _Found | None, *, by_device: bool) -> pl.DataFrame:
    """``wide`` (a row per group of ``groups``, and per device with ``by_device``; otherwise the devices summed) with
    ``other_work_time``: what :func:`span_cover` found in each group's span beyond the group's own busy time;
    ``idle_time`` what is left of the span; and ``exposed_comm_time`` (``exposed_memcpy_time``) the group's
    communication (memcpy) that nothing on its device hid (``found``: :func:`_find_other_work` of the same groups;
    None: ``wide`` as it is)."""
    if found is None or wide.height == 0:
        return wide
    on = [*groups, "device"] if by_device else groups
    cover = found.cover if by_device else found.cover.group_by(groups).agg(pl.col("_cov").sum())
    wide = wide.join(cover, on=on, how="left", nulls_equal=True, maintain_order="left")
    other = pl.max_horizontal(pl.col("_cov").fill_null(0) - pl.col("busy_time"), pl.lit(0))
    wide = wide.with_columns(other.alias("other_work_time")).with_columns(
        (pl.col("total_time") - pl.col("busy_time") - pl.col("other_work_time")).alias("idle_time")).drop("_cov")
    for (col, total), hid in zip(_EXPOSED, found.hidden):
        if not by_device:
            hid = hid.group_by(groups).agg(pl.col("_hid").sum())
        wide = (wide.join(hid, on=on, how="left", nulls_equal=True, maintain_order="left")
                .with_columns((pl.col(total) - pl.col("_hid").fill_null(0)).alias(col)).drop("_hid"))
    return wide


def _breakdown(t: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """One row per group with every timeline quantity (ns)."""
    is_mem = pl.col("kind") == "memcpy"
    is_comm = (pl.col("category") == "Communication") & ~is_mem
    subsets = {"u_comp": ~is_mem & ~is_comm, "u_comm": is_comm, "u_mem": is_mem, "u_comp_comm": ~is_mem}
    # the five unions from one sort of the rows (a row whose test is null is in no subset, as a filter drops it)
    masks = t.select(*(e.fill_null(False).alias(n) for n, e in subsets.items()))
    parts = {n: masks[n].to_numpy() for n in subsets} | {"u_all": np.ones(t.height, dtype=bool)}
    out = t.group_by(keys).agg(
        (pl.col("end").max() - pl.col("ts").min()).alias("total_time"),
        pl.col("clipped").sum().cast(pl.Int64).alias("clipped_kernels"),
    )
    # (a null key, as the device of a GPU event without one, is a group that joins its own row)
    out = out.join(union_many(t, keys, parts, sweep=union_lengths), on=keys, how="left", nulls_equal=True).with_columns(
        pl.col(*parts).fill_null(0))
    return out.select(
        *keys,
        pl.col("u_comp").alias("computation_time"),
        (pl.col("u_comp_comm") - pl.col("u_comp")).alias("exposed_comm_time"),
        (pl.col("u_all") - pl.col("u_comp_comm")).alias("exposed_memcpy_time"),
        pl.col("u_all").alias("busy_time"),
        pl.lit(0, dtype=pl.Int64).alias("other_work_time"),
        (pl.col("total_time") - pl.col("u_all")).alias("idle_time"),
        "total_time",
        pl.col("u_comm").alias("total_comm_time"),
        pl.col("u_mem").alias("total_memcpy_time"),
        "clipped_kernels",
    )


def gpu_timeline(
    table: pl.DataFrame, *, by: str | None = "device", clip: bool = True, linked_only: bool = False
) -> pl.DataFrame:
    """Timeline breakdown of a categorized GPU table.

    Args:
        table: output of :func:`kernscope.analyze.kernels.gpu_table` with a categorizer.
        by: ``"device"`` (one block per device), ``"step"`` or None (all rows together).
        clip: clip same-stream overruns first.
        linked_only: drop GPU activity whose launch is not in the trace (work queued before the
            profiling window). TraceLens does this implicitly; kernscope counts it by default.

    Returns:
        Long table: ``[<by>,] type, time_us, percent, clipped_kernels`` (percent of total_time).
    """
    return timeline_of(timeline_rows(table, keys=(by,) if by else (), clip=clip, linked_only=linked_only), by=by)


def timeline_rows(table: pl.DataFrame, *, keys: Sequence[str] = ("device",), clip: bool = True,
                  linked_only: bool = False) -> pl.DataFrame:
    """The rows :func:`timeline_of` reads, made once for timelines by any of ``keys``: only the columns read (the GPU
    table's others would be sorted and filtered for nothing), without the work launched before the trace with
    ``linked_only``, with same-stream overruns clipped with ``clip`` (:func:`clip_overruns`; ``clipped`` marks
    them)."""
    wanted = dict.fromkeys(c for c in (*keys, "device", "stream", "ts", "end", "kind", "category", "launch_ts"))
    table = table.select(c for c in wanted if c in table.columns)
    if linked_only:
        table = table.filter(pl.col("launch_ts").is_not_null())
    if clip and table.height:
        return clip_overruns(table)[0]
    return table.with_columns(pl.lit(False).alias("clipped"))


def timeline_of(rows: pl.DataFrame, *, by: str | None = "device", ref: pl.DataFrame | None = None) -> pl.DataFrame:
    """:func:`gpu_timeline` of rows made by :func:`timeline_rows` (with ``by`` among its keys).

    With several devices the timeline is one of device time: each device's unions are its own (work on one GPU never
    hides or fills another's), each device's ``total_time`` is the whole group's span (first start to last end over
    every device: a GPU that waits while another works is idle), and ``by=None`` or ``"step"`` sums the devices (a
    device without work in a step counts the step's span as idle), so ``percent`` is the devices' mean share.

    ``ref``: where ``rows`` are a part of the GPU work (a step's), every GPU row they were taken from (made by
    :func:`timeline_rows` with the same arguments, ``rows`` a subset of its rows): the time in a group's span when a
    device ran only ``ref``'s other rows is ``other_work_time``, not idle. Without it, ``other_work_time`` is 0."""
    keys = [by] if by else ["_all"]
    if not by:
        rows = rows.with_columns(pl.lit(0).alias("_all"))
    rows, devices = one_device_filled(rows)
    if devices > 1 and by in (None, "device", "step"):  # (an annotation's rows stay one union: analyze.annotations)
        groups = [k for k in keys if k != "device"] or ["_all"]
        per = _per_device(rows, groups)
        if ref is not None and by == "device":
            per = _other_work(per, groups, _find_other_work(rows, groups, ref), by_device=True)
        wide = per.drop("_all") if by == "device" else _sum_devices(per, groups, devices)
        if ref is not None and by != "device":
            wide = _other_work(wide, groups, _find_other_work(rows, groups, ref), by_device=False)
    else:
        wide = _breakdown(rows, keys)
        if ref is not None:
            wide = _other_work(wide, keys, _find_other_work(rows, keys, ref), by_device=False)
    if wide.height == 0 and not by:
        wide = pl.DataFrame({"_all": [0], **{k: [0] for k in TIMELINE_ROWS}, "clipped_kernels": [0]})
    long = _long(wide, keys)
    return long.drop("_all") if not by else long


def device_timelines(rows: pl.DataFrame, ref: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The timeline overall and by device (:func:`timeline_of` by None and ``"device"``) of rows made by
    :func:`timeline_rows`, each device's unions made once: one device's is the overall one; several devices' are
    summed into it. ``ref``: as :func:`timeline_of`'s (where ``rows`` are one step's work)."""
    if ref is None:
        return device_timelines_of(device_parts(rows))
    rows, devices = one_device_filled(rows)
    if devices <= 1:
        by_dev = timeline_of(rows, by="device", ref=ref)
        return (by_dev.drop("device") if by_dev.height else timeline_of(rows, by=None, ref=ref)), by_dev
    per = _per_device(rows, ["_all"])
    found = _find_other_work(rows, ["_all"], ref)  # (once: the sum's are each device's summed)
    summed = _other_work(_sum_devices(per, ["_all"], devices), ["_all"], found, by_device=False)
    per = _other_work(per, ["_all"], found, by_device=True)
    return _long(summed, ["_all"]).drop("_all"), _long(per.drop("_all"), ["device"])


#: the columns of :func:`device_parts` that the parts of a timeline add up
PART_SUMS = ("computation_time", "exposed_comm_time", "exposed_memcpy_time", "busy_time", "total_comm_time",
             "total_memcpy_time", "clipped_kernels")


def device_parts(rows: pl.DataFrame) -> pl.DataFrame:
    """What :func:`device_timelines` (without ``ref``) reads of rows made by :func:`timeline_rows`, a row per device
    (ns): the unions of :data:`PART_SUMS`, and ``first`` and ``last``, its work's first start and last end. Time
    windows of a profile whose cuts no GPU record spans give parts that add up (:func:`device_timelines_of` of their
    rows concatenated) to the whole profile's. The rows' device is taken as it is: with several devices, a record
    without one is a device of its own (:func:`one_device_filled`, which a caller of a window must check: a window
    whose rows all ran on one device fills its nulls with it)."""
    rows, _ = one_device_filled(rows)
    if "device" not in rows.columns:
        rows = rows.with_columns(pl.lit(None, pl.Int64).alias("device"))
    span = rows.group_by("device").agg(pl.col("ts").min().alias("first"), pl.col("end").max().alias("last"))
    return (_breakdown(rows, ["device"]).select("device", *PART_SUMS)
            .join(span, on="device", how="left", nulls_equal=True, maintain_order="left"))


def device_timelines_of(parts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`device_timelines` (without ``ref``) of :func:`device_parts`' rows, one part's or several time windows'
    concatenated: the timeline overall and by device (each device's ``total_time`` its own span with one device, the
    span over every device with several)."""
    per = parts.group_by("device").agg(*(pl.col(c).sum() for c in PART_SUMS), pl.col("first").min(), pl.col("last").max())
    per = per.sort("device", nulls_last=True).with_columns(pl.col("clipped_kernels").cast(pl.Int64))
    devices = per.height
    if devices == 0:
        empty = pl.DataFrame({"device": pl.Series([], dtype=parts.schema["device"]), **{
            c: pl.Series([], dtype=pl.Int64) for c in (*TIMELINE_ROWS, "clipped_kernels")}})
        zero = pl.DataFrame({"_all": [0], **{k: [0] for k in TIMELINE_ROWS}, "clipped_kernels": [0]})
        return _long(zero, ["_all"]).drop("_all"), _long(empty, ["device"])
    span = (pl.col("last") - pl.col("first")) if devices == 1 else (pl.col("last").max() - pl.col("first").min())
    wide = per.with_columns(span.alias("total_time"), pl.lit(0, dtype=pl.Int64).alias("other_work_time")).with_columns(
        (pl.col("total_time") - pl.col("busy_time")).alias("idle_time")).select("device", *TIMELINE_ROWS, "clipped_kernels")
    by_dev = _long(wide, ["device"])
    if devices == 1:
        return by_dev.drop("device"), by_dev
    summed = _sum_devices(wide.with_columns(pl.lit(0).alias("_all")), ["_all"], devices)
    return _long(summed, ["_all"]).drop("_all"), by_dev


def step_timelines(rows: pl.DataFrame, ref: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The timeline by step (:func:`timeline_of` by ``"step"``) of rows made by :func:`timeline_rows` (rows in no step
    left out) and, with several devices, the per (step, device) parts it sums (each over the step's span of all
    devices; None with one device), each device's unions made once. ``ref``: as :func:`timeline_of`'s (every GPU row
    of the timeline, in a step or not: where steps overlap on the GPU, one step's span holds another's work)."""
    rows, devices = one_device_filled(rows.filter(pl.col("step").is_not_null()))
    if devices <= 1:
        return timeline_of(rows, by="step", ref=ref), None
    per = _per_device(rows, ["step"])
    summed = _sum_devices(per, ["step"], devices)
    if ref is not None:
        found = _find_other_work(rows, ["step"], ref)  # (once: the sum's are each device's summed)
        summed = _other_work(summed, ["step"], found, by_device=False)
        per = _other_work(per, ["step"], found, by_device=True)
    return _long(summed, ["step"]), _long(per, ["step", "device"])


def _long(wide: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """A wide breakdown (a row per group, a column per timeline type, ns) as the long table :func:`gpu_timeline`
    returns (``percent`` of each group's ``total_time``)."""
    long = wide.unpivot(index=[*keys, "clipped_kernels"], on=list(TIMELINE_ROWS), variable_name="type", value_name="ns")
    order = {t: i for i, t in enumerate(TIMELINE_ROWS)}
    long = long.join(wide.select(*keys, pl.col("total_time").alias("_tot")), on=keys, nulls_equal=True).with_columns(
        (pl.col("ns") / 1000.0).alias("time_us"),
        pl.when(pl.col("_tot") > 0).then(100.0 * pl.col("ns") / pl.col("_tot")).otherwise(0.0).alias("percent"),
        pl.col("type").replace_strict(order, return_dtype=pl.Int32).alias("_o"),
    )
    return long.sort([*keys, "_o"]).select(*keys, "type", "time_us", "percent", "clipped_kernels")
