"""A linked trace as a Perfetto trace (``Trace`` protobuf, our own encoder), with intra-kernel records under
their kernels: what ``kernscope intra align HOST INTRA -o merged.perfetto-trace`` writes. Formatting only: the
events are the trace's, the placement of the records is :func:`kernscope.intra.align.align`'s.

Layout (``protos/perfetto/trace/track_event``):

- one process track per ``pid`` (a ``ProcessDescriptor`` where the pid is a number, named as the trace names the
  process) and one thread track per ``(pid, tid)`` under it, named as the trace names the thread (``stream 7``,
  ``thread 1167 (python3)``);
- every complete event (``X``) is a slice (``SLICE_BEGIN``/``SLICE_END`` packets, ns), instants and zero-length
  events are ``INSTANT`` s; names and categories interned; the correlation id as a debug annotation;
- each runtime launch and the kernels it launched share one flow id (the arrow from a launch to its kernel; a
  graph launch's kernels continue its flow in time order);
- each aligned kernel's records go on child tracks of the kernel's stream track, one per SM lane
  (``↳ KERNEL · SM n lane k``), slices named by task with ``block`` and ``group`` annotations.

Every packet is encoded column-wise (:mod:`kernscope.intra.protobuf`): no Python loop per event.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ..intra import protobuf as pb
from ..intra.align import Alignment, placed
from ..intra.export import (  # the field numbers the intra-kernel export already speaks (perfetto/protos/...)
    DA_INT,
    DA_NAME_IID,
    ID_DEBUG_NAMES,
    ID_EVENT_NAMES,
    P_INTERNED,
    P_SEQ_FLAGS,
    P_SEQ_ID,
    P_TIMESTAMP,
    P_TRACK_DESC,
    P_TRACK_EVENT,
    SEQ_CLEARED,
    SEQ_NEEDS_STATE,
    SLICE_BEGIN,
    SLICE_END,
    TD_NAME,
    TD_PARENT,
    TD_PROCESS,
    TD_UUID,
    TE_DEBUG,
    TE_NAME_IID,
    TE_TRACK,
    TE_TYPE,
    TRACE_PACKET,
)
from ..model import Trace

SEQ_ID = 0x4B54  #: trusted_packet_sequence_id of the packets written here (the intra export's is another)
# the fields only the host trace needs
PD_PID, PD_NAME = 1, 6
TE_CATEGORY_IIDS, TE_FLOW_IDS = 3, 47
ID_CATEGORIES = 1
INSTANT = 3
#: debug annotation names (interned ids 1, 2, 3)
ARG_NAMES = ("correlation", "block", "group")
#: track uuids: processes, threads, intra lanes (disjoint ranges)
PROCESS_UUID, THREAD_UUID, LANE_UUID = 1 << 56, 2 << 56, 3 << 56


def _track(uuid: int, name: str, parent: int | None = None, pid: int | None = None) -> bytes:
    """A TrackDescriptor packet (a process track where ``pid`` is given)."""
    body = pb.field_varint(TD_UUID, uuid) + pb.field_string(TD_NAME, name)
    if parent is not None:
        body += pb.field_varint(TD_PARENT, parent)
    if pid is not None:
        body += pb.field_bytes(TD_PROCESS, pb.field_varint(PD_PID, pid) + pb.field_string(PD_NAME, name))
    return pb.field_bytes(TRACE_PACKET, pb.field_bytes(P_TRACK_DESC, body))


def _fixed64(values: np.ndarray, keep: np.ndarray) -> pb.Rows:
    """8-byte little-endian values on rows where ``keep`` (a ``fixed64`` field's payload)."""
    mat = np.ascontiguousarray(values.astype("<u8")).view(np.uint8).reshape(-1, 8)
    return pb.Rows(mat, np.broadcast_to(keep[:, None], mat.shape), np.where(keep, 8, 0))


def _small_int(s: str) -> int | None:
    """A pid as a ProcessDescriptor takes it: an int32, else None (the track keeps its name alone)."""
    t = s.strip()
    return int(t) if t.lstrip("-").isdigit() and -(1 << 31) <= int(t) < 1 << 31 else None


def perfetto_trace(trace: Trace, alignments: Sequence[Alignment] = ()) -> bytes:
    """``trace`` (every complete and instant event, flows from launches to kernels) with the records of
    ``alignments`` on child tracks of their kernels' streams, as Perfetto ``Trace`` protobuf bytes."""
    ev = trace.events.filter(pl.col("ph").cast(pl.String).is_in(["X", "i", "I"]) & pl.col("ts").is_not_null())
    ev = ev.select(pl.col("idx"), pl.col("pid").cast(pl.String).fill_null(""), pl.col("tid").cast(pl.String).fill_null(""),
                   pl.col("name").cast(pl.String).fill_null(""), pl.col("cat").cast(pl.String).fill_null(""), "ts",
                   pl.when(pl.col("ph").cast(pl.String) == "X").then(pl.col("dur").fill_null(0)).otherwise(0).alias("dur"),
                   pl.col("correlation").fill_null(-1) if "correlation" in ev.columns else pl.lit(-1, pl.Int64).alias("correlation"))
    # flows: a launch and every kernel it launched share the launch's event index (+1) as their flow id
    links = trace.gpu.filter(pl.col("launch_idx").is_not_null()).select("idx", "launch_idx")
    flow = pl.concat([links.select(pl.col("idx"), (pl.col("launch_idx") + 1).alias("flow")),
                      links.select(pl.col("launch_idx").alias("idx"), (pl.col("launch_idx") + 1).alias("flow")).unique("idx")])
    ev = ev.join(flow, on="idx", how="left").with_columns(pl.col("flow").fill_null(0))
    # tracks: processes, then threads under them
    threads = ev.select("pid", "tid").unique().sort("pid", "tid")
    procs = threads.select("pid").unique().sort("pid")
    head = bytearray()
    proc_uuid: dict[str, int] = {}
    for k, pid in enumerate(procs["pid"].to_list()):
        proc_uuid[pid] = PROCESS_UUID + k
        head += _track(PROCESS_UUID + k, trace.process_names.get(pid, f"process {pid}") if pid else "(no pid)",
                       pid=_small_int(pid))
    stream_track: dict[tuple[str, str], int] = {}
    for k, (pid, tid) in enumerate(threads.iter_rows()):
        stream_track[(pid, tid)] = THREAD_UUID + k
        head += _track(THREAD_UUID + k, trace.thread_names.get(f"{pid}:{tid}", f"thread {tid}"), parent=proc_uuid[pid])
    ev = ev.join(threads.with_row_index("_t").with_columns((pl.col("_t").cast(pl.Int64) + THREAD_UUID).alias("track")),
                 on=["pid", "tid"], how="left")
    rows = ev.select("ts", "dur", "track", "name", "cat", "flow", "correlation",
                     pl.lit(-1, pl.Int64).alias("block"), pl.lit(-1, pl.Int64).alias("group"))
    # intra records: child tracks of their kernel's stream track, one per SM lane
    gpu_place = trace.gpu.select(pl.col("idx").alias("gpu_idx"), pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String))
    for k, al in enumerate(alignments):
        t = placed(al)
        if t.height == 0:
            continue
        t = t.join(gpu_place, on="gpu_idx", how="left").with_columns(
            (pl.lit(LANE_UUID + (k << 40), pl.Int64) + pl.col("stream").cast(pl.Int64).fill_null(0) * (1 << 20)
             + pl.col("sm").cast(pl.Int64) * 64 + pl.col("lane")).alias("track"))
        for pid, tid, uuid, sm, lane in t.select("pid", "tid", "track", "sm", "lane").unique().sort("track").iter_rows():
            head += _track(uuid, f"\u21b3 {al.kernel} \u00b7 SM {sm} lane {lane}", parent=stream_track.get((pid, tid)))
        rows = pl.concat([rows, t.select(
            pl.col("start_ns").alias("ts"), (pl.col("end_ns") - pl.col("start_ns")).alias("dur"), "track",
            pl.col("task").cast(pl.String).alias("name"), pl.lit("intra_kernel").alias("cat"), pl.lit(0, pl.Int64).alias("flow"),
            pl.lit(-1, pl.Int64).alias("correlation"), pl.col("block").cast(pl.Int64), pl.col("group").cast(pl.Int64))],
            how="vertical_relaxed")
    names, cats = rows["name"].unique().sort(), rows["cat"].unique().sort()  # interned ids: 1, 2, ... in this order
    return bytes(_interned(names.to_list(), cats.to_list(), head)) + _events(rows, names, cats)


