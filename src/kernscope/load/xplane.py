"""JAX / XLA profiles (``*.xplane.pb``, the XSpace protobuf) -> the event table every trace becomes.

``jax.profiler.trace`` writes ``<host>.xplane.pb``: an ``XSpace`` of ``XPlane`` s (``/device:GPU:N``,
``/host:CPU``, ``/host:metadata``, ``Task Environment``), each with ``XLine`` s (a GPU stream, a host
thread) of ``XEvent`` s (an offset and a duration in **picoseconds** from the line's start in ns, a
metadata id naming the event, and ``XStat`` s typed by the plane's stat metadata). Schema:
``tsl/profiler/protobuf/xplane.proto``. The lines are scanned by :mod:`.xscan` (compiled, or numpy),
stats become columns by :mod:`.xstats`, the HLO programs are read by :mod:`.hlo`; this module assembles
the table (strings interned: names, pids, categories gathered from small dictionaries).

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

import dataclasses
import mmap
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..errors import TraceError
from ..intervals import combine_codes, ranks
from ..model import RawTrace, literal_nulls, row_run
from . import hlo_align
from .argspec import ARG_FIELDS, KERNEL_ARGS, XPLANE_SPEC_VERSION
from .chunk import EVENT_SCHEMA, FLOW_COLUMNS, META_COLUMNS, nulls
from .hlo import Works
from .native import distinct_rows as native_distinct_rows
from .protowire import Fields, WireError, as_array, fields_of, walk
from .xscan import PLANE_LINES, PLANE_RUNS, RELEASE_BYTES, SPACE_PLANES, FieldSpec, LineScan, TimeCuts, decode_stats, last_value, scan_lines
from .xscan import time_cuts as _time_cuts
from .xstats import (
    FIELD_KINDS,
    KERNEL_DETAIL_COLUMNS,
    OPT_IN_STATS,
    STAT_FIELDS,
    Lookup,
    Strings,
    columns,
    field_lut,
    field_table,
    kernel_details,
    place,
    texts,
)

# XSpace / XPlane / XLine / XEvent / XStat / metadata field numbers (xplane.proto)
# (the planes' and lines' field numbers, and the fields read a run at a time, are xscan's: its walk of the lines
# without the metadata finds the same lines)
_SPACE_PLANES, _SPACE_HOSTNAMES = SPACE_PLANES, 4
_PLANE_ID, _PLANE_NAME, _PLANE_LINES = 1, 2, PLANE_LINES
_PLANE_EVENT_MD, _PLANE_STAT_MD, _PLANE_STATS = PLANE_RUNS
# (XLine and XEvent fields are read by the line scanner: xscan.py and _xspace.c)
_ST_MD, _ST_DOUBLE, _ST_U64, _ST_I64, _ST_STR, _ST_BYTES, _ST_REF = 1, 2, 3, 4, 5, 6, 7
_MD_ID, _MD_NAME, _MD_DISPLAY, _MD_STATS = 1, 2, 4, 5

#: JAX columns added to the event table (after Kineto's)
JAX_COLUMNS: dict[str, Any] = {
    **{f.column: (pl.Int64 if f.kind == "int" else pl.Float64 if f.kind == "float" else pl.Categorical)
       for f in STAT_FIELDS if f.column not in EVENT_SCHEMA or f.column in KERNEL_ARGS},  # XLA's own occupancy: a float %
    **{c: pl.Int64 for c in KERNEL_DETAIL_COLUMNS},
}
#: the most combinations of key codes (their values, or else their ranks) numbered by a flat table (above: by sorting)
_FLAT_KEYS = float(1 << 24)
#: the columns the HLO instructions give GPU rows (:func:`_with_hlo`), with their types; of them, the cost model's
HLO_COST_COLUMNS: dict[str, Any] = {"hlo_flops": pl.Float64, "hlo_bytes": pl.Float64, "hlo_dtype": pl.Categorical,
                                    "hlo_op_class": pl.Categorical, "hlo_params": pl.Categorical}
HLO_COLUMNS: dict[str, Any] = {"hlo_instruction": pl.Categorical, "hlo_desc": pl.Categorical, **HLO_COST_COLUMNS,
                               "hlo_source": pl.Categorical, "hlo_function": pl.Categorical, "op_path": pl.Categorical}
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
    lines: Fields  #: the XLine messages (spans)
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
        f = walk(buf, o, o + s, runs=PLANE_RUNS, what="XPlane")
        planes.append(_Plane(i, _one_text(buf, f, _PLANE_NAME), _one(f, _PLANE_ID, 0), f.of(_PLANE_LINES, 2),
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
                                   "stat": texts(buf, names.off, names.size)}))
    if not parts:
        return pl.DataFrame(schema={"plane": pl.Int64, "id": pl.Int64, "stat": pl.String})
    return pl.concat(parts).unique(["plane", "id"], keep="last", maintain_order=True)  # (the same rows each run)


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
        name_s = nulls(n, pl.String).alias("name")
        if names.msg.size:
            name_s = name_s.scatter(names.msg, texts(buf, names.off, names.size))
        if disp.msg.size:  # the display name where no name is given
            disp_s = nulls(n, pl.String).scatter(disp.msg, texts(buf, disp.off, disp.size))
            name_s = pl.select(pl.coalesce(pl.lit(name_s).replace("", None), pl.lit(disp_s))).to_series().alias("name")
        frame = pl.DataFrame({"plane": np.full(n, p.index, dtype=np.int64), "md": id_of, "name": name_s})
        frames.append(frame)
        st = v.of(_MD_STATS, 2)
        stat_rows.extend(zip([p.index] * st.msg.size, id_of[st.msg].tolist(), st.off.tolist(), st.size.tolist()))
    md = (pl.concat(frames) if frames else pl.DataFrame(schema={"plane": pl.Int64, "md": pl.Int64, "name": pl.String}))
    return md.unique(["plane", "md"], keep="last"), stat_rows


#: a plane stat's value: the first of these fields that it has (its last such field), in this order
_PLANE_STAT_VALUES = ((_ST_STR, 2), (_ST_I64, 0), (_ST_U64, 0), (_ST_DOUBLE, 1), (_ST_REF, 0))


def _plane_stats(buf: np.ndarray, plane: _Plane, smd: pl.DataFrame) -> dict[str, Any]:
    """A plane's stats by name. Linear in the stats: a profile's ``/host:__ScopeRangeCallStack__`` plane has ~13
    stats per training step (42,960 in a real 207 MB, 3,300-step profile), where a scan of every field per stat
    took 3.4 s of its 4 s decode."""
    n = len(plane.stats)
    if not n:
        return {}
    f = fields_of(buf, plane.stats.off, plane.stats.off + plane.stats.size, what="XStat")
    names = smd.filter(pl.col("plane") == plane.index)
    by_id = dict(zip(names["id"].to_list(), names["stat"].to_list()))
    md = f.of(_ST_MD, 0)
    md_id = last_value(n, md.msg, md.value)  # uint64; 0 where a stat has none
    named_ids = np.array([i for i, name in by_id.items() if name is not None and i >= 0], dtype=np.uint64)
    named = np.flatnonzero(np.isin(md_id, named_ids))  # the stats whose metadata names them, in stat order
    if not named.size:
        return {}
    kinds = []
    valued = np.zeros(n, dtype=bool)
    for field, wire in _PLANE_STAT_VALUES:  # each kind's rows, and each stat's last row of that kind (-1: none)
        x = f.of(field, wire)
        kinds.append((field, x, last_value(n, x.msg, np.arange(len(x), dtype=np.int64), -1)))
        valued |= kinds[-1][2] >= 0
    named = named[valued[named]]
    if not named.size:
        return {}
    # a name's value is that of its last stat with a value, in the order of its first one (as if each stat were
    # assigned in turn: a Python loop over 200 k stats of a 975 MB profile's call-stack plane took 0.05-0.2 s)
    ids = md_id[named]
    distinct, first_at = np.unique(ids, return_index=True)
    last_at = ids.size - 1 - np.unique(ids[::-1], return_index=True)[1]
    first: dict[str, int] = {}
    final: dict[str, int] = {}
    for stat_id, a, b in zip(distinct.tolist(), first_at.tolist(), last_at.tolist()):
        name = by_id[int(stat_id)]
        first[name] = min(first.get(name, a), a)
        final[name] = max(final.get(name, b), b)
    out: dict[str, Any] = {}
    for name in sorted(first, key=first.__getitem__):
        i = int(named[final[name]])
        for field, x, last in kinds:
            r = int(last[i])
            if r < 0:
                continue
            if field == _ST_STR:
                out[name] = buf[int(x.off[r]) : int(x.off[r] + x.size[r])].tobytes().decode("utf-8", "replace")
            elif field == _ST_DOUBLE:
                out[name] = float(x.value[r : r + 1].view(np.float64)[0])
            elif field == _ST_REF:
                out[name] = by_id.get(int(x.value[r]))
            else:
                out[name] = int(_i64(x.value[r : r + 1])[0])
            break
    return out


def _device_of(plane_name: str) -> int | None:
    if plane_name.startswith("/device:GPU:"):
        tail = plane_name[len("/device:GPU:"):]
        return int(tail) if tail.isdigit() else None
    return None


def _hlo(buf: np.ndarray, md_stat_rows: list[tuple[int, int, int, int]], lookup: Lookup,
         stat_names: pl.Series) -> tuple[pl.DataFrame, Works]:
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
    rows = lookup.rows(mp, ids)
    names = np.array(stat_names.to_list() + [None], dtype=object)[rows]
    payload = f.of(_ST_BYTES, 2)
    payload = payload.select(names[payload.msg] == "Hlo Proto")
    return instructions(buf, list(zip(payload.off.tolist(), payload.size.tolist())))


def _owned(stat_row: np.ndarray, stat: np.ndarray, ev_row: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (event, stat) of the stats ``stat`` of metadata rows ``stat_row`` and the events of each row
    (``ev_row``: each event's row, -1: none), ordered by event, then stat."""
    ok = stat_row >= 0
    stat_row, stat = stat_row[ok], stat[ok]
    order = np.lexsort((stat, stat_row))
    stat_row, stat = stat_row[order], stat[order]
    per_row = np.bincount(stat_row, minlength=n_rows)
    start = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(per_row, out=start[1:])
    # only the events of rows that have stats are expanded (a profile's few such rows own few of its events); the
    # last slot of ``owns`` answers for the events of no row (-1)
    owns = np.append(per_row > 0, False)
    ev = np.flatnonzero(owns[ev_row])
    n_ev = per_row[ev_row[ev]]
    events = np.repeat(ev, n_ev)
    ends = np.cumsum(n_ev)
    within = np.arange(events.size, dtype=np.int64) - np.repeat(ends - n_ev, n_ev)
    return events, stat[start[ev_row[events]] + within]


