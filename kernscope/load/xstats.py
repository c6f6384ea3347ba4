"""XStats -> typed event columns, without a Python object per stat (the spec of what becomes a column).

Like :mod:`.argspec` for Kineto's ``args``: :data:`STAT_FIELDS` says which stat (by its name in the
plane's stat metadata) becomes which column, of which type. A stat's value is typed by the field it is
stored in (double, uint64, int64, string, bytes, or a *ref*: the id of a stat metadata entry whose name is
the value, XLA's way of interning strings). Strings stay interned: a string column is a categorical
gathered from a dictionary (the stat metadata names plus the few inline strings), never one Python
string per event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from .xscan import K_DOUBLE, K_I64, K_REF, K_STR, K_U64


@dataclass(frozen=True)
class StatField:
    raw: str  #: the stat's name in the plane's stat metadata
    column: str  #: column in the event table
    kind: str  #: "int" (Int64), "float" (Float64), "str" (categorical string)


#: the stats that become columns; the others are counted (``metadata["xplane"]["unknown_stats"]``)
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
_DTYPE = {"int": pl.Int64, "float": pl.Float64, "str": pl.Categorical}


def texts(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> pl.Series:
    """Payloads as a string Series, gathered with numpy (no Python object per string)."""
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
    out: pl.Series = pl.Series(arr).cast(pl.String)
    return out


class Lookup:
    """``(plane, id)`` -> row of a per-plane metadata table (ids of XLA metadata are small integers: a flat
    table; else a join)."""

    def __init__(self, plane: np.ndarray, ids: np.ndarray) -> None:
        self.n = ids.size
        self.width = int(ids.max()) + 1 if ids.size else 0
        planes = int(plane.max()) + 1 if plane.size else 0
        self.flat = ids.size > 0 and int(ids.min()) >= 0 and self.width * planes <= 1 << 24
        if self.flat:
            self.table = np.full(self.width * planes, -1, dtype=np.int64)
            self.table[plane * self.width + ids] = np.arange(ids.size)
        self.frame = pl.DataFrame({"plane": plane, "id": ids, "_i": np.arange(ids.size)})

    def rows(self, plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The row of each (plane, id); -1 when there is none."""
        if self.n == 0:
            return np.full(ids.size, -1, dtype=np.int64)
        if self.flat:
            key = plane * self.width + ids
            ok = (ids >= 0) & (ids < self.width) & (key < self.table.size)
            out = np.full(ids.size, -1, dtype=np.int64)
            out[ok] = self.table[key[ok]]
            return out
        key_df = pl.DataFrame({"plane": plane, "id": ids, "_k": np.arange(ids.size)})
        found: np.ndarray = (key_df.join(self.frame, on=["plane", "id"], how="left").sort("_k")["_i"]
                             .fill_null(-1).cast(pl.Int64).to_numpy())
        return found


@dataclass
class Wanted:
    """The stats that become columns, one row each: owner row, :data:`STAT_FIELDS` index, kind, raw value,
    and for strings an index into ``dictionary`` (the stat names, then the inline strings)."""

    row: np.ndarray
    field: np.ndarray
    kind: np.ndarray
    value: np.ndarray  #: uint64
    text: np.ndarray  #: int64 index into ``dictionary``; -1 when not a string
    dictionary: pl.Series
    unknown: int  #: stats not wanted (not read further)


def field_table(stat_names: pl.Series) -> np.ndarray:
    """For each stat metadata row (and a trailing -1 for "no row"), its :data:`STAT_FIELDS` index, or -1."""
    index = {f.raw: i for i, f in enumerate(STAT_FIELDS)}
    return np.array([index.get(n, -1) if n is not None else -1 for n in stat_names.to_list()] + [-1], dtype=np.int8)