def _interned(names: list[str], cats: list[str], head: bytearray) -> bytearray:
    """The first packet (interned names, categories and argument names; incremental state cleared), then the
    track descriptors."""
    interned = (b"".join(pb.field_bytes(ID_CATEGORIES, pb.field_varint(1, i + 1) + pb.field_string(2, c)) for i, c in enumerate(cats))
                + b"".join(pb.field_bytes(ID_EVENT_NAMES, pb.field_varint(1, i + 1) + pb.field_string(2, n)) for i, n in enumerate(names))
                + b"".join(pb.field_bytes(ID_DEBUG_NAMES, pb.field_varint(1, i + 1) + pb.field_string(2, a))
                           for i, a in enumerate(ARG_NAMES)))
    first = pb.field_varint(P_SEQ_ID, SEQ_ID) + pb.field_varint(P_SEQ_FLAGS, SEQ_CLEARED) + pb.field_bytes(P_INTERNED, interned)
    return bytearray(pb.field_bytes(TRACE_PACKET, first)) + head


def _events(rows: pl.DataFrame, names: pl.Series, cats: pl.Series) -> bytes:
    """Begin/end (or instant) packets of every row, in time order: at one time, ends before begins, an inner
    slice's end before its outer one's, an outer slice's begin before its inner one's. ``names``, ``cats``: the
    interned strings, in their ids' order."""
    if rows.height == 0:
        return b""
    r = rows.with_columns(
        pl.col("name").replace_strict(names, pl.int_range(1, names.len() + 1, eager=True), return_dtype=pl.Int64).alias("_n"),
        pl.col("cat").replace_strict(cats, pl.int_range(1, cats.len() + 1, eager=True), return_dtype=pl.Int64).alias("_c"))
    ts, dur = r["ts"].to_numpy().astype(np.int64), r["dur"].to_numpy().astype(np.int64)
    shift = -int(ts.min()) if int(ts.min()) < 0 else 0  # Perfetto's timestamps are unsigned
    ts = ts + shift
    instant = dur <= 0
    n = r.height
    # one row per begin or instant, one per end of a slice
    ends = np.flatnonzero(~instant)
    src = np.concatenate([np.arange(n), ends])
    is_end = np.concatenate([np.zeros(n, bool), np.ones(ends.size, bool)])
    time = np.where(is_end, ts[src] + dur[src], ts[src])
    # tie-breaks: ends (0) before begins (1); ends: the later-begun first; begins: the longer first
    tie = np.where(is_end, -ts[src], -dur[src])
    order = np.lexsort((tie, (~is_end).astype(np.int8), time))
    src, is_end, time = src[order], is_end[order], time[order]
    kind = np.where(is_end, SLICE_END, np.where(instant[src], INSTANT, SLICE_BEGIN))
    first = ~is_end
    track = r["track"].to_numpy().astype(np.int64)[src]
    name = r["_n"].to_numpy().astype(np.int64)[src]
    cat = r["_c"].to_numpy().astype(np.int64)[src]
    flow = r["flow"].to_numpy().astype(np.int64)[src]
    corr = r["correlation"].to_numpy().astype(np.int64)[src]
    block = r["block"].to_numpy().astype(np.int64)[src]
    group = r["group"].to_numpy().astype(np.int64)[src]
    out = []
    step = 1 << 16  # chunks that stay cache-resident
    for a in range(0, src.size, step):
        b = min(src.size, a + step)
        out.append(_encode(time[a:b], kind[a:b], first[a:b], track[a:b], name[a:b], cat[a:b], flow[a:b], corr[a:b],
                           block[a:b], group[a:b]))
    return b"".join(out)


