"""Export decoded intra-kernel tasks to Perfetto (protobuf, own encoder) and Chrome JSON.

Layout: one track group per SM; under it, the blocks that ran on that SM packed onto the fewest
non-overlapping lanes (sub-tracks); one slice per task, named by task, with block/group/SM args.
"""

from __future__ import annotations

import heapq
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..files import atomic_path
from ..scalars import as_int
from . import protobuf as pb

SEQ_ID = 0x4B53  # trusted_packet_sequence_id of every packet we write
SM_UUID_BASE = 1 << 40
LANE_UUID_BASE = 1 << 41
# field numbers (perfetto/protos/perfetto/trace/...)
TRACE_PACKET = 1
P_TIMESTAMP, P_SEQ_ID, P_TRACK_EVENT, P_INTERNED, P_SEQ_FLAGS, P_TRACK_DESC = 8, 10, 11, 12, 13, 60
TD_UUID, TD_NAME, TD_PARENT = 1, 2, 5
TE_TYPE, TE_TRACK, TE_NAME_IID, TE_DEBUG = 9, 11, 10, 4
DA_NAME_IID, DA_INT = 1, 4
ID_EVENT_NAMES, ID_DEBUG_NAMES = 2, 3
SLICE_BEGIN, SLICE_END = 1, 2
SEQ_CLEARED, SEQ_NEEDS_STATE = 1, 2
ARG_NAMES = ("block", "group")  # the SM is the track


@dataclass
class Lanes:
    """Lane (sub-track) of each (block, group) unit within its SM."""

    units: pl.DataFrame  # block, group, sm, lane
    lanes_per_sm: dict[int, int]


def _greedy(ss: np.ndarray, es: np.ndarray) -> tuple[np.ndarray, int]:
    """Interval partitioning of one SM's units (sorted by start): each takes the lowest free lane."""
    lane = np.zeros(len(ss), dtype=np.int64)
    free: list[tuple[int, int]] = []  # (end, lane) heap of busy lanes
    spare: list[int] = []
    next_lane = 0
    for i in range(len(ss)):
        while free and free[0][0] <= ss[i]:
            heapq.heappush(spare, heapq.heappop(free)[1])
        ln = heapq.heappop(spare) if spare else next_lane
        if ln == next_lane:
            next_lane += 1
        lane[i] = ln
        heapq.heappush(free, (int(es[i]), ln))
    return lane, next_lane


def assign_lanes(tasks: pl.DataFrame) -> Lanes:
    """Pack the blocks of each SM onto the fewest lanes with no overlap.

    Fast path, vectorized: an SM whose peak concurrency is ``L`` gets lane = (rank of the unit's start on the
    SM) mod ``L``, which is valid whenever every unit ends before the unit ``L`` places later starts (blocks
    running in waves, the usual shape); that is checked, and only SMs where it fails are packed by the greedy
    interval partitioning (lowest free lane first). Both use the minimum number of lanes, ``L``."""
    units = (
        tasks.group_by("block", "group", "sm")
        .agg(pl.col("start_ns").min().alias("s"), pl.col("end_ns").max().alias("e"))
        .sort(["sm", "s", "block", "group"])
    )
    n = units.height
    if n == 0:
        return Lanes(units.select("block", "group", "sm").with_columns(pl.Series("lane", [], dtype=pl.Int64)), {})
    sms = units["sm"].to_numpy()
    ss = units["s"].to_numpy()
    es = units["e"].to_numpy()
    first = np.ones(n, bool)
    first[1:] = sms[1:] != sms[:-1]
    starts = np.flatnonzero(first)
    sm_of = np.cumsum(first) - 1  # SM index of each unit
    rank = np.arange(n) - starts[sm_of]
    # peak concurrency per SM: sweep +1 at starts, -1 at ends (an end frees its lane for a start at the same time)
    t = np.concatenate([ss, es])
    kind = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    who = np.concatenate([sm_of, sm_of])
    order = np.lexsort((kind, t, who))
    depth = np.cumsum(kind[order])
    sm_sorted = who[order]
    sm_first = np.ones(2 * n, bool)
    sm_first[1:] = sm_sorted[1:] != sm_sorted[:-1]
    base = np.maximum.accumulate(np.where(sm_first, np.arange(2 * n), 0))
    depth = depth - (depth[base] - kind[order][base])  # running depth within each SM
    peak = np.zeros(len(starts), dtype=np.int64)
    np.maximum.at(peak, sm_sorted, depth)
    lane = rank % peak[sm_of]
    # valid where the previous unit on the same (SM, lane) ended before this one starts
    prev = np.arange(n) - peak[sm_of]
    bad = (rank >= peak[sm_of]) & (es[np.maximum(prev, 0)] > ss)
    lanes_per_sm = {int(sms[i]): int(peak[k]) for k, i in enumerate(starts)}
    for k in np.unique(sm_of[bad]):
        a = int(starts[k])
        b = int(starts[k + 1]) if k + 1 < len(starts) else n
        lane[a:b], lanes_per_sm[int(sms[a])] = _greedy(ss[a:b], es[a:b])
    return Lanes(units.select("block", "group", "sm").with_columns(pl.Series("lane", lane)), lanes_per_sm)


