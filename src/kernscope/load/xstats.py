"""XStats -> typed event columns, without a Python object per stat (the spec of what becomes a column).

Like :mod:`.argspec` for Kineto's ``args``: :data:`STAT_FIELDS` says which stat (by its name in the
plane's stat metadata) becomes which column, of which type. A stat's value is typed by the field it is
stored in (double, uint64, int64, string, bytes, or a *ref*: the id of a stat metadata entry whose name is
the value, XLA's way of interning strings). Strings stay interned: a string column is a categorical
gathered from a dictionary (the stat metadata names plus the few inline strings), never one Python
string per event.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from .chunk import nulls
from .native import mark_used
from .strings import strings_of
from .xscan import (
    F_FLOAT,
    F_INT,
    F_STR,
    F_UNREAD,
    K_DOUBLE,
    K_I64,
    K_REF,
    K_STR,
    K_U64,
    S_NONE,
    S_NULL,
    S_TEXT,
    S_VALUE,
    LineScan,
    lengths_before,
    typed,
)


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
    StatField("addr", "addr", "int"),  # (a memory event's block: its allocation and its free share it)
    # (XLA's GPU clique a collective ran in, on the host's AcquireGpuClique events: this process's rank in it and
    # the clique's key, "devices=2:[0,1]; local_participants=1; ..."; read only where asked, OPT_IN_STATS)
    StatField("rank", "clique_rank", "int"),
    StatField("clique_key", "clique_key", "str"),
)
#: the stat columns an XSpace decode reads only when a projection names them (``stats``): a job's rank summary
#: reads them (the process's rank), a one-trace analysis never
OPT_IN_STATS = frozenset({"clique_rank", "clique_key"})
#: each field's kind as the scanners read it (``xscan.F_*``)
FIELD_KINDS = np.array([{"int": F_INT, "float": F_FLOAT, "str": F_STR}[f.kind] for f in STAT_FIELDS], dtype=np.int8)
#: parsed from ``kernel_details`` ("regs:154 static_shared:0 dynamic_shared:98328 grid:128,1,1 block:128,1,1
#: occ_pct:12.5"; AMD: "grid:.. block:.. private_mem:0 group_mem:49280 occ_pct:0")
KERNEL_DETAIL_COLUMNS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
                         "static_shared", "dynamic_shared")
_DTYPE = {"int": pl.Int64, "float": pl.Float64, "str": pl.Categorical}


def texts(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> pl.Series:
    """Payloads as a string Series (invalid UTF-8 replaced), gathered with numpy into one buffer (no Python object
    per string; :func:`.strings.strings_of`)."""
    size = size.astype(np.int64)
    offsets = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        idx = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1] - off.astype(np.int64), size)
        data = buf[idx]
    else:
        data = np.zeros(0, dtype=np.uint8)
    return strings_of(offsets, data)


class Lookup:
    """``(plane, id)`` -> row of a per-plane metadata table (ids of XLA metadata are small integers: a flat
    table; else a join)."""

    def __init__(self, plane: np.ndarray, ids: np.ndarray) -> None:
        self.n = ids.size
        self.plane, self.ids = plane.astype(np.int64), ids.astype(np.int64)
        self.width = int(ids.max()) + 1 if ids.size else 0
        planes = int(plane.max()) + 1 if plane.size else 0
        self.flat = ids.size > 0 and int(ids.min()) >= 0 and self.width * planes <= 1 << 24
        if self.flat:
            self.table = np.full(self.width * planes + 1, -1, dtype=np.int64)  # the last slot: "none"
            self.table[plane * self.width + ids] = np.arange(ids.size)
        self.frame = pl.DataFrame({"plane": plane, "id": ids, "_i": np.arange(ids.size)})

    def flat_table(self, limit: int = 1 << 20) -> tuple[np.ndarray, int]:
        """A flat ``plane * width + id`` -> row table of the ids below ``limit`` (its last slot: "none"), and its
        width, for the compiled scanner (which leaves an id past the width to :meth:`rows`)."""
        if self.flat:
            return self.table, self.width
        small = np.flatnonzero((self.ids >= 0) & (self.ids < limit))
        width = int(self.ids[small].max()) + 1 if small.size else 0
        planes = int(self.plane.max()) + 1 if self.plane.size else 0
        table = np.full(width * planes + 1, -1, dtype=np.int64)
        table[self.plane[small] * width + self.ids[small]] = small
        return table, width

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


def field_table(stat_names: pl.Series, unread: Collection[int] = ()) -> np.ndarray:
    """For each stat metadata row (and a trailing -1 for "no row"), its :data:`STAT_FIELDS` index, -1 for a stat
    of no field, or :data:`.xscan.F_UNREAD` for one of a field in ``unread`` (indices)."""
    index = {f.raw: (F_UNREAD if i in unread else i) for i, f in enumerate(STAT_FIELDS)}
    return np.array([index.get(n, -1) if n is not None else -1 for n in stat_names.to_list()] + [-1], dtype=np.int8)


def field_lut(plane: np.ndarray, ids: np.ndarray, stat_names: pl.Series,
              unread: Collection[int] = ()) -> tuple[np.ndarray, int] | None:
    """The flat ``plane * width + id`` -> field table the compiled scanner reads, and its width: only the
    known stats' ids need a slot (any other id reads -1 or falls outside; a field in ``unread`` reads
    :data:`.xscan.F_UNREAD`). None when a known id is too large for a flat table (the numpy reader then joins)."""
    fields = field_table(stat_names, unread)[:-1]
    w = np.flatnonzero(fields != -1)
    if w.size == 0:
        return np.full(1, -1, dtype=np.int8), 1
    if int(ids[w].min()) < 0 or int(ids[w].max()) >= 1 << 20:
        return None
    width = int(ids[w].max()) + 1
    lut = np.full((int(plane.max()) + 1) * width, -1, dtype=np.int8)
    lut[plane[w] * width + ids[w]] = fields[w]
    return lut, width


def place(rows: np.ndarray, field: np.ndarray, kind: np.ndarray, raw: np.ndarray, plane: np.ndarray, scan: LineScan,
          refs: Lookup) -> None:
    """Write stats of event metadata into the scan's cells where an event has no stat of that field (the
    events' own stats win; of several here, the last): ``rows`` the owner events (in order), ``field`` their
    :data:`STAT_FIELDS` index, ``kind``/``raw`` their value kind and raw value, ``plane`` their plane."""
    odd: list[tuple[np.ndarray, ...]] = []
    for i, fk in enumerate(FIELD_KINDS.tolist()):
        m = np.flatnonzero(field == i)
        if m.size == 0:
            continue
        r = rows[m]
        last = np.append(r[1:] != r[:-1], True)
        m, r = m[last], r[last]
        free = scan.state[i][r] == S_NONE
        m, r = m[free], r[free]
        value, state = typed(fk, kind[m], raw[m], plane[m], refs)
        scan.value[i][r] = value
        scan.state[i][r] = state
        t = state == S_TEXT
        odd.append((r[t], np.full(int(t.sum()), i, np.int64), kind[m][t], raw[m][t]))
    if odd:
        scan.odd_ev, scan.odd_field, scan.odd_kind, scan.odd_val = (
            np.concatenate([a, *(o[k] for o in odd)]) for k, a in
            enumerate((scan.odd_ev, scan.odd_field, scan.odd_kind, scan.odd_val)))


def _last_of_each(ev: np.ndarray) -> np.ndarray:
    """Positions of the last entry of each distinct value of ``ev`` (entries in order)."""
    if ev.size < 2:
        return np.arange(ev.size)
    _, first_from_end = np.unique(ev[::-1], return_index=True)
    return ev.size - 1 - first_from_end


def _odd_texts(buf: np.ndarray, kind: np.ndarray, raw: np.ndarray, plane: np.ndarray, stat_names: pl.Series,
               refs: Lookup) -> pl.Series:
    """Stats read as text: inline strings, refs (the name they point at; null for none), numbers (decimal)."""
    out = nulls(kind.size, pl.String)
    s = np.flatnonzero(kind == K_STR)
    if s.size:
        at = raw[s].view(np.int64)
        out = out.scatter(s, texts(buf, at, lengths_before(buf, at)))
    r = np.flatnonzero(kind == K_REF)
    if r.size:
        rows = refs.rows(plane[r], raw[r].view(np.int64))
        ok = rows >= 0
        if ok.any():
            out = out.scatter(r[ok], stat_names.gather(pl.Series(rows[ok])))
    num = np.flatnonzero((kind == K_U64) | (kind == K_I64) | (kind == K_DOUBLE))
    if num.size:  # a number where a string was expected (rare): its decimal text
        shown = [repr(float(d)) if k == K_DOUBLE else str(int(i)) for k, i, d in
                 zip(kind[num].tolist(), raw[num].view(np.int64).tolist(), raw[num].view(np.float64).tolist())]
        out = out.scatter(num, pl.Series(shown, dtype=pl.String))
    return out


@dataclass(frozen=True)
class Strings:
    """A string column as codes into its dictionary (the stat names, then the column's inline strings):
    ``value`` (int32 per event) where ``missing`` is False."""

    value: np.ndarray
    missing: np.ndarray
    dictionary: pl.Series

    @property
    def codes(self) -> np.ndarray:
        """int32 per event, -1 for null (made when asked: most string columns never need it; int32, as the values
        are: three int64 copies were 0.25 s of a 1 GB profile's decode, most of it the first touch of their pages)."""
        out: np.ndarray = self.value.astype(np.int32)
        out[self.missing] = -1
        return out

    def rows(self) -> np.ndarray:
        """uint32 per event: its row in ``dictionary``, the row past its end where it has none (read from the cells as
        they are, not copied as :attr:`codes` first)."""
        value = self.value if self.value.dtype == np.int32 else self.value.astype(np.int32)
        out: np.ndarray = np.where(self.missing, np.uint32(self.dictionary.len()), value.view(np.uint32))
        return out

    def used(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The rows of ``dictionary`` some event has, in order (``rows``: :meth:`rows`, when the caller has them): a
        table of the rows, no pass over the column's categorical (0.08 s for two columns of 8.8 M events)."""
        size = self.dictionary.len()
        marked = mark_used(self.value, self.missing, size) if rows is None else None
        if marked is not None:  # (one compiled pass over the cells: the rows of 8.8 M events made first took 0.06 s)
            return np.flatnonzero(marked)
        seen = np.zeros(size + 1, dtype=bool)
        seen[self.rows() if rows is None else rows] = True
        return np.flatnonzero(seen[:size])

    def used_texts(self) -> list[str]:
        """The distinct texts some event has (:meth:`used`)."""
        texts: list[str] = self.dictionary.gather(pl.Series(self.used())).drop_nulls().to_list()
        return texts


def columns(buf: np.ndarray, scan: LineScan, line_plane: np.ndarray, stat_names: pl.Series,
            refs: Lookup, skip: Collection[str] = (),
            codes_only: Collection[str] = ()) -> tuple[dict[str, pl.Series], dict[str, Strings]]:
    """One column per :data:`STAT_FIELDS` entry (but the columns in ``skip``) from the scan's typed cells
    (``line_plane``: each line's plane, an event's being its line's, for refs): null where an event has no such
    stat; numbers written as text parsed; strings a categorical gathered from the stat names (refs: a row each) and
    the few inline strings (no Python string per row), also given as their codes (:class:`Strings`). String columns
    in ``codes_only`` are given as their codes alone (``analyze`` reads the kernel details' registers, not their
    text)."""
    out: dict[str, pl.Series] = {}
    strings: dict[str, Strings] = {}
    for i, f in enumerate(STAT_FIELDS):
        if f.column in skip:
            continue
        state, value = scan.state[i], scan.value[i]
        if state.size == value.size == scan.ev_ts.size and not state.any():
            # no event has this stat (its cells never written): nulls, not a gather of every event
            if f.column not in codes_only:
                out[f.column] = nulls(state.size, _DTYPE[f.kind]).alias(f.column)
            if f.kind == "str":
                strings[f.column] = Strings(value, np.ones(state.size, dtype=bool), stat_names)
            continue
        sel = np.flatnonzero(scan.odd_field == i)
        text: pl.Series | None = None
        if sel.size:  # the last text stat of each event's cell, where no later value replaced it
            sel = sel[_last_of_each(scan.odd_ev[sel])]
            sel = sel[state[scan.odd_ev[sel]] == S_TEXT]
            ev = scan.odd_ev[sel]
            text = _odd_texts(buf, scan.odd_kind[sel], scan.odd_val[sel], line_plane[scan.ev_line[ev]], stat_names, refs)
        if f.kind == "str":
            dictionary = stat_names
            if text is not None and text.len():
                value[ev] = stat_names.len() + np.arange(ev.size, dtype=np.int32)
                state[ev] = np.where(text.is_null().to_numpy(), S_NULL, S_VALUE)
                dictionary = pl.concat([stat_names, text])
            missing = state != S_VALUE
            strings[f.column] = Strings(value, missing, dictionary)
            if f.column not in codes_only:
                idx = pl.Series(value).set(pl.Series(missing), None)
                out[f.column] = dictionary.cast(pl.Categorical).gather(idx).alias(f.column)
            continue
        if text is not None and text.len():  # numbers written as text (a string or a ref)
            parsed = text.str.strip_chars().cast(_DTYPE[f.kind], strict=False)
            value[ev] = parsed.fill_null(0).to_numpy()
            state[ev] = np.where(parsed.is_null().to_numpy(), S_NULL, S_VALUE)
        out[f.column] = pl.Series(f.column, value).set(pl.Series(state != S_VALUE), None)
    return out, strings


def kernel_details(details: Strings, wanted: Sequence[str] = KERNEL_DETAIL_COLUMNS) -> dict[str, pl.Series]:
    """``grid_x/y/z``, ``block_x/y/z``, ``registers``, ``static_shared``, ``dynamic_shared`` (bytes) from
    XLA's ``kernel_details`` text (parsed once per distinct text used); AMD's ``group_mem`` counts as shared. Only the
    columns ``wanted`` are made (``analyze`` wants ``registers`` alone), and of them only those some text gives are
    gathered for every event (AMD's texts give no registers); the others are nulls."""
    n = details.value.size
    size = details.dictionary.len()
    rows = details.rows()  # each event's text as its row in the dictionary (the row past its end: none)
    used = details.used(rows)
    if not used.size or not wanted:
        return {c: nulls(n, pl.Int64).alias(c) for c in wanted}
    s = details.dictionary.gather(pl.Series(used))
    parsed: dict[str, Any] = {}
    for i, axis in enumerate("xyz"):
        parsed[f"grid_{axis}"] = s.str.extract(r"grid:(\d+),(\d+),(\d+)", i + 1).cast(pl.Int64, strict=False)
        parsed[f"block_{axis}"] = s.str.extract(r"block:(\d+),(\d+),(\d+)", i + 1).cast(pl.Int64, strict=False)
    parsed["registers"] = s.str.extract(r"regs:(\d+)", 1).cast(pl.Int64, strict=False)
    parsed["static_shared"] = s.str.extract(r"static_shared:(\d+)", 1).cast(pl.Int64, strict=False)
    dyn = s.str.extract(r"dynamic_shared:(\d+)", 1).cast(pl.Int64, strict=False)
    group = s.str.extract(r"group_mem:(\d+)", 1).cast(pl.Int64, strict=False)
    parsed["dynamic_shared"] = pl.select(pl.coalesce(pl.lit(dyn), pl.lit(group))).to_series()
    valued = [c for c in wanted if parsed[c].null_count() < parsed[c].len()]
    out = {c: nulls(n, pl.Int64) for c in wanted if c not in valued}
    if valued:  # a row per dictionary entry (null but for the texts used; the last: no text), gathered once
        at = pl.Series(used)
        table = pl.DataFrame({c: nulls(size + 1, pl.Int64).scatter(at, parsed[c]) for c in valued})
        out.update(zip(valued, table[pl.Series(rows)].get_columns()))
    return {c: out[c].alias(c) for c in wanted}