def distinct_rows(codes: list[np.ndarray], mask: np.ndarray,
                  missing: list[np.ndarray | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct combinations of ``codes`` (integers per row; ``missing``: per code, None or a mask of the
    rows that read -1 there) among the rows of ``mask``: each row's number (-1 outside ``mask``) and one row of each
    combination, numbered in the order of the combinations.

    Where the product of the codes' ranges is small (a real profile's), every row is keyed by the values themselves:
    in two compiled passes that read the codes as they are (:func:`kernscope.load.native.distinct_rows`; at 1 GB the
    numpy form took 0.25-0.6 s, most of it the first touch of its fresh arrays), or :func:`_distinct_rows_by_value`;
    else each code is ranked among the values the mask's rows use (:func:`kernscope.intervals.ranks`) and the ranks
    are keyed the same way, or, where even their product is too large, the rows of ranks are sorted. Ranks keep the
    values' order, so the numbers are the same either way."""
    missing = missing or [None] * len(codes)
    native = native_distinct_rows(codes, missing, mask, _FLAT_KEYS)
    if native is not None:
        return native
    codes = [c if m is None or not m.any() else np.where(m, -1, c) for c, m in zip(codes, missing)]
    by_value = _distinct_rows_by_value(codes, mask)
    if by_value is not None:
        return by_value
    rows = np.flatnonzero(mask)
    number = np.full(mask.size, -1, dtype=np.int32)  # (a number per combination: never near 2**31)
    if rows.size == 0:
        return number, np.zeros(0, dtype=np.int64)
    ranked = [ranks(np.asarray(c)[rows])[0] for c in codes]
    by_rank = _distinct_rows_by_value(ranked, np.ones(rows.size, dtype=bool))
    if by_rank is not None:
        num = by_rank[0]
    else:  # (too many combinations for a flat table: sorted)
        num = np.unique(np.stack(ranked, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    number[rows] = num
    first = np.zeros(int(num.max()) + 1, dtype=np.int64)
    first[num] = rows
    return number, first


def _distinct_rows_by_value(codes: list[np.ndarray], mask: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`distinct_rows` where the product of the codes' ranges over every row is small (a JAX profile's module,
    kernel and op codes: ~1 M combinations): each row's key from the values themselves, in int32, over every row in
    place (no gather of the mask's rows, no ranks); numbered by a flat table of the keys the mask's rows use, in
    the values' order. None where it does not apply. (At 1 GB a ranked form made five 53 MB arrays, 0.79 s of the
    decode, most of it the first touch of their pages.)"""
    n = mask.size
    if n == 0 or n >= 2**31 or not codes:
        return None
    span = []
    space = 1
    for c in codes:
        lo, hi = int(c.min()), int(c.max())
        space *= hi - lo + 1
        if space > _FLAT_KEYS:
            return None
        span.append((lo, hi - lo + 1))
    key = combine_codes(codes, span, n, np.int32)  # (int32: the product is under _FLAT_KEYS)
    key[~mask] = space  # the rows outside the mask: a key of their own, past the table's
    seen = np.zeros(space + 1, dtype=bool)
    seen[key] = True
    seen[space] = False
    slot = np.cumsum(seen, dtype=np.int32)
    slot -= 1
    slot[space] = -1
    number = np.take(slot, key, out=key)
    found = int(seen.sum())
    first = np.zeros(found + 1, dtype=np.int64)
    first[number] = np.arange(n, dtype=np.int32)  # (of repeats the last write: a row of each; -1 writes the spare)
    return number, first[:found]


def _with_hlo(table: pl.DataFrame, hlo: pl.DataFrame, works: Works, number: np.ndarray, first: np.ndarray,
              wanted: Callable[[str], bool] = lambda c: True, *, program: str = "program_id") -> pl.DataFrame:
    """GPU rows get ``hlo_instruction`` and ``hlo_desc`` (what XLA compiled the kernel from: the instruction
    named like the kernel, else the one in its ``hlo_op`` stat) and, where the event has none, the JAX
    ``op_path`` from the instruction's metadata. Joined once per distinct (module, kernel, op): ``number`` says
    which each row has (-1: not a GPU row), ``first`` is a row of each (:func:`distinct_rows`). Of these columns
    and the HLO costs (:data:`HLO_COST_COLUMNS`), those not ``wanted`` are null (the costs are then not computed).
    ``program``: the column of the events' program ids (``program_id``, or one the decode drops after the join)."""
    nothing = {c: pl.lit(None, dtype=HLO_COLUMNS[c]).alias(c) for c in HLO_COLUMNS}
    if hlo.height == 0 or not any(wanted(c) for c in HLO_COLUMNS):
        return table.with_columns(*(e for c, e in nothing.items() if c != "op_path"))
    keys = ["hlo_module", "name", "hlo_op", program]
    d = table.select(keys)[first].rename({program: "program_id"}).with_row_index("_key")
    d = d.with_columns(pl.col("hlo_module").cast(pl.String).alias("_m"),
                       pl.col("name").cast(pl.String).str.replace(r"\.kd$", "").alias("_k"),
                       pl.col("hlo_op").cast(pl.String).alias("_o"))
    d, firsts = _with_programs(d, hlo)
    by_kernel = hlo.select(pl.col("hlo_module").alias("_m"), pl.col("program").alias("_pg"), pl.col("kernel").alias("_k"),
                           pl.col("instruction").alias("_i"), pl.col("desc").alias("_d"), pl.col("op_path").alias("_p"),
                           pl.col("source").alias("_s"), pl.col("function").alias("_f"), pl.col("row").alias("_r"))
    by_op = hlo.select(pl.col("hlo_module").alias("_m"), pl.col("program").alias("_pg"), pl.col("instruction").alias("_o"),
                       pl.col("instruction").alias("_i2"), pl.col("desc").alias("_d2"), pl.col("op_path").alias("_p2"),
                       pl.col("source").alias("_s2"), pl.col("function").alias("_f2"), pl.col("row").alias("_r2"))
    # an instruction XLA runs as several kernels names them name, name__1, name__2, ... (a sort's passes): the name
    # without its number where the whole name is no instruction's
    by_stem = by_kernel.rename({c: f"{c}3" for c in ("_k", "_i", "_d", "_p", "_s", "_f", "_r")})
    d = (d.join(by_kernel, on=["_m", "_pg", "_k"], how="left", maintain_order="left")
         .with_columns(pl.when(pl.col("_i").is_null()).then(pl.col("_k").str.replace(r"__\d+$", "")).alias("_k3"))
         .join(by_stem, on=["_m", "_pg", "_k3"], how="left", maintain_order="left")
         .join(by_op, on=["_m", "_pg", "_o"], how="left", maintain_order="left")
         .select("_key", pl.coalesce("_i", "_i3", "_i2").cast(pl.Categorical).alias("hlo_instruction"),
                 pl.coalesce("_d", "_d3", "_d2").cast(pl.Categorical).alias("hlo_desc"),
                 pl.coalesce("_p", "_p3", "_p2").cast(pl.Categorical).alias("_p"),
                 # (the source line, its function and the row of the instruction the kernel ran: all three the same
                 # instruction's, where a coalesce could take an empty line's from another)
                 _of_instruction("_s").cast(pl.Categorical).alias("hlo_source"),
                 _of_instruction("_f").cast(pl.Categorical).alias("hlo_function"), _of_instruction("_r").alias("_row"))
         .unique("_key", keep="first", maintain_order=True))  # one entry per key (a kernel name twice in a module)
    if any(wanted(c) for c in HLO_COST_COLUMNS):
        # what the instructions the kernels ran compute and move (the perf model of JAX kernels): only theirs (0.16 s
        # of a 200 MB profile's load: skipped where the costs are not read)
        d = d.join(_costs(works, sorted(set(d["_row"].drop_nulls().to_list()))).rename({"row": "_row"}),
                   on="_row", how="left", maintain_order="left")
    d = d.sort("_key").rename({"_p": "op_path"})
    at = pl.Series(number).set(pl.Series(number < 0), None)
    read = [c for c in HLO_COLUMNS if wanted(c) and c in d.columns]
    # one gather of every column read (in parallel; a null index gives nulls, all-null ones too: a time window may
    # hold host events only)
    found = d.select(pl.col(read).gather(at))
    table = table.with_columns(*(found[c] if c in read else nothing[c] for c in HLO_COLUMNS if c != "op_path"),
                               *([pl.coalesce(pl.col("op_path"), pl.lit(found["op_path"])).alias("op_path")] if "op_path" in read else []))
    # (the schedule's matches read the first program of each name, as every kernel did before programs were told apart)
    first_programs = hlo.join(firsts.rename({"_m": "hlo_module", "_pg": "program"}), on=["hlo_module", "program"],
                              how="semi", maintain_order="left")
    return _with_library_calls(table, first_programs, works, read)


def _of_instruction(column: str) -> pl.Expr:
    """In :func:`_with_hlo`'s join: ``column`` of the instruction a kernel ran, found by its name (``column``), by its
    name without a pass number (``column``3) or by its ``hlo_op`` (``column``2), the first that found one."""
    return (pl.when(pl.col("_i").is_not_null()).then(pl.col(column)).when(pl.col("_i3").is_not_null())
            .then(pl.col(f"{column}3")).otherwise(pl.col(f"{column}2")))


def _costs(works: Works, rows: list[int]) -> pl.DataFrame:
    """``row`` and the :data:`HLO_COST_COLUMNS` of the instructions ``rows`` (:meth:`~kernscope.load.hlo.Works.of`)."""
    return works.of(rows).select("row", pl.col("flops").alias("hlo_flops"), pl.col("bytes").alias("hlo_bytes"),
                                 *(pl.col(c).cast(pl.Categorical).alias(f"hlo_{c}") for c in ("dtype", "op_class", "params")))


def profile_hlo(data: bytes | bytearray | memoryview | mmap.mmap, path: str) -> tuple[pl.DataFrame, Works]:
    """The HLO instructions of the profile's modules and their work model (:func:`_hlo`), read from its metadata alone
    (the events' bytes are not read: 0.02 s of a 207 MB profile)."""
    buf = as_array(data)
    try:
        planes, _ = _planes(buf, len(data), path)
        smd = _stat_metadata(buf, planes)
        _, md_stat_rows = _event_metadata(buf, planes)
        return _hlo(buf, md_stat_rows, Lookup(smd["plane"].to_numpy(), smd["id"].to_numpy()), smd["stat"])
    except WireError as e:
        raise TraceError(path, f"not a valid XSpace protobuf: {e}; the file is truncated or damaged") from None


def _with_programs(d: pl.DataFrame, hlo: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``d`` (a module name ``_m`` and a ``program_id`` a row) with the program each row ran, ``_pg``: its program id
    where a module of its name has it (two programs may share a name: a function compiled for two shapes), else the
    first module of its name (``_first``); and that first program of each name (``_m``, ``_pg``)."""
    programs = hlo.select(pl.col("hlo_module").alias("_m"), pl.col("program").alias("_pg")).unique(maintain_order=True)
    firsts = programs.unique("_m", keep="first", maintain_order=True)
    d = (d.join(firsts.rename({"_pg": "_first"}), on="_m", how="left", maintain_order="left")
         .join(programs.with_columns(pl.lit(True).alias("_known")), left_on=["_m", "program_id"], right_on=["_m", "_pg"],
               how="left", maintain_order="left")
         .with_columns(pl.when(pl.col("_known")).then(pl.col("program_id")).otherwise(pl.col("_first")).alias("_pg")))
    return d, firsts


def cost_rows(gpu: pl.DataFrame, hlo: pl.DataFrame) -> pl.Series | None:
    """Of each GPU row, by its ``hlo_module``, ``program_id`` and ``hlo_instruction``, the row of ``hlo``
    (:meth:`~kernscope.load.hlo.Works.of`) whose costs a load reading them gives it (null: none), found as
    :func:`_with_hlo` finds it: the instruction of that name in the row's program (:func:`_with_programs`; an
    instruction's name is its module's alone). None where a row with an instruction ran in a program that is not the
    first of its module's name: a command buffer's library kernel there takes the first program's custom call
    (:func:`_with_library_calls`), which only a parse of the events tells apart from an instruction of its own
    program."""
    # (module and instruction as one integer key of the two interned columns: a join of 1.4 M rows on three columns
    # took 0.08 s; the distinct keys and programs read in one pass)
    key = pl.col("hlo_module").to_physical().cast(pl.UInt64) * (1 << 32) + pl.col("hlo_instruction").to_physical().cast(pl.UInt64)
    ran = (gpu.lazy().filter(pl.col("hlo_instruction").is_not_null())
           .select(key.alias("_key"), "hlo_module", "program_id", "hlo_instruction").unique(["_key", "program_id"]).collect()
           .with_columns(pl.col("hlo_module").cast(pl.String).alias("_m"), pl.col("hlo_instruction").cast(pl.String).alias("_i")))
    ran, _ = _with_programs(ran, hlo)
    if not ran["_pg"].eq_missing(ran["_first"]).all():
        return None
    by_name = (hlo.select(pl.col("hlo_module").alias("_m"), pl.col("program").alias("_pg"), pl.col("instruction").alias("_i"),
                          "row").unique(["_m", "_pg", "_i"], keep="first"))  # (a row per kernel of an instruction)
    found = ran.unique("_key").join(by_name, on=["_m", "_pg", "_i"], how="left")
    return gpu.select(key.alias("_key"))["_key"].replace_strict(found["_key"], found["row"], default=None,
                                                                return_dtype=pl.Int64).alias("row")


def with_costs(events: pl.DataFrame, gpu: pl.DataFrame, data: bytes | bytearray | memoryview | mmap.mmap,
               path: str) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The event and GPU tables of a load that left the HLO costs (:data:`HLO_COST_COLUMNS`) null, with them read from
    the profile's HLO (``data``: the profile's bytes): equal to a load reading them (``perf`` after ``analyze`` reads
    ``analyze``'s cache entry and this, not the events again). The tables must hold ``hlo_module``, ``program_id`` and
    ``hlo_instruction`` as such a load reads them (command buffers' library kernels matched), and the GPU rows be a run
    of the events' (a JAX profile's are). None where that does not hold, or :func:`cost_rows` cannot tell (a parse
    then decides)."""
    n = gpu.height
    if any(c not in gpu.columns or c not in events.columns
           for c in ("hlo_module", "program_id", "hlo_instruction", *HLO_COST_COLUMNS)):
        return None
    start = row_run(events, gpu) if n else 0
    if start is None:
        return None
    hlo, works = profile_hlo(data, path)
    rows = cost_rows(gpu, hlo) if hlo.height else pl.Series("row", [None] * n, dtype=pl.Int64)
    if rows is None:
        return None
    wanted = rows.drop_nulls().unique().sort().to_list()
    costs = (_costs(works, wanted) if wanted else pl.DataFrame(schema={"row": pl.Int64, **HLO_COST_COLUMNS}))
    got = rows.to_frame("row").join(costs, on="row", how="left", maintain_order="left")
    filled = {c: got[c].cast(HLO_COST_COLUMNS[c]).alias(c) for c in HLO_COST_COLUMNS}
    after = events.height - start - n

    def whole(c: str) -> pl.Series:  # the event table's column: null but over the GPU rows
        t = HLO_COST_COLUMNS[c]
        parts = [nulls(start, t).alias(c), filled[c], nulls(after, t).alias(c)]
        return pl.concat([x for x in parts if x.len()]) if n else nulls(events.height, t).alias(c)

    return events.with_columns(whole(c) for c in HLO_COST_COLUMNS), gpu.with_columns(filled.values())


#: a load that reads ``hlo_instruction`` and one of these matches command buffers' library kernels to the custom calls
#: they ran (:func:`_with_library_calls`); one that does not leaves those kernels' HLO columns unset
LIBRARY_MATCH_COLUMNS = (*HLO_COST_COLUMNS, "hlo_source", "hlo_function")


def matches_library_calls(read: Iterable[str]) -> bool:
    """Whether a load reading the columns ``read`` matches command buffers' library kernels to the custom calls they
    ran (:func:`_with_library_calls`): it reads ``hlo_instruction`` and one of :data:`LIBRARY_MATCH_COLUMNS`."""
    read = set(read)
    return "hlo_instruction" in read and bool(read & set(LIBRARY_MATCH_COLUMNS))


def _with_library_calls(table: pl.DataFrame, hlo: pl.DataFrame, works: Works, read: list[str]) -> pl.DataFrame:
    """The library kernels of command buffers (cuBLAS's, cuDNN's) get the HLO columns of the custom call the module's
    schedule says they ran (:mod:`.hlo_align`), where no name or ``hlo_op`` named it: every HLO column ``read``, where
    it reads the costs (the perf model's: ``perf``, ``analyze --roofline``, ``sql``) or the source lines (``analyze``'s
    GPU time by source line), so that such a load's HLO columns are a whole load's (the categories decide those kernels
    by their names: ``analyze``'s output is the same either way, on every JAX profile here)."""
    if not matches_library_calls(read):
        return table
    rows, calls = hlo_align.match(table, hlo)
    if rows.size == 0:
        return table
    distinct, which = np.unique(calls, return_inverse=True)
    small = (pl.DataFrame({"row": distinct}).join(hlo.unique("row"), on="row", how="left", maintain_order="left")
             .select(pl.col("instruction").cast(pl.Categorical).alias("hlo_instruction"),
                     pl.col("desc").cast(pl.Categorical).alias("hlo_desc"), pl.col("op_path").cast(pl.Categorical),
                     pl.col("source").cast(pl.Categorical).alias("hlo_source"),
                     pl.col("function").cast(pl.Categorical).alias("hlo_function"), "row"))
    if any(c in read for c in HLO_COST_COLUMNS):
        small = small.join(_costs(works, distinct.tolist()), on="row", how="left", maintain_order="left")
    written = [c for c in read if c in small.columns]
    got = small.select(written)[pl.Series(which)]
    # (written into the rows matched: a when/then made every column anew, 90 MB more at the 207 MB profile's peak)
    schema = table.schema
    return table.with_columns(table[c].scatter(rows, got[c].cast(schema[c])) for c in got.columns)


#: the XSpace profile's own columns (XLA's stats, the launch details parsed from them, the HLO costs): a projection's
#: ``stats`` says which of them a load reads
XLA_COLUMNS = frozenset(JAX_COLUMNS) | frozenset(HLO_COLUMNS)


def _line_spans(planes: list[_Plane]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every plane's lines in file order: (plane, offset, length), int64 each."""
    empty = np.zeros(0, np.int64)
    if not planes:
        return empty, empty, empty
    return (np.concatenate([np.full(len(p.lines), p.index, dtype=np.int64) for p in planes]),
            np.concatenate([p.lines.off for p in planes]).astype(np.int64),
            np.concatenate([p.lines.size for p in planes]).astype(np.int64))


@dataclass(frozen=True)
class _Base:
    """What a decode reads of a profile before its events: the planes and their lines, the stat and event metadata."""

    planes: list[_Plane]
    hosts: list[str]
    line_plane: np.ndarray
    line_off: np.ndarray
    line_len: np.ndarray
    smd: pl.DataFrame
    stat_lookup: Lookup
    emd: pl.DataFrame
    md_stat_rows: list[tuple[int, int, int, int]]
    md_lookup: Lookup

    @property
    def stat_names(self) -> pl.Series:
        return self.smd["stat"]


def _base(buf: np.ndarray, n: int, path: str) -> _Base:
    planes, hosts = _planes(buf, n, path)
    line_plane, line_off, line_len = _line_spans(planes)
    smd = _stat_metadata(buf, planes)
    emd, md_stat_rows = _event_metadata(buf, planes)
    return _Base(planes, hosts, line_plane, line_off, line_len, smd, Lookup(smd["plane"].to_numpy(), smd["id"].to_numpy()),
                 emd, md_stat_rows, Lookup(emd["plane"].to_numpy(), emd["md"].to_numpy()))


@dataclass(frozen=True)
class Shared:
    """What every time window of one profile reads alike, read once (:func:`prepare`): the planes, their lines and
    metadata, the modules' HLO programs with their work model, and the planes' own stats. A window's decode given it
    reads only its events' bytes."""

    base: _Base
    hlo: tuple[pl.DataFrame, Works]
    shared_names: list[str]  #: module names two programs share (:func:`_shared_names`)
    plane_stats: dict[int, dict[str, Any]]
    #: the HLO op and module names the whole profile's events name (:func:`plan` finds them; None: each window's own)
    hlo_names: frozenset[str] | None = None


def damaged(path: str, e: WireError) -> TraceError:
    """The error said of an XSpace whose bytes ``e`` found invalid (with the byte where its message has none)."""
    where = "" if "at byte" in str(e) else f" (at byte {e.offset:,})"
    return TraceError(path, f"not a valid XSpace protobuf: {e}{where}; the file is truncated or damaged")


def lines_and_metadata(data: bytes | bytearray | memoryview | mmap.mmap, path: str) -> _Base:
    """An XSpace's planes, where their lines lie, and their stat and event metadata: the first part of :func:`prepare`
    (the plans walk the lines from it while the rest is read)."""
    try:
        return _base(as_array(data), len(data), path)
    except WireError as e:
        raise damaged(path, e) from None


def prepare(data: bytes | bytearray | memoryview | mmap.mmap, path: str, base: _Base | None = None) -> Shared:
    """The parts of an XSpace every window's :func:`decode` reads alike (``decode(..., shared=prepare(data, path))``);
    ``base``: its :func:`lines_and_metadata`, where read already."""
    buf = as_array(data)
    try:
        base = base if base is not None else _base(buf, len(data), path)
        hlo = _hlo(buf, base.md_stat_rows, base.stat_lookup, base.stat_names)
        return Shared(base, hlo, _shared_names(hlo[0]), {p.index: _plane_stats(buf, p, base.smd) for p in base.planes})
    except WireError as e:
        raise damaged(path, e) from None


@dataclass(frozen=True)
class Window:
    """Window ``index`` of a profile's lines cut at ``cuts.times`` (:func:`time_cuts`): of each line the events that
    start in ``[times[line, index - 1], times[line, index])`` (ns; the first window from the profile's beginning, the
    last to its end)."""

    cuts: TimeCuts
    index: int


def lines_of(data: bytes | bytearray | memoryview | mmap.mmap, path: str) -> tuple[np.ndarray, np.ndarray]:
    """Each line of an XSpace, in the order :func:`time_cuts` takes their cut times: (its plane's index, its id),
    int64; a decoded event's ``tid`` is its line's id, and a GPU plane's ``device`` its ordinal."""
    buf = as_array(data)
    try:
        planes, _ = _planes(buf, len(data), path)
        plane, off, size = _line_spans(planes)
        heads = _time_cuts(buf, off, size, np.zeros((off.size, 0), np.int64))
    except WireError as e:
        raise TraceError(path, f"not a valid XSpace protobuf: {e}; the file is truncated or damaged") from None
    if heads is None:
        raise RuntimeError("the compiled XSpace scanner is not available, or a line's events are not in time order")
    return plane, np.ascontiguousarray(heads.hdr[:, 0])


def time_cuts(data: bytes | bytearray | memoryview | mmap.mmap, path: str, times: Iterable[int] | np.ndarray) -> TimeCuts | None:
    """An XSpace's lines cut at ``times`` (ns, as the decoded ``ts``: one list for every line, or a ``(lines, cuts)``
    array of each line's, the lines in :func:`lines_of`'s order), so that :func:`decode` can read each of the ``cuts +
    1`` windows alone (``window=Window(cuts, k)``: of each line the events that start in it, one run of them, no other
    event's bytes read). None where a window cannot be read alone: without the compiled scanner, or where a line's
    events are not in time order (XLA writes them in order)."""
    buf = as_array(data)
    try:
        planes, _ = _planes(buf, len(data), path)
        _, line_off, line_len = _line_spans(planes)
        t = times if isinstance(times, np.ndarray) else np.fromiter((int(x) for x in times), dtype=np.int64)
        return _time_cuts(buf, line_off, line_len, t)
    except WireError as e:
        raise damaged(path, e) from None


def decode(data: bytes | bytearray | memoryview | mmap.mmap, path: str, *, workers: int | None = None,
           stats: tuple[str, ...] | None = None, scanned: Callable[[], None] | None = None,
           progress: Callable[[int, int], None] | None = None, window: Window | None = None,
           shared: Shared | None = None, named: Callable[[frozenset[str]], None] | None = None,
           release_pages: bool = False) -> RawTrace:
    """Decode an XSpace (the bytes of a ``.xplane.pb``, decompressed) into an unlinked event table (``workers``: the
    scanner's threads at most; None: one per usable core). ``stats``: of :data:`XLA_COLUMNS`, those read; the
    others are null (one literal each: no memory; None: all read but :data:`~.xstats.OPT_IN_STATS`).
    ``scanned``: called once the events' bytes are read (the caller may drop a mapped file's pages from the
    process then: the rest of the decode reads only the metadata, whose pages come back as they are read).
    ``progress``: called with (bytes of event lines scanned, bytes of all) as the events are read, from the
    scanning threads (:func:`~kernscope.load.xscan.scan_lines`). ``window``: decode only the events that start in
    it (:func:`time_cuts`): every plane, line and metadata entry as for the whole profile, each line's events of the
    window; ``idx`` numbers the events as in the whole profile's table. The windows' tables, put together, are the
    whole profile's table (``tests/test_jax_windows.py``); a window's ``metadata`` counts its own aggregated events.
    ``shared``: the profile's parts every window reads alike (:func:`prepare`), read once for all windows.
    ``named``: called with the HLO op and module names the decoded events name (their own, whatever ``shared`` holds;
    a window's, where a plan left each window its own: :class:`~kernscope.load.xplan.Ledger`).
    ``release_pages``: ``data`` is a read-only mapping of the file (``mmap.ACCESS_READ``), whose pages the scan of the
    events gives back as it walks them (every :data:`~.xscan.RELEASE_BYTES` of a line: the events' pages were all
    in the process at the end of the scan, a time window's ~30 MB of a 207 MB profile's windowed peak)."""
    n = len(data)
    buf = as_array(data)
    try:
        release = RELEASE_BYTES if release_pages and isinstance(data, mmap.mmap) else 0
        raw = _decode(buf, n, path, workers, stats, scanned, progress, window, shared, named, release)
    except WireError as e:
        raise damaged(path, e) from None
    if stats is not None:
        ev = raw.events
        unread = [c for c in ev.columns if c in XLA_COLUMNS and c not in stats]
        schema = ev.schema
        raw = dataclasses.replace(raw, events=ev.with_columns(pl.lit(None, dtype=schema[c]).alias(c) for c in unread))
    return raw


def _decode(buf: np.ndarray, n: int, path: str, workers: int | None = None,
            stats: tuple[str, ...] | None = None, scanned: Callable[[], None] | None = None,
            progress: Callable[[int, int], None] | None = None, window: Window | None = None,
            shared: Shared | None = None, named: Callable[[frozenset[str]], None] | None = None,
            release: int = 0) -> RawTrace:
    def wanted(column: str) -> bool:  # (an XLA column that ``stats`` leaves out is null: not worth building)
        if stats is None:
            return column not in OPT_IN_STATS
        return column not in XLA_COLUMNS or column in stats

    base = shared.base if shared is not None else _base(buf, n, path)
    planes, hosts, line_plane, line_off, line_len = base.planes, base.hosts, base.line_plane, base.line_off, base.line_len
    smd, stat_lookup, stat_names = base.smd, base.stat_lookup, base.stat_names
    emd, md_stat_rows, md_lookup = base.emd, base.md_stat_rows, base.md_lookup
    empty = np.zeros(0, np.int64)
    header = None
    if window is not None:  # each line's run of the window's events, timed by the line's header
        if window.cuts.hdr.shape[0] != line_off.size:
            raise ValueError(f"{path}: the time cuts were made for another profile ({window.cuts.hdr.shape[0]:,} lines, "
                             f"this one has {line_off.size:,})")
        line_off, line_len = window.cuts.window(window.index, line_off)
        header = window.cuts.hdr
    # the stats' columns: those read, and those the decode itself needs (the HLO op and module name the kernels'
    # instructions, the kernel details give the registers); the scanner gives the others no cells
    # (and the program id, which tells apart the programs of one module name, where the HLO columns are read)
    hlo_read = any(wanted(c) for c in HLO_COLUMNS)
    needed = {"hlo_op", "hlo_module", *(["kernel_details"] if any(wanted(c) for c in KERNEL_DETAIL_COLUMNS) else []),
              *(["program_id"] if hlo_read else [])}
    skip = {f.column for f in STAT_FIELDS if not wanted(f.column) and f.column not in needed}
    unread = frozenset(i for i, f in enumerate(STAT_FIELDS) if f.column in skip)
    fields = field_table(stat_names, unread)

    def field_of(plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
        out: np.ndarray = fields[stat_lookup.rows(plane, ids)]
        return out

    flat = field_lut(smd["plane"].to_numpy(), smd["id"].to_numpy(), stat_names, unread)
    spec = FieldSpec(field_of, flat[0] if flat else None, flat[1] if flat else 0, FIELD_KINDS, unread)
    # the modules' HLO (their HloProto metadata stats) parsed on a thread while the events are scanned: it reads the
    # metadata only, and the decode's side thread waited for it after the scan (0.05 s of a 207 MB profile)
    def hlo_early() -> tuple[tuple[pl.DataFrame, Works], list[str]]:
        hlo = _hlo(buf, md_stat_rows, stat_lookup, stat_names)
        return hlo, _shared_names(hlo[0])

    hlo_parsed: Future[tuple[tuple[pl.DataFrame, Works], list[str]]]
    if shared is not None:
        hlo_parsed = Future()
        hlo_parsed.set_result((shared.hlo, shared.shared_names))
    else:
        early = ThreadPoolExecutor(1, thread_name_prefix="kernscope-hlo")
        try:
            hlo_parsed = early.submit(hlo_early)
        finally:
            early.shutdown(wait=False)  # (its thread ends with the parse)
    scan = scan_lines(buf, line_off, line_len, line_plane, spec, stat_lookup, md_lookup, workers=workers, progress=progress,
                      header=header, release=release)
    ne = scan.ev_md.size
    # (no array of every event's plane: an event's is its line's, and what needs it gathers by line; at 975 MB that
    # array was 70 MB and 0.1 s of one core)
    line_events = np.bincount(scan.ev_line, minlength=len(line_plane)) if ne else np.zeros(len(line_plane), np.int64)
    per_plane = np.bincount(line_plane, weights=line_events, minlength=len(planes)).astype(np.int64) if line_plane.size \
        else np.zeros(len(planes), np.int64)
    device = plane_devices(planes)
    if window is None and not any(device[p.index] >= 0 and per_plane[p.index] for p in planes):
        names = ", ".join(p.name for p in planes[:8]) or "none"
        raise TraceError(path, f"this JAX/XLA profile has no GPU plane with events (planes: {names}); it was recorded "
                               "without a GPU (CPU or TPU only), or before any GPU work ran")
    cols, strings, unknown = _stat_cells(buf, base, scan, fields, skip, {c for c in needed if not wanted(c)})
    # (the lines' names lie beside their events, all over the file: read before its pages go)
    line_names = [buf[o : o + k].tobytes().decode("utf-8", "replace") if o >= 0 else ""
                  for o, k in zip(scan.ln_name_off.tolist(), scan.ln_name_len.tolist())]
    if scanned is not None:  # (a 1 GB profile's pages were ~1 GB of the decode's peak, held to its end for nothing)
        scanned()
    start_ns, dur_ns = scan.ev_ts, scan.ev_dur  # ns, rounded from ps
    # names: the event metadata of (plane, md), as codes into its name list
    md_names = emd["name"].fill_null("<unnamed>").to_list() + ["<unnamed>"]
    # (in place where the scan's rows may be written: they are not read again; np.where's copy took 0.08 s at 975 MB)
    name_row = scan.ev_name if scan.ev_name.flags.writeable else scan.ev_name.copy()
    name_row[name_row < 0] = len(md_names) - 1
    # each line's device (-1: a host line) and stream: gathered per event once, as the device and stream columns
    line_dev = device[line_plane] if line_plane.size else empty
    is_gpu = (line_dev >= 0)[scan.ev_line] if ne else np.zeros(0, dtype=bool)
    # aggregated events (num_occurrences instead of an offset) have no time: they are counted, not kept
    occurrences = scan.ev_flags.view(np.bool_)  # (flags are 0 or 1: bit 0 is the only flag)
    with ThreadPoolExecutor(1, thread_name_prefix="kernscope-decode") as side:
        # the kernel details and the GPU rows' HLO columns on a second thread, beside the event table's other columns
        # (numpy and polars release the GIL in their work; each reads what the scan made and writes nothing shared)
        details_f = side.submit(kernel_details, strings["kernel_details"],
                                [c for c in KERNEL_DETAIL_COLUMNS if wanted(c)]) if "kernel_details" in strings else None
        def hlo_side() -> tuple[tuple[np.ndarray, np.ndarray], tuple[pl.DataFrame, Works]]:
            hlo, two_programs = hlo_parsed.result()
            programs = cols.get("program_id") if two_programs else None
            return _hlo_numbers(strings, name_row, is_gpu, occurrences, programs, two_programs), hlo

        hlo_f = side.submit(hlo_side)
        plane_stats = shared.plane_stats if shared is not None else {p.index: _plane_stats(buf, p, smd) for p in planes}
        vendor = next((str(s.get("device_vendor", "")) for s in plane_stats.values() if s.get("device_vendor")), "")
        amd = vendor.upper().startswith("AMD")
        host_pid = [str(plane_stats[p.index].get("process_id", p.name)) for p in planes]
        # the category of each event: from its name (decided once per distinct name) and where it is
        # (the HLO names of the whole profile where this is a window of it: those of the window's rows alone would make
        # a host event an annotation where only another window's GPU rows name it)
        own_names = _hlo_names(strings) if named is not None or shared is None or shared.hlo_names is None else None
        if named is not None and own_names is not None:
            named(own_names)
        hlo_names = shared.hlo_names if shared is not None and shared.hlo_names is not None else own_names
        assert hlo_names is not None
        nm = pl.Series(md_names, dtype=pl.String)
        low = nm.str.to_lowercase()
        gpu_cat = np.where(low.str.contains("memcpy|memorycopy|copybuffer").to_numpy(), 1,
                           np.where(low.str.contains("memset|fillbuffer").to_numpy(), 2, 0))
        launch_cat = np.full(len(md_names), 5) if amd else np.where(nm.str.starts_with("cuda").to_numpy(), 4, 3)
        py = nm.str.starts_with("$").to_numpy()
        op = (nm.is_in(sorted(hlo_names)) | nm.str.contains(r"(?:^XlaModule:|:XLA GPU module$|^jit_[\w.]+$)")).to_numpy()
        host_cat = np.where(py, 6, np.where(op, 7, 8))
        # each event's category: row 0 of the table for a GPU event, 1 for a launch (it has a correlation), 2 for the
        # rest, by its name (one small-integer gather: int64 temporaries of every event were most of the time at 1 GB)
        by_name = np.stack([gpu_cat, launch_cat, host_cat]).astype(np.int8)
        where = np.where(cols["correlation"].is_not_null().to_numpy(), np.int8(1), np.int8(2))
        where[is_gpu] = 0
        cat_code = by_name[where, name_row]
        cats = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_driver", "cuda_runtime", "hip_runtime", "python_function", "cpu_op",
                "user_annotation"]
        ph_code = (~(is_gpu | (dur_ns > 0))).view(np.int8)
        pid_values = [str(int(device[p.index])) if device[p.index] >= 0 else host_pid[p.index] for p in planes]
        line_ids = scan.ln_id
        tid_values = [str(int(x)) for x in line_ids.tolist()]
        per_line = {c: pl.Series(c, line_dev if c == "device" else line_ids).set(pl.Series(line_dev < 0), None)
                    for c in ("device", "stream")}
        # the interned columns, and each line's device and stream, gathered from their small tables in one select: polars
        # runs the gathers side by side (one after the other, 0.09-0.21 s at 975 MB; together 0.06-0.1 s)
        # (the pid by the event's line, as the device and stream: each line's plane's)
        interned = {"ph": ["X", "i"], "cat": cats, "name": md_names, "pid": [pid_values[p] for p in line_plane.tolist()],
                    "tid": tid_values}
        index = {"ph": "ph", "cat": "cat", "name": "name", "pid": "tid", "tid": "tid"}
        gathered = pl.DataFrame({"ph": ph_code, "cat": cat_code, "name": name_row, "tid": scan.ev_line}).select(
            *(pl.lit(pl.Series(v, dtype=pl.String).cast(pl.Categorical)).gather(pl.col(index[c])).alias(c)
              for c, v in interned.items()),
            *(pl.lit(s).gather(pl.col("tid")).alias(c) for c, s in per_line.items()),
        )
        table = pl.DataFrame({
            "idx": (pl.int_range(ne, dtype=pl.Int64, eager=True)  # (polars' buffer: numpy's arange was 0.05-0.13 s at 975 MB)
                    if window is None else _window_idx(window, line_events, scan.ev_line)),
            **{c: gathered[c] for c in interned},
            "ts": start_ns, "dur": dur_ns,
            "ts_missing": np.zeros(ne, dtype=bool), "dur_missing": np.zeros(ne, dtype=bool),
            "flow_id": nulls(ne, pl.String),
        })
        extra: dict[str, pl.Series] = {}
        own = set(KERNEL_DETAIL_COLUMNS) | set(JAX_COLUMNS)  # what XLA states itself (occupancy as a float %)
        for fld in ARG_FIELDS:
            c = fld.column
            if c in ("meta_name", "sort_index") or c in own:
                continue
            if c in cols:
                extra[c] = cols[c]
            elif c in per_line:
                extra[c] = gathered[c]
            else:
                extra[c] = nulls(ne, EVENT_SCHEMA[c]).alias(c)
        details = details_f.result() if details_f is not None else {}
        table = table.with_columns(
            **{c: s.cast(EVENT_SCHEMA[c]) for c, s in extra.items()},
            **{c: cols[c].cast(JAX_COLUMNS[c]) if c in cols and wanted(c) else pl.lit(None, dtype=JAX_COLUMNS[c])
               for c in JAX_COLUMNS if c not in KERNEL_DETAIL_COLUMNS and (c not in EVENT_SCHEMA or c in own)},
            **{c: details[c] if c in details else pl.lit(None, dtype=pl.Int64) for c in KERNEL_DETAIL_COLUMNS},
        )
        # the program ids the HLO join reads where the table is not to keep them (a column dropped after the join)
        program = "program_id" if wanted("program_id") or "program_id" not in cols else "_program"
        if program == "_program" and hlo_read:
            table = table.with_columns(cols["program_id"].cast(pl.Int64).alias(program))
        if occurrences.any():
            table = table.filter(pl.Series(~occurrences))
        (number, first), hlo = hlo_f.result()
    table = _with_hlo(table, *hlo, number, first, wanted, program=program)
    if program in table.columns and program != "program_id":
        table = table.drop(program)
    # columns without a value (Kineto's collective args, memory stats of a profile without them ...): one
    # null literal each, which takes no memory. The link does so for every format; here it is done as the table is
    # made, so that its null buffers are gone before the link starts (left to the link, the 975 MB profile's peak was
    # up to 80 MB higher in seven interleaved pairs)
    table = literal_nulls(table)
    metas = _meta_rows(planes, line_plane, tid_values, line_names, pid_values, plane_stats)
    flows = pl.DataFrame(schema={c: (EVENT_SCHEMA.get(c, pl.Int64) if c != "idx" else pl.Int64) for c in FLOW_COLUMNS})
    metadata = _metadata(planes, plane_stats, hosts, unknown, int(occurrences.sum()), [p.name for p in planes])
    return RawTrace(table, metadata, flows=flows, meta_events=metas)


def _stat_cells(buf: np.ndarray, base: _Base, scan: LineScan, fields: np.ndarray, skip: set[str],
                codes_only: set[str]) -> tuple[dict[str, pl.Series], dict[str, Strings], int]:
    """The scan's stats as columns (:func:`~kernscope.load.xstats.columns`): the events' own, and where an event has
    none of a field, its metadata's; and the stats not known (counted)."""
    unknown = scan.unknown
    if base.md_stat_rows:
        mp, mid, mo, ms = (np.array(c, dtype=np.int64) for c in zip(*base.md_stat_rows))
        s_md, s_kind, s_val = decode_stats(buf, mo, ms)
        s_field = fields[base.stat_lookup.rows(mp, s_md)]
        sel = np.flatnonzero(s_field >= 0)
        unknown += int(np.count_nonzero(s_field == -1))  # (a field left unread: not counted)
        if sel.size:  # owner: a metadata entry -> every event of it (the event's name row is its entry)
            e, i = _owned(base.md_lookup.rows(mp[sel], mid[sel]), sel, scan.ev_name, len(base.emd))
            place(e, s_field[i], s_kind[i], s_val[i], mp[i], scan, base.stat_lookup)
    cols, strings = columns(buf, scan, base.line_plane, base.stat_names, base.stat_lookup, skip=skip, codes_only=codes_only)
    return cols, strings, unknown


def plane_devices(planes: list[Any]) -> np.ndarray:
    """Each plane's GPU ordinal (``/device:GPU:N``), -1 for a host plane; int64."""
    return np.array([-1 if (d := _device_of(p.name)) is None else d for p in planes], dtype=np.int64)


def _hlo_names(strings: dict[str, Strings]) -> frozenset[str]:
    """The HLO op and module names the events name (a host event so named is an op)."""
    return frozenset(x for c in ("hlo_op", "hlo_module") for x in strings[c].used_texts())


def _window_idx(window: Window, line_events: np.ndarray, ev_line: np.ndarray) -> pl.Series:
    """The ``idx`` of a window's events (in line order, ``line_events`` of each line) as the whole profile numbers
    them: the line's first event in the whole profile, plus the line's events before the window, plus the event's
    place in the window's run."""
    total = window.cuts.before[:, -1]
    whole_first = np.concatenate([[0], np.cumsum(total)[:-1]]) if total.size else total
    k = window.index
    before = window.cuts.before[:, k - 1] if k > 0 else np.zeros_like(total)
    here_first = np.concatenate([[0], np.cumsum(line_events)[:-1]]) if line_events.size else line_events
    shift = (whole_first + before - here_first).astype(np.int64)
    return pl.Series("idx", np.arange(ev_line.size, dtype=np.int64) + shift[ev_line])


def _shared_names(hlo: pl.DataFrame) -> list[str]:
    """The module names two programs of the profile share (a function compiled for two shapes; JAX's helpers
    ``jit_convert_element_type``, ``jit_multiply`` ... in most real profiles)."""
    if hlo.height == 0:
        return []
    per = hlo.group_by("hlo_module").agg(pl.col("program").n_unique()).filter(pl.col("program") > 1)
    return per["hlo_module"].drop_nulls().to_list()


def _hlo_numbers(strings: dict[str, Strings], name_row: np.ndarray, is_gpu: np.ndarray, occurrences: np.ndarray,
                 programs: pl.Series | None = None, shared: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each GPU row's (module, kernel, op) numbered from the scan's codes (:func:`distinct_rows`; the HLO columns are
    found once per number), of the rows kept (not the aggregated ``occurrences``). With ``programs`` (each event's
    program id) the GPU rows of a module name in ``shared`` have their program in place of their module (a code past
    the module names'): only their rows are read, usually the few of JAX's helper programs (a fourth code for every
    row was 0.14 s of the 207 MB profile's load)."""
    if programs is not None and shared:
        module_s = strings["hlo_module"]
        codes = np.flatnonzero(module_s.dictionary.is_in(shared).to_numpy())
        rows = np.flatnonzero(np.isin(module_s.value, codes) & ~module_s.missing & is_gpu)
        pid = programs.gather(rows)
        has = pid.is_not_null().to_numpy()
        if has.any():
            ids = pid.drop_nulls().to_numpy().astype(np.int64)
            module = module_s.value.astype(np.int64)
            module[rows[has]] = module_s.dictionary.len() + 1 + np.searchsorted(np.unique(ids), ids)
            keep = ~occurrences
            return distinct_rows([module[keep], name_row[keep], strings["hlo_op"].codes[keep]], is_gpu[keep],
                                 missing=[module_s.missing[keep], None, None])
    if occurrences.any():
        keep = ~occurrences
        module, op = (strings[c].codes[keep] for c in ("hlo_module", "hlo_op"))
        return distinct_rows([module, name_row[keep], op], is_gpu[keep])
    # (the cells as the scan left them, their missing rows reading -1: no copy of either as codes)
    module_s, op_s = strings["hlo_module"], strings["hlo_op"]
    return distinct_rows([module_s.value, name_row, op_s.value], is_gpu, missing=[module_s.missing, None, op_s.missing])


def _meta_rows(planes: list[_Plane], line_plane: np.ndarray, tids: list[str], line_names: list[str], pids: list[str],
               plane_stats: dict[int, dict[str, Any]]) -> pl.DataFrame:
    """Process and thread names as metadata rows, as Kineto writes them (a plane is a process, a line a thread)."""
    rows: dict[str, list[Any]] = {c: [] for c in META_COLUMNS}

    def add(name: str, pid: str, tid: str, value: str) -> None:
        for k, v in (("idx", -1), ("name", name), ("pid", pid), ("tid", tid), ("meta_name", value), ("sort_index", None)):
            rows[k].append(v)

    seen: set[str] = set()
    for pi, tid, lname in zip(line_plane.tolist(), tids, line_names):
        p = planes[pi]
        if pids[pi] not in seen:
            seen.add(pids[pi])
            label = p.name
            if _device_of(p.name) is not None and plane_stats[pi].get("gpu_device_name"):
                label = f"{p.name} ({plane_stats[pi]['gpu_device_name']})"
            add("process_name", pids[pi], "0", label)
        add("thread_name", pids[pi], tid, lname)
    return pl.DataFrame(rows, schema={"idx": pl.Int64, "name": pl.Categorical, "pid": pl.Categorical,
                                      "tid": pl.Categorical, "meta_name": pl.String, "sort_index": pl.String})


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