def _track(uuid: int, parent: int | None, name: str) -> bytes:
    """A TrackDescriptor packet."""
    body = pb.field_varint(TD_UUID, uuid) + (pb.field_varint(TD_PARENT, parent) if parent is not None else b"")
    return pb.field_bytes(TRACE_PACKET, pb.field_bytes(P_TRACK_DESC, body + pb.field_string(TD_NAME, name)))


def perfetto_bytes(tasks: pl.DataFrame, task_names: list[str] | None = None, *, title: str = "kernscope intra-kernel") -> bytes:
    """Encode tasks as a Perfetto trace (``Trace`` protobuf)."""
    if tasks.height:
        lanes = assign_lanes(tasks)
        t = tasks.join(lanes.units, on=["block", "group", "sm"], how="left")
    else:
        lanes = Lanes(pl.DataFrame(schema={"block": pl.Int64, "group": pl.Int64, "sm": pl.Int64, "lane": pl.Int64}), {})
        t = tasks.with_columns(pl.lit(0).alias("lane"))
    names = sorted(set(t["task"].cast(pl.String).to_list())) if t.height else []
    name_iid = {n: i + 1 for i, n in enumerate(names)}
    head = bytearray()
    # interned names + incremental state
    interned = b"".join(
        pb.field_bytes(ID_EVENT_NAMES, pb.field_varint(1, iid) + pb.field_string(2, n)) for n, iid in name_iid.items()
    ) + b"".join(
        pb.field_bytes(ID_DEBUG_NAMES, pb.field_varint(1, i + 1) + pb.field_string(2, a)) for i, a in enumerate(ARG_NAMES)
    )
    first = pb.field_varint(P_SEQ_ID, SEQ_ID) + pb.field_varint(P_SEQ_FLAGS, SEQ_CLEARED) + pb.field_bytes(P_INTERNED, interned)
    head += pb.field_bytes(TRACE_PACKET, first)
    root_uuid = SM_UUID_BASE - 1
    head += _track(root_uuid, None, title)
    for sm in sorted(lanes.lanes_per_sm):
        sm_uuid = SM_UUID_BASE + sm
        head += _track(sm_uuid, root_uuid, f"SM {sm}")
        for ln in range(lanes.lanes_per_sm[sm]):
            head += _track(LANE_UUID_BASE + (sm << 16) + ln, sm_uuid, f"SM {sm} lane {ln}")
    if t.height == 0:
        return bytes(head)
    n = t.height
    track = LANE_UUID_BASE + (t["sm"].to_numpy() << 16) + t["lane"].to_numpy()
    # begin and end rows, sorted by time (ends first at equal times so back-to-back slices nest right)
    ts = np.concatenate([t["start_ns"].to_numpy(), t["end_ns"].to_numpy()])
    is_begin = np.concatenate([np.ones(n, bool), np.zeros(n, bool)])
    order = np.lexsort((is_begin, ts))
    ts, is_begin = ts[order], is_begin[order]
    src = np.concatenate([np.arange(n), np.arange(n)])[order]
    trk = track[src]
    iid = t["task"].cast(pl.String).replace_strict(name_iid, return_dtype=pl.Int64).to_numpy()[src]
    block = t["block"].to_numpy()[src]
    group = t["group"].to_numpy()[src]
    chunks = [bytes(head)]
    step = 1 << 16  # encode in chunks that stay cache-resident
    for a in range(0, 2 * n, step):
        b = min(2 * n, a + step)
        chunks.append(_encode_slices(ts[a:b], is_begin[a:b], trk[a:b], iid[a:b], block[a:b], group[a:b]))
    return b"".join(chunks)