def field_lut(plane: np.ndarray, ids: np.ndarray, stat_names: pl.Series) -> tuple[np.ndarray, int] | None:
    """The flat ``plane * width + id`` -> field table the compiled scanner reads, and its width: only the
    wanted stats' ids need a slot (any other id reads -1 or falls outside). None when a wanted id is too
    large for a flat table (the numpy reader then joins)."""
    fields = field_table(stat_names)[:-1]
    w = np.flatnonzero(fields >= 0)
    if w.size == 0:
        return np.full(1, -1, dtype=np.int8), 1
    if int(ids[w].min()) < 0 or int(ids[w].max()) >= 1 << 20:
        return None
    width = int(ids[w].max()) + 1
    lut = np.full((int(plane.max()) + 1) * width, -1, dtype=np.int8)
    lut[plane[w] * width + ids[w]] = fields[w]
    return lut, width


def wanted(buf: np.ndarray, row: np.ndarray, plane: np.ndarray, md: np.ndarray, kind: np.ndarray, value: np.ndarray,
           off: np.ndarray, size: np.ndarray, stat_names: pl.Series, lookup: Lookup) -> Wanted:
    """Select the wanted stats among all the stats of ``row`` (see :class:`Wanted`); ``stat_names`` are the
    stat metadata names in ``lookup``'s row order."""
    field = field_table(stat_names)[lookup.rows(plane, md)]
    sel = np.flatnonzero(field >= 0)
    return resolve(buf, row[sel], plane[sel], field[sel].astype(np.int8), kind[sel], value[sel], off[sel], size[sel],
                   stat_names, lookup, int(row.size - sel.size))


def resolve(buf: np.ndarray, row: np.ndarray, plane: np.ndarray, field: np.ndarray, kind: np.ndarray, value: np.ndarray,
            off: np.ndarray, size: np.ndarray, stat_names: pl.Series, lookup: Lookup, unknown: int) -> Wanted:
    """Wanted stats with their strings resolved: a ref to the name it points at, an inline string to the
    dictionary's tail."""
    text = np.full(row.size, -1, dtype=np.int64)
    ref = np.flatnonzero(kind == K_REF)
    if ref.size:
        text[ref] = lookup.rows(plane[ref], value[ref].view(np.int64))
    inline = np.flatnonzero(kind == K_STR)
    dictionary = stat_names
    if inline.size:
        text[inline] = stat_names.len() + np.arange(inline.size)
        dictionary = pl.concat([stat_names, texts(buf, off[inline], size[inline])])
    return Wanted(row, field, kind, value, text, dictionary, unknown)


def nulls(n: int, dtype: Any) -> pl.Series:
    """``n`` nulls of ``dtype`` (no Python list)."""
    out: pl.Series = pl.repeat(None, n, dtype=dtype, eager=True)
    return out


def columns(parts: list[Wanted], n: int) -> dict[str, pl.Series]:
    """One column of ``n`` rows per :data:`STAT_FIELDS` entry (null where a row has no such stat): the parts
    in order, a later part's value over an earlier one's, and within a part the last stat of a row."""
    by_field = [_split(w) for w in parts]
    out: dict[str, pl.Series] = {}
    for i, f in enumerate(STAT_FIELDS):
        if f.kind == "str":
            col = nulls(n, pl.Categorical).alias(f.column)
            for w, groups in zip(parts, by_field):
                col = _strings(col, w, groups.get(i))
            out[f.column] = col
            continue
        vals = np.zeros(n, dtype=np.float64 if f.kind == "float" else np.int64)
        present = np.zeros(n, dtype=bool)
        parsed: list[tuple[np.ndarray, pl.Series]] = []
        for w, groups in zip(parts, by_field):
            m = groups.get(i)
            if m is None:
                continue
            rows, k, v, t = w.row[m], w.kind[m], w.value[m], w.text[m]
            is_int = (k == K_U64) | (k == K_I64)
            is_dbl = k == K_DOUBLE
            if f.kind == "float":
                vals[rows[is_dbl]] = v[is_dbl].view(np.float64)
                present[rows[is_dbl]] = True
                vals[rows[is_int]] = v[is_int].view(np.int64).astype(np.float64)
            else:
                d = v[is_dbl].view(np.float64)
                okd = np.isfinite(d) & (np.abs(d) < 2.0**63)
                vals[rows[is_dbl][okd]] = d[okd].astype(np.int64)
                present[rows[is_dbl][okd]] = True
                vals[rows[is_int]] = v[is_int].view(np.int64)
            present[rows[is_int]] = True
            has_text = t >= 0
            if has_text.any():  # numbers written as strings
                present[rows[has_text]] = False
                parsed.append((rows[has_text], w.dictionary.str.strip_chars().gather(pl.Series(t[has_text]))
                               .cast(_DTYPE[f.kind], strict=False)))
        col = pl.Series(f.column, vals).set(pl.Series(~present), None)
        for rows, values in parsed:
            col = col.scatter(rows, values)
        out[f.column] = col
    return out