def _encode(ts: np.ndarray, kind: np.ndarray, first: np.ndarray, track: np.ndarray, name: np.ndarray, cat: np.ndarray,
            flow: np.ndarray, corr: np.ndarray, block: np.ndarray, group: np.ndarray) -> bytes:
    """TracePackets of TrackEvents, column-wise; begins and instants carry the name, category, flow and args."""
    m = ts.size
    has_flow = first & (flow > 0)
    te: list[pb.Column] = [
        pb.tag(TE_TYPE, pb.WT_VARINT), pb.varints(kind),
        pb.tag(TE_TRACK, pb.WT_VARINT), pb.varints(track),
        pb.const_rows(pb.tag(TE_NAME_IID, pb.WT_VARINT), first), pb.varints(name).keep(first),
        pb.const_rows(pb.tag(TE_CATEGORY_IIDS, pb.WT_VARINT), first), pb.varints(cat).keep(first),
        pb.const_rows(pb.tag(TE_FLOW_IDS, 1), has_flow), _fixed64(flow, has_flow),
    ]
    for k, values in enumerate((corr, block, group)):
        keep = first & (values >= 0)
        val = pb.varints(np.maximum(values, 0)).keep(keep)
        te += [pb.const_rows(pb.tag(TE_DEBUG, pb.WT_LEN), keep), pb.varints(1 + 1 + 1 + val.lengths).keep(keep),
               pb.const_rows(pb.field_varint(DA_NAME_IID, k + 1) + pb.tag(DA_INT, pb.WT_VARINT), keep), val]
    te_len = pb.column_lengths(te, m)
    pk: list[pb.Column] = [pb.tag(P_TIMESTAMP, pb.WT_VARINT), pb.varints(ts), pb.field_varint(P_SEQ_ID, SEQ_ID),
                           pb.field_varint(P_SEQ_FLAGS, SEQ_NEEDS_STATE), pb.tag(P_TRACK_EVENT, pb.WT_LEN), pb.varints(te_len), *te]
    pk_len = pb.column_lengths(pk, m)
    return pb.concat_rows(m, [pb.tag(TRACE_PACKET, pb.WT_LEN), pb.varints(pk_len), *pk]).tobytes()