def _encode_slices(ts: np.ndarray, is_begin: np.ndarray, trk: np.ndarray, iid: np.ndarray, block: np.ndarray,
                   group: np.ndarray) -> bytes:
    """Slice begin/end TracePackets, vectorized. Begin packets carry the interned name and args."""
    m = len(ts)
    # One flat list of columns for the whole packet, nested lengths computed arithmetically, so
    # the bytes are assembled by a single horizontal stack and one boolean gather.
    te_cols: list[pb.Column] = [
        pb.tag(TE_TYPE, pb.WT_VARINT), pb.varints(np.where(is_begin, SLICE_BEGIN, SLICE_END)),
        pb.tag(TE_TRACK, pb.WT_VARINT), pb.varints(trk),
        pb.const_rows(pb.tag(TE_NAME_IID, pb.WT_VARINT), is_begin), pb.varints(iid).keep(is_begin),
    ]
    for k, values in enumerate((block, group)):
        val = pb.varints(values).keep(is_begin)
        body_len = 1 + 1 + 1 + val.lengths  # name_iid tag+value, int_value tag, value
        te_cols += [
            pb.const_rows(pb.tag(TE_DEBUG, pb.WT_LEN), is_begin), pb.varints(body_len).keep(is_begin),
            pb.const_rows(pb.field_varint(DA_NAME_IID, k + 1) + pb.tag(DA_INT, pb.WT_VARINT), is_begin), val,
        ]
    te_len = pb.column_lengths(te_cols, m)
    pk_cols: list[pb.Column] = [
        pb.tag(P_TIMESTAMP, pb.WT_VARINT), pb.varints(ts), pb.field_varint(P_SEQ_ID, SEQ_ID),
        pb.const_rows(pb.field_varint(P_SEQ_FLAGS, SEQ_NEEDS_STATE), is_begin),
        pb.tag(P_TRACK_EVENT, pb.WT_LEN), pb.varints(te_len), *te_cols,
    ]
    pk_len = pb.column_lengths(pk_cols, m)
    return pb.concat_rows(m, [pb.tag(TRACE_PACKET, pb.WT_LEN), pb.varints(pk_len), *pk_cols]).tobytes()


def chrome_trace(tasks: pl.DataFrame, unit: str = "ns") -> dict[str, Any]:
    """Chrome trace-event JSON (µs): pid = SM, tid = lane, one ``X`` event per task. ``unit`` "cycles": the
    times count SM cycles (written 1 cycle = 1 ns), kept in ``otherData.time_unit`` so reading back keeps it."""
    if tasks.height == 0:
        return {"traceEvents": [], "displayTimeUnit": "ns"}
    lanes = assign_lanes(tasks)
    t = tasks.join(lanes.units, on=["block", "group", "sm"], how="left")
    t0 = as_int(t["start_ns"].min())
    ev = t.select(
        pl.lit("X").alias("ph"), pl.col("task").alias("name"), pl.lit("intra").alias("cat"),
        pl.col("sm").alias("pid"), pl.col("lane").alias("tid"),
        ((pl.col("start_ns") - t0) / 1000.0).alias("ts"), (pl.col("duration_ns") / 1000.0).alias("dur"),
        pl.struct("block", "group", "sm", "task_type").alias("args"),
    ).to_dicts()
    meta = [{"ph": "M", "name": "process_name", "pid": sm, "tid": 0, "args": {"name": f"SM {sm}"}} for sm in lanes.lanes_per_sm]
    other: dict[str, Any] = {"t0_ns": t0, "clock": "globaltimer" if unit == "ns" else "SM cycles"}
    if unit != "ns":
        other["time_unit"] = unit
    return {"traceEvents": meta + ev, "displayTimeUnit": "ns", "otherData": other}


