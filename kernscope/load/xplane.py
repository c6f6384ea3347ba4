"""JAX / XLA profiles (``*.xplane.pb``, the XSpace protobuf) -> the event table every trace becomes.

``jax.profiler.trace`` writes ``<host>.xplane.pb``: an ``XSpace`` of ``XPlane`` s (``/device:GPU:N``,
``/host:CPU``, ``/host:metadata``, ``Task Environment``), each with ``XLine`` s (a GPU stream, a host
thread) of ``XEvent`` s (an offset and a duration in **picoseconds** from the line's start in ns, a
metadata id naming the event, and ``XStat`` s typed by the plane's stat metadata). Schema:
``tsl/profiler/protobuf/xplane.proto``; decoded here with :mod:`.protowire` (numpy, column-wise).

The result is a :class:`~kernscope.model.RawTrace` with the columns of the Kineto decoder, so linking
and every analysis run unchanged:

- GPU events: ``cat`` ``kernel`` / ``gpu_memcpy`` / ``gpu_memset``, ``pid``/``device`` the GPU ordinal,
  ``tid``/``stream`` the stream (line id), ``correlation`` from ``correlation_id``, plus JAX columns
  ``hlo_op``, ``hlo_module``, ``op_path`` (the JAX op's name path), ``program_id``, ``cuda_graph_id``
  (XLA command buffers are CUDA graphs), ``kernel_details`` parsed into ``grid_*``, ``block_*``,
  ``registers``, ``static_shared``, ``dynamic_shared``, ``occupancy_pct``;
- host events with a ``correlation_id``: the runtime/driver launches (``cuLaunchKernel``,
  ``cuGraphLaunch (CudaGraph:N)``, ``hipModuleLaunchKernel`` ...);
- Python frames (names starting ``$``) as ``python_function``; XLA module executions and HLO ops (host
  events named like an ``hlo_op`` / ``hlo_module`` of the trace) as ``cpu_op``; every other TraceMe as
  ``user_annotation``; ``StepTraceAnnotation`` s carry ``step_num``; events without a duration are
  instants (``ph: i``: memory allocations and the like).

Times: ``ts = line.timestamp_ns + round(offset_ps / 1000)``, ``end`` rounded the same way (ns, the
unit of every table); ``metadata["baseTimeNanoseconds"]`` is the profile's start (epoch ns).
Unknown stats are ignored and counted (``metadata["xplane"]["unknown_stats"]``).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from ..errors import TraceError
from ..model import RawTrace
from .argspec import ARG_FIELDS, XPLANE_SPEC_VERSION
from .chunk import EVENT_SCHEMA
from .protowire import Fields, WireError, fields_of, padded, walk

# XSpace / XPlane / XLine / XEvent / XStat / metadata field numbers (xplane.proto)
_SPACE_PLANES, _SPACE_HOSTNAMES = 1, 4
_PLANE_ID, _PLANE_NAME, _PLANE_LINES, _PLANE_EVENT_MD, _PLANE_STAT_MD, _PLANE_STATS = 1, 2, 3, 4, 5, 6
_LINE_ID, _LINE_NAME, _LINE_TS, _LINE_EVENTS, _LINE_DISPLAY = 1, 2, 3, 4, 11
_EV_MD, _EV_OFFSET, _EV_DUR, _EV_STATS, _EV_OCCURRENCES = 1, 2, 3, 4, 5
_ST_MD, _ST_DOUBLE, _ST_U64, _ST_I64, _ST_STR, _ST_BYTES, _ST_REF = 1, 2, 3, 4, 5, 6, 7
_MD_ID, _MD_NAME, _MD_DISPLAY, _MD_STATS = 1, 2, 4, 5



@dataclass(frozen=True)
class StatField:
    raw: str  #: the stat's name in the plane's stat metadata
    column: str  #: column in the event table
    kind: str  #: "int" (Int64), "float" (Float64), "str" (categorical string)


#: the stats that become columns (like :mod:`.argspec` for Kineto's args); the others are counted
STAT_FIELDS: tuple[StatField, ...] = (
    StatField("correlation_id", "correlation", "int"),
    StatField("hlo_op", "hlo_op", "str"),
    StatField("hlo_module", "hlo_module", "str"),
    StatField("name", "op_path", "str"),
    StatField("program_id", "program_id", "int"),
    StatField("cuda_graph_id", "cuda_graph_id", "int"),
    StatField("kernel_details", "kernel_details", "str"),
    StatField("theoretical_occupancy_pct", "occupancy_pct", "float"),
    StatField("memcpy_details", "memcpy_details", "str"),
    StatField("step_num", "step_num", "int"),
    StatField("bytes_allocated", "bytes_allocated", "int"),
    StatField("bytes_reserved", "bytes_reserved", "int"),
    StatField("peak_bytes_in_use", "peak_bytes_in_use", "int"),
    StatField("allocation_bytes", "allocation_bytes", "int"),
    StatField("requested_bytes", "requested_bytes", "int"),
    StatField("allocator_name", "allocator_name", "str"),
)
#: parsed from ``kernel_details`` ("regs:154 static_shared:0 dynamic_shared:98328 grid:128,1,1 block:128,1,1
#: occ_pct:12.5"; AMD: "grid:.. block:.. private_mem:0 group_mem:49280 occ_pct:0")
KERNEL_DETAIL_COLUMNS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
                         "static_shared", "dynamic_shared")
#: JAX columns added to the event table (after Kineto's)
JAX_COLUMNS: dict[str, Any] = {
    **{f.column: (pl.Int64 if f.kind == "int" else pl.Float64 if f.kind == "float" else pl.Categorical)
       for f in STAT_FIELDS if f.column not in EVENT_SCHEMA},
    **{c: pl.Int64 for c in KERNEL_DETAIL_COLUMNS},
}
_META_COLUMNS = ["idx", "name", "pid", "tid", "meta_name", "sort_index"]
_FLOW_COLUMNS = ["idx", "ph", "cat", "name", "pid", "tid", "ts", "flow_id"]
#: plane stats copied into ``metadata`` (host metadata plane, device planes, task environment)
_DEVICE_STATS = {"gpu_device_name": "name", "device_vendor": "vendor", "clock_rate": "clockRateKHz",
                 "core_count": "numSms", "memory_size": "totalGlobalMem", "memory_bandwidth": "memoryBandwidth",
                 "compute_cap_major": "computeMajor", "compute_cap_minor": "computeMinor"}


def is_xspace(head: bytes) -> bool:
    """Whether a file starting with ``head`` (its first bytes, decompressed) looks like an XSpace: a
    first field ``planes`` (field 1, length-prefixed) whose first field is a plane id or name."""
    if len(head) < 4 or head[0] != 0x0A:
        return False
    i, n = 1, 0
    for shift in range(0, 35, 7):
        if i >= len(head):
            return False
        b = head[i]
        n |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            break
    return i < len(head) and head[i] in (0x08, 0x12, 0x1A) and n > 0


def _texts(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> pa.Array:
    """Payloads as an Arrow string array, gathered with numpy (no Python object per string)."""
    size = size.astype(np.int64)
    offsets = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        idx = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1] - off.astype(np.int64), size)
        data = buf[idx]
    else:
        data = np.zeros(0, dtype=np.uint8)
    arr = pa.LargeStringArray.from_buffers(size.size, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:  # invalid UTF-8: decode each with replacement (rare)
        raw = data.tobytes()
        arr = pa.array([raw[a:b].decode("utf-8", "replace") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())],
                       type=pa.large_string())
    return arr


def _one(f: Fields, field: int, wire: int, default: int = 0) -> int:
    s = f.of(field, wire)
    return int(s.value[-1]) if len(s) else default


def _one_text(buf: np.ndarray, f: Fields, field: int) -> str:
    s = f.of(field, 2)
    if not len(s):
        return ""
    o, n = int(s.off[-1]), int(s.size[-1])
    return buf[o : o + n].tobytes().decode("utf-8", "replace")


def _i64(u: np.ndarray) -> np.ndarray:
    return u.view(np.int64) if u.dtype == np.uint64 else u.astype(np.int64)


@dataclass
class _Plane:
    index: int
    name: str
    id: int
    lines: list[dict[str, Any]]
    md: Fields  #: event metadata map entries
    smd: Fields  #: stat metadata map entries
    stats: Fields  #: the plane's own stats (wire type 2 payloads)


def _planes(buf: np.ndarray, n: int, path: str) -> tuple[list[_Plane], list[str]]:
    space = walk(buf, 0, n, what="XSpace")
    if not len(space) or not np.isin(space.field, (1, 2, 3, 4)).all():
        raise TraceError(path, "not a JAX/XLA profile (XSpace protobuf) nor a JSON trace")
    planes: list[_Plane] = []
    pf = space.of(_SPACE_PLANES, 2)
    for i, (o, s) in enumerate(zip(pf.off.tolist(), pf.size.tolist())):
        f = walk(buf, o, o + s, runs=(_PLANE_EVENT_MD, _PLANE_STAT_MD, _PLANE_STATS), what="XPlane")
        lines = []
        lf = f.of(_PLANE_LINES, 2)
        for lo, ls in zip(lf.off.tolist(), lf.size.tolist()):
            g = walk(buf, lo, lo + ls, runs=(_LINE_EVENTS,), what="XLine")
            ev = g.of(_LINE_EVENTS, 2)
            lines.append({"id": _i64(np.array([_one(g, _LINE_ID, 0)], dtype=np.uint64))[0],
                          "name": _one_text(buf, g, _LINE_NAME) or _one_text(buf, g, _LINE_DISPLAY),
                          "ts": int(_i64(np.array([_one(g, _LINE_TS, 0)], dtype=np.uint64))[0]),
                          "ev_off": ev.off, "ev_size": ev.size})
        planes.append(_Plane(i, _one_text(buf, f, _PLANE_NAME), _one(f, _PLANE_ID, 0), lines,
                             f.of(_PLANE_EVENT_MD, 2), f.of(_PLANE_STAT_MD, 2), f.of(_PLANE_STATS, 2)))
    hosts = [buf[o : o + s].tobytes().decode("utf-8", "replace")
             for o, s in zip(space.of(_SPACE_HOSTNAMES, 2).off.tolist(), space.of(_SPACE_HOSTNAMES, 2).size.tolist())]
    return planes, hosts


def _map_values(buf: np.ndarray, entries: Fields, plane: np.ndarray, what: str) -> tuple[np.ndarray, Fields]:
    """The values of map entries (key 1, value 2 a message): (plane of each value, fields of the values)."""
    ef = fields_of(buf, entries.off, entries.off + entries.size, what=what)
    vals = ef.of(2, 2)
    keys = ef.of(1, 0)
    del keys
    return plane[vals.msg], fields_of(buf, vals.off, vals.off + vals.size, what=what)


def _stat_metadata(buf: np.ndarray, planes: list[_Plane]) -> pl.DataFrame:
    """``plane, id, stat`` (the stat's name) for every stat metadata entry of every plane."""
    parts = []
    for p in planes:
        if not len(p.smd):
            continue
        _, v = _map_values(buf, p.smd, np.full(len(p.smd), p.index), "stat metadata")
        ids = v.of(_MD_ID, 0)
        names = v.of(_MD_NAME, 2)
        id_of = np.zeros(len(p.smd), dtype=np.int64)
        id_of[ids.msg] = _i64(ids.value)
        parts.append(pl.DataFrame({"plane": np.full(names.msg.size, p.index, dtype=np.int64), "id": id_of[names.msg],
                                   "stat": pl.Series(_texts(buf, names.off, names.size)).cast(pl.String)}))
    if not parts:
        return pl.DataFrame(schema={"plane": pl.Int64, "id": pl.Int64, "stat": pl.String})
    return pl.concat(parts).unique(["plane", "id"], keep="last")


def _event_metadata(buf: np.ndarray, planes: list[_Plane]) -> tuple[pl.DataFrame, list[tuple[int, int, int, int]]]:
    """``plane, md, name`` per event metadata entry, and the metadata-level stats as (plane, md, offset
    of the stats payload) triples' arrays."""
    frames = []
    stat_rows: list[tuple[int, int, int, int]] = []
    for p in planes:
        if not len(p.md):
            continue
        _, v = _map_values(buf, p.md, np.full(len(p.md), p.index), "event metadata")
        n = len(p.md)
        ids = v.of(_MD_ID, 0)
        id_of = np.zeros(n, dtype=np.int64)
        id_of[ids.msg] = _i64(ids.value)
        names = v.of(_MD_NAME, 2)
        disp = v.of(_MD_DISPLAY, 2)
        name_s = pl.Series("name", [None] * n, dtype=pl.String)
        if names.msg.size:
            name_s = name_s.scatter(names.msg, pl.Series(_texts(buf, names.off, names.size)).cast(pl.String))
        if disp.msg.size:  # the display name where no name is given
            disp_s = pl.Series([None] * n, dtype=pl.String).scatter(disp.msg, pl.Series(_texts(buf, disp.off, disp.size)).cast(pl.String))
            name_s = pl.select(pl.coalesce(pl.lit(name_s).replace("", None), pl.lit(disp_s))).to_series().alias("name")
        frame = pl.DataFrame({"plane": np.full(n, p.index, dtype=np.int64), "md": id_of, "name": name_s})
        frames.append(frame)
        st = v.of(_MD_STATS, 2)
        stat_rows.extend(zip([p.index] * st.msg.size, id_of[st.msg].tolist(), st.off.tolist(), st.size.tolist()))
    md = (pl.concat(frames) if frames else pl.DataFrame(schema={"plane": pl.Int64, "md": pl.Int64, "name": pl.String}))
    return md.unique(["plane", "md"], keep="last"), stat_rows


def _stats_table(buf: np.ndarray, owner: np.ndarray, off: np.ndarray, size: np.ndarray, plane: np.ndarray,
                 smd: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Decode stats (messages at ``off``/``size``, owned by row ``owner`` of plane ``plane``) into one row per
    wanted stat: ``row, column, int, float, str``; and the number of stats not wanted."""
    f = fields_of(buf, off, off + size, what="XStat")
    n = off.size
    md = np.zeros(n, dtype=np.int64)
    m = f.of(_ST_MD, 0)
    md[m.msg] = _i64(m.value)
    vals = f.select(f.field != _ST_MD)
    # the last value field of each stat wins (a oneof)
    last = np.full(n, -1, dtype=np.int64)
    last[vals.msg] = np.arange(len(vals))
    has = last >= 0
    vf = vals.select(last[has])
    stat_idx = np.flatnonzero(has)
    key = pl.DataFrame({"plane": plane[stat_idx], "id": md[stat_idx], "_k": np.arange(stat_idx.size)})
    named = key.join(smd, on=["plane", "id"], how="left").sort("_k")
    stat_name = named["stat"]
    wanted = {s.raw: s for s in STAT_FIELDS}
    is_wanted = stat_name.is_in(list(wanted)).fill_null(False).to_numpy()
    unknown = int((~is_wanted).sum())
    sel = np.flatnonzero(is_wanted)
    vw = vf.select(sel)
    field = vw.field
    ints = np.where(field == _ST_I64, _i64(vw.value), np.where(field == _ST_U64, _i64(vw.value), 0))
    int_ok = (field == _ST_I64) | (field == _ST_U64)
    dbl = vw.value.view(np.float64)
    dbl_ok = field == _ST_DOUBLE
    str_ok = field == _ST_STR
    ref_ok = field == _ST_REF
    texts = pl.Series([None] * sel.size, dtype=pl.String)
    if str_ok.any():
        t = pl.Series(_texts(buf, vw.off[str_ok], vw.size[str_ok])).cast(pl.String)
        texts = texts.scatter(np.flatnonzero(str_ok), t)
    if ref_ok.any():
        refs = pl.DataFrame({"plane": plane[stat_idx[sel[ref_ok]]], "id": _i64(vw.value[ref_ok]), "_k": np.arange(int(ref_ok.sum()))})
        rn = refs.join(smd, on=["plane", "id"], how="left").sort("_k")["stat"]
        texts = texts.scatter(np.flatnonzero(ref_ok), rn)
    table = pl.DataFrame({
        "row": owner[stat_idx[sel]],
        "stat": stat_name.gather(sel),
        "int": pl.Series(ints).set(pl.Series(~int_ok), None),
        "float": pl.Series(np.where(dbl_ok, dbl, np.where(int_ok, ints.astype(np.float64), np.nan))).set(
            pl.Series(~(dbl_ok | int_ok)), None),
        "str": texts,
    })
    return table, unknown


def _pivot(stats: pl.DataFrame, n: int) -> dict[str, pl.Series]:
    """One column per wanted stat, ``n`` rows (null where an event has no such stat; the last one wins)."""
    cols: dict[str, pl.Series] = {}
    for s in STAT_FIELDS:
        part = stats.filter(pl.col("stat") == s.raw)
        dtype = JAX_COLUMNS.get(s.column, pl.Int64)
        if s.kind == "int":
            v = pl.coalesce(pl.col("int"), pl.col("float").cast(pl.Int64, strict=False),
                            pl.col("str").str.strip_chars().cast(pl.Int64, strict=False))
            dtype = pl.Int64
        elif s.kind == "float":
            v = pl.coalesce(pl.col("float"), pl.col("str").str.strip_chars().cast(pl.Float64, strict=False))
            dtype = pl.Float64
        else:
            v = pl.coalesce(pl.col("str"), pl.col("int").cast(pl.String), pl.col("float").cast(pl.String))
            dtype = pl.String
        if part.height == 0:
            cols[s.column] = pl.Series(s.column, [None] * n, dtype=dtype)
            continue
        vals = part.select("row", v.alias("v")).unique("row", keep="last")
        out = pl.Series(s.column, [None] * n, dtype=dtype).scatter(vals["row"].to_numpy(), vals["v"].cast(dtype))
        cols[s.column] = out
    return cols


def kernel_details(details: pl.Series) -> dict[str, pl.Series]:
    """``grid_x/y/z``, ``block_x/y/z``, ``registers``, ``static_shared``, ``dynamic_shared`` (bytes) from
    XLA's ``kernel_details`` text; AMD's ``group_mem`` counts as shared memory."""
    s = details.cast(pl.String)
    out = {}
    for i, axis in enumerate("xyz"):
        out[f"grid_{axis}"] = s.str.extract(r"grid:(\d+),(\d+),(\d+)", i + 1).cast(pl.Int64, strict=False).alias(f"grid_{axis}")
        out[f"block_{axis}"] = s.str.extract(r"block:(\d+),(\d+),(\d+)", i + 1).cast(pl.Int64, strict=False).alias(f"block_{axis}")
    out["registers"] = s.str.extract(r"regs:(\d+)", 1).cast(pl.Int64, strict=False).alias("registers")
    out["static_shared"] = s.str.extract(r"static_shared:(\d+)", 1).cast(pl.Int64, strict=False).alias("static_shared")
    dyn = s.str.extract(r"dynamic_shared:(\d+)", 1).cast(pl.Int64, strict=False)
    group = s.str.extract(r"group_mem:(\d+)", 1).cast(pl.Int64, strict=False)
    out["dynamic_shared"] = pl.Series("dynamic_shared", pl.select(pl.coalesce(pl.lit(dyn), pl.lit(group))).to_series())
    return out


def _hlo(buf: np.ndarray, md_stat_rows: list[tuple[int, int, int, int]], smd: pl.DataFrame) -> pl.DataFrame:
    """The HLO instructions of every module whose ``HloProto`` the profile carries (:mod:`.hlo`)."""
    from .hlo import instructions

    if not md_stat_rows:
        return instructions(buf, [])
    mp = np.array([r[0] for r in md_stat_rows], dtype=np.int64)
    mo = np.array([r[2] for r in md_stat_rows], dtype=np.int64)
    ms = np.array([r[3] for r in md_stat_rows], dtype=np.int64)
    f = fields_of(buf, mo, mo + ms, what="XStat")
    ids = np.zeros(mo.size, dtype=np.int64)
    m = f.of(_ST_MD, 0)
    ids[m.msg] = _i64(m.value)
    names = pl.DataFrame({"plane": mp, "id": ids, "_k": np.arange(mo.size)}).join(smd, on=["plane", "id"], how="left").sort("_k")
    is_hlo = (names["stat"] == "Hlo Proto").fill_null(False).to_numpy()
    payload = f.of(_ST_BYTES, 2)
    payload = payload.select(is_hlo[payload.msg])
    return instructions(buf, list(zip(payload.off.tolist(), payload.size.tolist())))


def _with_hlo(table: pl.DataFrame, hlo: pl.DataFrame) -> pl.DataFrame:
    """GPU rows get ``hlo_instruction`` and ``hlo_desc`` (what XLA compiled the kernel from) and, where the
    event has none, the JAX ``op_path`` from the instruction's metadata."""
    if hlo.height == 0:
        return table.with_columns(pl.lit(None, dtype=pl.Categorical).alias("hlo_instruction"),
                                  pl.lit(None, dtype=pl.Categorical).alias("hlo_desc"))
    key = pl.col("name").cast(pl.String).str.replace(r"\.kd$", "")
    lookup = hlo.select(pl.col("hlo_module").alias("_m"), pl.col("kernel").alias("_k"), pl.col("instruction").alias("_i"),
                        pl.col("desc").alias("_d"), pl.col("op_path").alias("_p"))
    by_op = hlo.select(pl.col("hlo_module").alias("_m"), pl.col("instruction").alias("_o"), pl.col("instruction").alias("_i2"),
                       pl.col("desc").alias("_d2"), pl.col("op_path").alias("_p2"))
    out = (table.with_columns(pl.col("hlo_module").cast(pl.String).alias("_m"), key.alias("_k"),
                              pl.col("hlo_op").cast(pl.String).alias("_o"))
           .join(lookup, on=["_m", "_k"], how="left", maintain_order="left")
           .join(by_op, on=["_m", "_o"], how="left", maintain_order="left")
           .with_columns(pl.coalesce("_i", "_i2").alias("_i"), pl.coalesce("_d", "_d2").alias("_d"), pl.coalesce("_p", "_p2").alias("_p"))
           .drop("_o", "_i2", "_d2", "_p2"))
    gpu = pl.col("cat").cast(pl.String).is_in(["kernel", "gpu_memcpy", "gpu_memset"])
    return out.with_columns(
        pl.when(gpu).then(pl.col("_i")).cast(pl.Categorical).alias("hlo_instruction"),
        pl.when(gpu).then(pl.col("_d")).cast(pl.Categorical).alias("hlo_desc"),
        pl.coalesce(pl.col("op_path").cast(pl.String), pl.when(gpu).then(pl.col("_p"))).cast(pl.Categorical).alias("op_path"),
    ).drop("_m", "_k", "_i", "_d", "_p")


def _plane_stats(buf: np.ndarray, plane: _Plane, smd: pl.DataFrame) -> dict[str, Any]:
    if not len(plane.stats):
        return {}
    f = fields_of(buf, plane.stats.off, plane.stats.off + plane.stats.size, what="XStat")
    out: dict[str, Any] = {}
    names = smd.filter(pl.col("plane") == plane.index)
    by_id = dict(zip(names["id"].to_list(), names["stat"].to_list()))
    for i in range(len(plane.stats)):
        sf = f.select(f.msg == i)
        name = by_id.get(_one(sf, _ST_MD, 0))
        if name is None:
            continue
        for field, wire in ((_ST_STR, 2), (_ST_I64, 0), (_ST_U64, 0), (_ST_DOUBLE, 1), (_ST_REF, 0)):
            x = sf.of(field, wire)
            if len(x):
                if field == _ST_STR:
                    out[name] = buf[int(x.off[-1]) : int(x.off[-1] + x.size[-1])].tobytes().decode("utf-8", "replace")
                elif field == _ST_DOUBLE:
                    out[name] = float(x.value[-1:].view(np.float64)[0])
                elif field == _ST_REF:
                    out[name] = by_id.get(int(x.value[-1]))
                else:
                    out[name] = int(_i64(x.value[-1:])[0])
                break
    return out


def _device_of(plane_name: str) -> int | None:
    if plane_name.startswith("/device:GPU:"):
        tail = plane_name[len("/device:GPU:"):]
        return int(tail) if tail.isdigit() else None
    return None


def decode(data: bytes | bytearray | memoryview | mmap.mmap, path: str) -> RawTrace:
    """Decode an XSpace (the bytes of a ``.xplane.pb``, decompressed) into an unlinked event table."""
    n = len(data)
    buf = padded(data)
    try:
        return _decode(buf, n, path)
    except WireError as e:
        raise TraceError(path, f"not a valid XSpace protobuf: {e} at byte {e.offset:,}") from None


def _decode(buf: np.ndarray, n: int, path: str) -> RawTrace:
    planes, hosts = _planes(buf, n, path)
    gpu_planes = [p for p in planes if _device_of(p.name) is not None and any(line["ev_off"].size for line in p.lines)]
    if not gpu_planes:
        names = ", ".join(p.name for p in planes[:8]) or "none"
        raise TraceError(path, f"this JAX/XLA profile has no GPU plane with events (planes: {names}); it was recorded "
                               "without a GPU (CPU or TPU only), or before any GPU work ran")
    smd = _stat_metadata(buf, planes)
    emd, md_stat_rows = _event_metadata(buf, planes)
    # every event of every line, in one table
    ev_off, ev_size, ev_line = [], [], []
    lines: list[tuple[_Plane, dict[str, Any]]] = []
    for p in planes:
        for line in p.lines:
            ev_off.append(line["ev_off"])
            ev_size.append(line["ev_size"])
            ev_line.append(np.full(line["ev_off"].size, len(lines), dtype=np.int64))
            lines.append((p, line))
    off = np.concatenate(ev_off) if ev_off else np.zeros(0, dtype=np.int64)
    size = np.concatenate(ev_size) if ev_size else np.zeros(0, dtype=np.int64)
    line_of = np.concatenate(ev_line) if ev_line else np.zeros(0, dtype=np.int64)
    ne = off.size
    f = fields_of(buf, off, off + size, what="XEvent")
    md = np.zeros(ne, dtype=np.int64)
    offset_ps = np.zeros(ne, dtype=np.int64)
    dur_ps = np.zeros(ne, dtype=np.int64)
    occurrences = np.zeros(ne, dtype=bool)
    for field, arr in ((_EV_MD, md), (_EV_OFFSET, offset_ps), (_EV_DUR, dur_ps)):
        s = f.of(field, 0)
        arr[s.msg] = _i64(s.value)
    occurrences[f.of(_EV_OCCURRENCES, 0).msg] = True
    st = f.of(_EV_STATS, 2)
    line_plane = np.array([p.index for p, _ in lines], dtype=np.int64)
    line_ts = np.array([line["ts"] for _, line in lines], dtype=np.int64)
    ev_plane = line_plane[line_of] if ne else np.zeros(0, dtype=np.int64)
    stats, unknown = _stats_table(buf, st.msg, st.off, st.size, ev_plane[st.msg], smd)
    if md_stat_rows:  # stats on event metadata apply to every event of that metadata (an event's own win)
        mp, mid, mo, ms = (np.array(c, dtype=np.int64) for c in zip(*md_stat_rows))
        mrow = np.arange(mp.size)
        mstats, unk2 = _stats_table(buf, mrow, mo, ms, mp, smd)
        unknown += unk2
        ev_keys = pl.DataFrame({"plane": ev_plane, "md": md, "row": np.arange(ne)})
        owners = pl.DataFrame({"plane": mp, "md": mid, "mrow": mrow})
        mstats = (mstats.rename({"row": "mrow"}).join(owners, on="mrow").join(ev_keys, on=["plane", "md"])
                  .select(stats.columns))
        stats = pl.concat([mstats, stats])  # the event's own stats come last: they win
    cols = _pivot(stats, ne)
    hlo_rows = _hlo(buf, md_stat_rows, smd)
    # times: ns, rounded from ps
    start_ns = line_ts[line_of] + (offset_ps + 500) // 1000
    end_ns = line_ts[line_of] + (offset_ps + dur_ps + 500) // 1000
    keys = pl.DataFrame({"plane": ev_plane, "md": md, "_r": np.arange(ne)})
    names = keys.join(emd, on=["plane", "md"], how="left").sort("_r")["name"].fill_null("<unnamed>")
    plane_names = [p.name for p in planes]
    device = np.array([(-1 if _device_of(p.name) is None else _device_of(p.name)) for p in planes], dtype=np.int64)
    ev_dev = device[ev_plane] if ne else np.zeros(0, dtype=np.int64)
    is_gpu = ev_dev >= 0
    line_id = np.array([line["id"] for _, line in lines], dtype=np.int64)
    ev_tid = line_id[line_of] if ne else np.zeros(0, dtype=np.int64)
    plane_stats = {p.index: _plane_stats(buf, p, smd) for p in planes}
    vendor = next((str(s.get("device_vendor", "")) for s in plane_stats.values() if s.get("device_vendor")), "")
    amd = vendor.upper().startswith("AMD")
    host_pid = {p.index: str(plane_stats[p.index].get("process_id", p.name)) for p in planes}
    frame = pl.DataFrame({"_name": names, "_gpu": is_gpu, "_dev": ev_dev, "_tid": ev_tid,
                          "_plane": ev_plane, "_dur": end_ns - start_ns, "_occ": occurrences})
    name = pl.col("_name")
    hlo_names = set(cols["hlo_op"].drop_nulls().unique().to_list()) | set(cols["hlo_module"].drop_nulls().unique().to_list())
    lname = name.str.to_lowercase()
    gpu_cat = (pl.when(lname.str.contains("memcpy|memorycopy|copybuffer"))
               .then(pl.lit("gpu_memcpy"))
               .when(lname.str.contains("memset|fillbuffer"))
               .then(pl.lit("gpu_memset"))
               .otherwise(pl.lit("kernel")))
    launch_cat = pl.lit("hip_runtime") if amd else (
        pl.when(name.str.starts_with("cuda")).then(pl.lit("cuda_runtime")).otherwise(pl.lit("cuda_driver")))
    module_rx = r"(?:^XlaModule:|:XLA GPU module$|^jit_[\w.]+$)"
    cat = (pl.when(pl.col("_gpu")).then(gpu_cat)
           .when(pl.col("_corr").is_not_null()).then(launch_cat)
           .when(name.str.starts_with("$")).then(pl.lit("python_function"))
           .when(name.is_in(list(hlo_names)) | name.str.contains(module_rx)).then(pl.lit("cpu_op"))
           .otherwise(pl.lit("user_annotation")))
    ph = pl.when(pl.col("_gpu") | (pl.col("_dur") > 0)).then(pl.lit("X")).otherwise(pl.lit("i"))
    pid_host = pl.Series([host_pid[i] for i in range(len(planes))], dtype=pl.String)
    frame = frame.with_columns(cols["correlation"].alias("_corr"), pid_host.gather(ev_plane).alias("_hpid"))
    typed = frame.select(
        ph.alias("ph"),
        cat.alias("cat"),
        name.alias("name"),
        pl.when(pl.col("_gpu")).then(pl.col("_dev").cast(pl.String)).otherwise(pl.col("_hpid")).alias("pid"),
        pl.col("_tid").cast(pl.String).alias("tid"),
    )
    # aggregated events (num_occurrences instead of an offset) have no time: they are counted, not kept
    keep = ~occurrences
    gpu_ser = pl.Series(is_gpu)
    table = pl.DataFrame({
        "idx": np.arange(ne, dtype=np.int64),
        **{c: typed[c].cast(pl.Categorical) for c in ("ph", "cat", "name", "pid", "tid")},
        "ts": start_ns, "dur": end_ns - start_ns,
        "ts_missing": np.zeros(ne, dtype=bool), "dur_missing": np.zeros(ne, dtype=bool),
        "flow_id": pl.Series([None] * ne, dtype=pl.String),
    })
    extra: dict[str, pl.Series] = {}
    for fld in ARG_FIELDS:
        c = fld.column
        if c in ("meta_name", "sort_index"):
            continue
        if c in cols:
            extra[c] = cols[c]
        elif c == "device":
            extra[c] = pl.Series(c, np.where(is_gpu, ev_dev, 0)).set(~gpu_ser, None)
        elif c == "stream":
            extra[c] = pl.Series(c, np.where(is_gpu, ev_tid, 0)).set(~gpu_ser, None)
        else:
            extra[c] = pl.Series(c, [None] * ne, dtype=EVENT_SCHEMA[c])
    table = table.with_columns(**{c: s.cast(EVENT_SCHEMA[c]) for c, s in extra.items()})
    details = kernel_details(cols["kernel_details"])
    table = table.with_columns(
        **{c: cols[c].cast(JAX_COLUMNS[c]) for c in JAX_COLUMNS if c in cols and c not in EVENT_SCHEMA},
        **{c: details[c] for c in KERNEL_DETAIL_COLUMNS},
    ).filter(pl.Series(keep))
    table = _with_hlo(table, hlo_rows)
    # process and thread names as metadata rows (as Kineto writes them)
    meta_rows: dict[str, list[Any]] = {c: [] for c in _META_COLUMNS}
    seen_pid: set[str] = set()
    for li, (p, line) in enumerate(lines):
        dev = _device_of(p.name)
        pid = str(dev) if dev is not None else host_pid[p.index]
        if pid not in seen_pid:
            seen_pid.add(pid)
            label = p.name
            if dev is not None and plane_stats[p.index].get("gpu_device_name"):
                label = f"{p.name} ({plane_stats[p.index]['gpu_device_name']})"
            for k, v in (("idx", -1), ("name", "process_name"), ("pid", pid), ("tid", "0"), ("meta_name", label), ("sort_index", None)):
                meta_rows[k].append(v)
        for k, v in (("idx", -1), ("name", "thread_name"), ("pid", pid), ("tid", str(line["id"])),
                     ("meta_name", line["name"]), ("sort_index", None)):
            meta_rows[k].append(v)
        del li
    metas = pl.DataFrame(meta_rows, schema={"idx": pl.Int64, "name": pl.Categorical, "pid": pl.Categorical,
                                             "tid": pl.Categorical, "meta_name": pl.String, "sort_index": pl.String})
    flows = pl.DataFrame(schema={c: (EVENT_SCHEMA.get(c, pl.Int64) if c != "idx" else pl.Int64) for c in _FLOW_COLUMNS})
    metadata = _metadata(planes, plane_stats, hosts, unknown, int(occurrences.sum()), plane_names)
    return RawTrace(table, metadata, flows=flows, meta_events=metas)


def _metadata(planes: list[_Plane], plane_stats: dict[int, dict[str, Any]], hosts: list[str], unknown: int,
              aggregated: int, plane_names: list[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"trace_format": "xplane", "framework": "jax"}
    devices = []
    for p in planes:
        s = plane_stats[p.index]
        dev = _device_of(p.name)
        if dev is not None:
            props: dict[str, Any] = {"id": dev}
            for k, v in _DEVICE_STATS.items():
                if k in s:
                    props[v] = s[k]
            devices.append(props)
        elif p.name == "/host:metadata":
            for k, v in s.items():
                if isinstance(v, (str, int, float)):
                    meta[k] = v
        elif p.name == "Task Environment":
            if isinstance(s.get("profile_start_time"), int):
                meta["baseTimeNanoseconds"] = s["profile_start_time"]
            if isinstance(s.get("profile_stop_time"), int):
                meta["profileStopTimeNanoseconds"] = s["profile_stop_time"]
    if devices:
        meta["deviceProperties"] = devices
    if hosts:
        meta["hostnames"] = hosts
    meta["xplane"] = {"planes": plane_names, "unknown_stats": unknown, "aggregated_events": aggregated,
                      "spec_version": XPLANE_SPEC_VERSION}
    return meta