def _split(w: Wanted) -> dict[int, np.ndarray]:
    """Per field, the rows of ``w`` holding it, the last one of each owner only (one stable sort)."""
    order = np.argsort(w.field, kind="stable")
    fields = w.field[order]
    bounds = np.flatnonzero(np.diff(fields)) + 1
    groups: dict[int, np.ndarray] = {}
    for chunk in np.split(order, bounds):
        if chunk.size == 0:
            continue
        rev = chunk[::-1]
        _, first = np.unique(w.row[rev], return_index=True)  # the last stat of each owner wins
        groups[int(w.field[chunk[0]])] = rev[first]
    return groups


def _strings(col: pl.Series, w: Wanted, m: np.ndarray | None) -> pl.Series:
    """``col`` with the string values of ``w``'s rows ``m`` written over it."""
    if m is None:
        return col
    rows, k, v, t = w.row[m], w.kind[m], w.value[m], w.text[m]
    has_text = t >= 0
    if has_text.any():
        col = col.scatter(rows[has_text], w.dictionary.cast(pl.Categorical).gather(pl.Series(t[has_text])))
    num = np.flatnonzero((k == K_U64) | (k == K_I64) | (k == K_DOUBLE))
    if num.size:  # a number where a string was expected (rare): its decimal text
        is_int = k[num] != K_DOUBLE
        shown = [str(int(x)) if i else repr(float(y)) for i, x, y in
                 zip(is_int.tolist(), v[num].view(np.int64).tolist(), v[num].view(np.float64).tolist())]
        col = col.scatter(rows[num], pl.Series(shown, dtype=pl.String).cast(pl.Categorical))
    return col


def kernel_details(details: pl.Series) -> dict[str, pl.Series]:
    """``grid_x/y/z``, ``block_x/y/z``, ``registers``, ``static_shared``, ``dynamic_shared`` (bytes) from
    XLA's ``kernel_details`` text (parsed once per distinct text); AMD's ``group_mem`` counts as shared."""
    cat = details.cast(pl.Categorical)
    distinct = cat.unique().drop_nulls()
    s = distinct.cast(pl.String)
    parsed: dict[str, Any] = {}
    for i, axis in enumerate("xyz"):
        parsed[f"grid_{axis}"] = s.str.extract(r"grid:(\d+),(\d+),(\d+)", i + 1).cast(pl.Int64, strict=False)
        parsed[f"block_{axis}"] = s.str.extract(r"block:(\d+),(\d+),(\d+)", i + 1).cast(pl.Int64, strict=False)
    parsed["registers"] = s.str.extract(r"regs:(\d+)", 1).cast(pl.Int64, strict=False)
    parsed["static_shared"] = s.str.extract(r"static_shared:(\d+)", 1).cast(pl.Int64, strict=False)
    dyn = s.str.extract(r"dynamic_shared:(\d+)", 1).cast(pl.Int64, strict=False)
    group = s.str.extract(r"group_mem:(\d+)", 1).cast(pl.Int64, strict=False)
    parsed["dynamic_shared"] = pl.select(pl.coalesce(pl.lit(dyn), pl.lit(group))).to_series()
    table = pl.DataFrame({"_c": distinct.to_physical(), **parsed})
    joined = pl.DataFrame({"_c": cat.to_physical()}).join(table, on="_c", how="left", maintain_order="left")
    return {c: joined[c].alias(c) for c in KERNEL_DETAIL_COLUMNS}