def _target(file_name: str | os.PathLike[str], ext: str) -> str:
    f = str(file_name)
    return f if os.path.splitext(f)[1] else f + ext


def write_perfetto(tasks: pl.DataFrame, file_name: str | os.PathLike[str], task_names: list[str] | None = None) -> str:
    """Write a ``.perfetto-trace`` file (extension added when the name has none); returns the path."""
    path = _target(file_name, ".perfetto-trace")
    data = perfetto_bytes(tasks, task_names)
    with atomic_path(path) as p:
        p.write_bytes(data)
    return path


def write_chrome(tasks: pl.DataFrame, file_name: str | os.PathLike[str], unit: str = "ns") -> str:
    path = _target(file_name, ".json")
    with atomic_path(path) as p:
        p.write_text(json.dumps(chrome_trace(tasks, unit)))
    return path


#: TrackEvent fields beyond what we write (other writers: tg4perfetto for Triton-distributed and flashinfer, Perfetto's
#: own SDKs): the event's name as a string, and the kinds of debug-annotation value
TE_NAME = 23
DA_NAME, DA_UINT = 10, 3
TD_THREAD, TD_PROCESS = 4, 3
#: debug annotations read as a slice's unit: block (CTA) and group (warp or warp group) ids, and its SM
_UNIT_ARGS = {"block": "block", "cta": "block", "program": "block", "group": "group", "warp": "group",
              "warp_group": "group", "sm": "sm", "smid": "sm"}


def read_perfetto(data: bytes) -> pl.DataFrame:
    """A task table from a Perfetto trace of intra-kernel slices: kernscope's own (:func:`perfetto_bytes`: tracks per
    SM lane, block and group as debug annotations) or another writer's (TrackEvent slices with interned or plain
    names, on any tracks). Slices pair per track (begin/end, nested); instants are skipped. A slice's unit: its
    ``block``/``cta``, ``group``/``warp`` and ``sm`` debug annotations where given, else its track is the unit
    (block = the track's number, group 0) and the track's parent is its SM. Names and debug-annotation names are
    interned per packet sequence, as the format defines."""
    names: dict[tuple[int, int], str] = {}
    arg_names: dict[tuple[int, int], str] = {}
    tracks: dict[int, tuple[str, int | None]] = {}
    open_slices: dict[int, list[tuple[int, str, dict[str, int]]]] = {}
    rows: list[tuple[int, str, int, int, dict[str, int]]] = []
    for f, _, pkt in pb.iter_fields(data):  # one step per packet: this reads files, not the hot path
        if f != TRACE_PACKET:
            continue
        ts = seq = 0
        te = None
        for pf, _, v in pb.iter_fields(pkt):
            if pf == P_TIMESTAMP:
                ts = v
            elif pf == P_SEQ_ID:
                seq = v
            elif pf == P_INTERNED:
                _intern(v, seq, names, arg_names)
            elif pf == P_TRACK_DESC:
                uuid, label, parent = _track_desc(v)
                tracks[uuid] = (label, parent)
            elif pf == P_TRACK_EVENT:
                te = v
        if te is None:
            continue
        typ, trk, label, args = _track_event(te, seq, names, arg_names)
        if typ == SLICE_BEGIN:
            open_slices.setdefault(trk, []).append((ts, label, args))
        elif typ == SLICE_END and open_slices.get(trk):
            s, label0, a = open_slices[trk].pop()
            rows.append((trk, label0, s, ts, a))
    return _slices_table(rows, tracks)


def _text(v: Any) -> str:
    return bytes(v).decode("utf-8", "replace")


