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

from .xscan import K_DOUBLE, K_I64, K_REF, K_STR, K_U64, lengths_before


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
            self.table = np.full(self.width * planes + 1, -1, dtype=np.int64)  # the last slot: "none"
            self.table[plane * self.width + ids] = np.arange(ids.size)
        self.frame = pl.DataFrame({"plane": plane, "id": ids, "_i": np.arange(ids.size)})

    def rows(self, plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The row of each (plane, id); -1 when there is none."""
        if self.n == 0:
            return np.full(ids.size, -1, dtype=np.int64)
        if self.flat:
            key = plane * self.width + ids
            # out of range (another plane's wider ids, a damaged id): the sentinel slot, which holds -1
            key[(ids < 0) | (ids >= self.width) | (key >= self.table.size - 1)] = self.table.size - 1
            found_flat: np.ndarray = self.table[key]
            return found_flat
        key_df = pl.DataFrame({"plane": plane, "id": ids, "_k": np.arange(ids.size)})
        found: np.ndarray = (key_df.join(self.frame, on=["plane", "id"], how="left").sort("_k")["_i"]
                             .fill_null(-1).cast(pl.Int64).to_numpy())
        return found


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


def nulls(n: int, dtype: Any) -> pl.Series:
    """``n`` nulls of ``dtype`` (no Python list)."""
    out: pl.Series = pl.repeat(None, n, dtype=dtype, eager=True)
    return out


def place(rows: np.ndarray, field: np.ndarray, kind: np.ndarray, value: np.ndarray, val: list[np.ndarray],
          kinds: list[np.ndarray]) -> None:
    """Write stats (owner ``rows`` in order, ``field`` indices) into the columns where a row has no stat of
    that field yet (the columns' own stats win; of several stats here, the last)."""
    for i in range(len(val)):
        m = np.flatnonzero(field == i)
        if m.size == 0:
            continue
        r = rows[m]
        last = np.append(r[1:] != r[:-1], True)
        m, r = m[last], r[last]
        free = kinds[i][r] == 0
        m, r = m[free], r[free]
        val[i][r] = value[m]
        kinds[i][r] = kind[m]


def columns(buf: np.ndarray, val: list[np.ndarray], kinds: list[np.ndarray], plane: np.ndarray, stat_names: pl.Series,
            lookup: Lookup) -> dict[str, pl.Series]:
    """One column per :data:`STAT_FIELDS` entry from the scanned cells (``plane``: each row's plane, for
    refs): null where a row has no such stat; numbers written as text parsed; refs resolved to the name
    they point at (a categorical gathered from the stat names: no Python string per row)."""
    out: dict[str, pl.Series] = {}
    for i, f in enumerate(STAT_FIELDS):
        k, v = kinds[i], val[i]
        is_int = (k == K_U64) | (k == K_I64)
        is_dbl = k == K_DOUBLE
        is_ref = np.flatnonzero(k == K_REF)
        is_str = np.flatnonzero(k == K_STR)
        if f.kind == "str":  # one gather from a small dictionary: the stat names, then any inline strings
            index = np.full(v.size, -1, dtype=np.int64)
            parts = [stat_names]
            if is_ref.size:
                index[is_ref] = lookup.rows(plane[is_ref], v[is_ref].view(np.int64))
            if is_str.size:
                at = v[is_str].view(np.int64)
                index[is_str] = sum(p.len() for p in parts) + np.arange(is_str.size)
                parts.append(texts(buf, at, lengths_before(buf, at)))
            num = np.flatnonzero(is_int | is_dbl)
            if num.size:  # a number where a string was expected (rare): its decimal text
                shown = [str(int(x)) if i_ else repr(float(y)) for i_, x, y in
                         zip(is_int[num].tolist(), v[num].view(np.int64).tolist(), v[num].view(np.float64).tolist())]
                index[num] = sum(p.len() for p in parts) + np.arange(num.size)
                parts.append(pl.Series(shown, dtype=pl.String))
            dictionary = (pl.concat(parts) if len(parts) > 1 else parts[0]).cast(pl.Categorical)
            idx = pl.Series(index).set(pl.Series(index < 0), None)
            out[f.column] = dictionary.gather(idx).alias(f.column)
            continue
        if f.kind == "float":
            vals = np.where(is_dbl, v.view(np.float64), v.view(np.int64).astype(np.float64))
            present = is_dbl | is_int
        else:
            d = v.view(np.float64)
            with np.errstate(invalid="ignore"):
                okd = is_dbl & np.isfinite(d) & (np.abs(d) < 2.0**63)
                vals = np.where(okd, np.where(okd, d, 0).astype(np.int64), v.view(np.int64))
            present = is_int | okd
        col = pl.Series(f.column, vals).set(pl.Series(~present), None)
        if is_str.size or is_ref.size:  # numbers written as text (a string or a ref)
            text = nulls(v.size, pl.String)
            if is_str.size:
                at = v[is_str].view(np.int64)
                text = text.scatter(is_str, texts(buf, at, lengths_before(buf, at)))
            if is_ref.size:
                rows = lookup.rows(plane[is_ref], v[is_ref].view(np.int64))
                ok = rows >= 0
                text = text.scatter(is_ref[ok], stat_names.gather(pl.Series(rows[ok])))
            parsed = text.str.strip_chars().cast(_DTYPE[f.kind], strict=False)
            col = pl.select(pl.coalesce(pl.lit(col), pl.lit(parsed))).to_series().alias(f.column)
        out[f.column] = col
    return out


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
    # each row's distinct text, by its interned code: a flat table of the codes (no join, no hashing per row)
    codes = distinct.to_physical().cast(pl.Int64).to_numpy()
    row_codes = cat.to_physical()
    if not codes.size:
        return {c: nulls(details.len(), pl.Int64).alias(c) for c in KERNEL_DETAIL_COLUMNS}
    slot = np.full(int(codes.max()) + 2, codes.size, dtype=np.int64)  # the last slot: no text (null)
    slot[codes] = np.arange(codes.size)
    rc = row_codes.fill_null(int(codes.max()) + 1).cast(pl.Int64).to_numpy()
    rows = pl.Series(slot[np.minimum(rc, slot.size - 1)])
    return {c: pl.concat([parsed[c], nulls(1, pl.Int64)]).gather(rows).alias(c) for c in KERNEL_DETAIL_COLUMNS}