def _intern(v: bytes, seq: int, names: dict[tuple[int, int], str], arg_names: dict[tuple[int, int], str]) -> None:
    for idf, _, entry in pb.iter_fields(v):
        if idf in (ID_EVENT_NAMES, ID_DEBUG_NAMES):
            d = {k: val for k, _, val in pb.iter_fields(entry)}
            (names if idf == ID_EVENT_NAMES else arg_names)[(seq, int(d.get(1, 0)))] = _text(d.get(2, b""))


def _track_desc(v: bytes) -> tuple[int, str, int | None]:
    d = {k: val for k, _, val in pb.iter_fields(v)}
    label = _text(d.get(TD_NAME, b""))
    for sub, name_field in ((TD_THREAD, 5), (TD_PROCESS, 6)):  # thread_name, process_name
        if not label and sub in d:
            inner = {k: val for k, _, val in pb.iter_fields(d[sub])}
            label = _text(inner.get(name_field, b""))
    parent = d.get(TD_PARENT)
    return int(d.get(TD_UUID, 0)), label, int(parent) if parent is not None else None


def _track_event(te: bytes, seq: int, names: dict[tuple[int, int], str], arg_names: dict[tuple[int, int], str]
                 ) -> tuple[int | None, int, str, dict[str, int]]:
    """(type, track, name, unit args) of one TrackEvent."""
    typ = iid = None
    trk = 0
    name = None
    args: dict[str, int] = {}
    for ef, _, v in pb.iter_fields(te):
        if ef == TE_TYPE:
            typ = v
        elif ef == TE_TRACK:
            trk = int(v)
        elif ef == TE_NAME_IID:
            iid = v
        elif ef == TE_NAME:
            name = _text(v)
        elif ef == TE_DEBUG:
            d = {k: val for k, _, val in pb.iter_fields(v)}
            key = arg_names.get((seq, int(d[DA_NAME_IID])), "") if DA_NAME_IID in d else _text(d.get(DA_NAME, b""))
            value = d.get(DA_INT, d.get(DA_UINT))
            if key.lower() in _UNIT_ARGS and isinstance(value, int):
                args[_UNIT_ARGS[key.lower()]] = value - (1 << 64) if value >= 1 << 63 else value
    label = name if name is not None else names.get((seq, int(iid or 0)), str(iid))
    return typ, trk, label, args


def _slices_table(rows: list[tuple[int, str, int, int, dict[str, int]]], tracks: dict[int, tuple[str, int | None]]
                  ) -> pl.DataFrame:
    """Slices (track, name, start, end, unit args) as a task table. A unit arg missing on a slice is the first one
    given on its track (a writer may annotate only a track's first slice); failing that, the track is the unit."""
    schema = {"block": pl.Int64, "group": pl.Int64, "sm": pl.Int64, "task": pl.Categorical, "start_ns": pl.Int64,
              "end_ns": pl.Int64, "duration_ns": pl.Int64}
    if not rows:
        return pl.DataFrame(schema=schema)
    order = {u: i for i, u in enumerate(sorted(tracks))}  # tracks numbered by uuid: the same in every read
    on_track: dict[int, dict[str, int]] = {}
    for trk, _, _, _, a in rows:
        if a:
            seen = on_track.setdefault(trk, {})
            for k, v in a.items():
                seen.setdefault(k, v)
    out = []
    for trk, label, s, e, a in rows:  # one per slice of the file being read
        a = {**on_track.get(trk, {}), **a}
        parent = tracks.get(trk, ("", None))[1]
        own_sm = (trk - LANE_UUID_BASE) >> 16 if LANE_UUID_BASE <= trk < LANE_UUID_BASE + (1 << 40) else None
        sm = a.get("sm", own_sm if own_sm is not None else order.get(parent, -1) if parent is not None else -1)
        out.append({"block": a.get("block", order.get(trk, trk)), "group": a.get("group", 0), "sm": sm, "task": label,
                    "start_ns": s, "end_ns": e, "duration_ns": e - s})
    return pl.DataFrame(out, schema=schema)
