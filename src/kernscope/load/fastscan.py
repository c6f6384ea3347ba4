"""The compiled Kineto event scanner (``_kineto.c``): a run of events -> the event table of that piece, in one
pass over the text, without polars' reader or a Python object per event.

It is the first reader :class:`kernscope.load.kineto._Pipeline` tries on each piece. The scanner validates
the whole text as strict JSON and declines (:func:`scan` returns None) whatever the table readers treat in a
special way: times with more than 3 decimals or an exponent, integer args that are not plain integers,
escaped strings over 4096 bytes, a key written with escapes, a tracked key twice in an event, and anything that is
not a valid run of objects; the piece then goes through today's readers (:mod:`.lines`, :mod:`.chunk`),
which give the same table and report errors at their place. ``tests/test_fastscan.py`` checks the tables
are equal on every real trace and on the mutant corpus.

Strings are interned by the scanner (one dictionary of distinct strings per piece, int32 codes per row):
the categorical columns are built from the codes. A projection is applied to the scanned rows: an event is
dropped when its phase is in ``drop_phases``, or it is a ``ph: X`` event of a category in ``drop_cats``
whose name the projection does not want and whose ``ts`` is known (every such event, not only those whose
layout numpy can judge: ``dropped`` counts them, each kept row keeps its ordinal).

An event laid out like an earlier one of the piece (Kineto writes each kind with one format string) is matched
to that layout instead of tokenized: its text outside the values compared, its values read or checked (``Layout``
in _kineto.c). ``scan(..., layouts=False)`` tokenizes every event: the same table, the tests' reference.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import polars as pl

from .chunk import EVENT_SCHEMA, FLOW_COLUMNS, FLOW_PHASES, MAX_NAME_BYTES, META_COLUMNS, Args_, cap_names
from .native import scanner
from .projection import NameTest, Projection
from .scanslots import FIXED_INTS, FIXED_STRINGS, Texts, slots_of
from .strings import strings_of

__all__ = ["ScanHints", "Scanned", "available", "scan"]

KS_DECLINE, KS_ROWS, KS_NOMEM = -1, -2, -3
#: scanner options: every event through the whole parse, none through a learned layout (a test's reference)
KS_NO_LAYOUTS = 1
#: first guess of the outputs' sizes: an event per 96 bytes of text (real traces: 150-500 bytes an event),
#: 2 distinct strings per event and 1/8 of the text in distinct strings' bytes. A piece that needs more is
#: scanned again with room for anything (an event per 2 bytes). Outputs sized to what is used keep the
#: process's memory down: allocated pages the scanner never writes cost nothing, but a reused heap block's do
BYTES_PER_EVENT = 96


@dataclass(frozen=True)
class _Layout:
    """Which args a scan reads and where they go: string slots after the fixed six, int slots after ts/dur."""

    keys: bytes
    offsets: np.ndarray  #: int64, len(args) + 1
    slots: np.ndarray  #: int64: >= 0 string slot, -(j + 1) int slot j
    strings: tuple[str, ...]  #: column of each string slot
    ints: tuple[str, ...]  #: column of each int slot
    columns: tuple[str, ...]  #: the piece table's columns, in EVENT_SCHEMA order


@lru_cache(maxsize=16)
def _layout(args: Args_, texts: Texts = ()) -> _Layout:
    sl = slots_of(args, texts)
    offsets = np.zeros(len(sl.keys) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(k) for k in sl.keys])
    have = {*sl.strings, *sl.ints, "ts_missing", "dur_missing"}
    return _Layout(b"".join(sl.keys), offsets, np.array(sl.slots, dtype=np.int64), sl.strings, sl.ints,
                   tuple(c for c in EVENT_SCHEMA if c in have) + tuple(column for _, column in texts))


@dataclass(frozen=True)
class Split:
    """The rows of a piece that are not events (``scan(..., split=True)``): its flow arrows and metadata events, each
    in their columns (:data:`~.chunk.FLOW_COLUMNS`, :data:`~.chunk.META_COLUMNS`; ``idx`` added by
    :meth:`flows_at`/:meth:`metas_at`; None: the piece has none), and its count of counters (dropped)."""

    flows: pl.DataFrame | None
    flow_ordinals: np.ndarray  #: each flow row's ordinal among the piece's events
    metas: pl.DataFrame | None
    meta_ordinals: np.ndarray
    counters: int

    @property
    def rows(self) -> int:
        """The piece's events split off (flow arrows, metadata events and counters)."""
        return len(self.flow_ordinals) + len(self.meta_ordinals) + self.counters

    def flows_at(self, first: int) -> pl.DataFrame | None:
        """The flow arrows with ``idx``, the piece's first event being event ``first`` of the file."""
        return _at(self.flows, self.flow_ordinals, first, FLOW_COLUMNS)

    def metas_at(self, first: int) -> pl.DataFrame | None:
        """The metadata events with ``idx`` (see :meth:`flows_at`)."""
        return _at(self.metas, self.meta_ordinals, first, META_COLUMNS)


def _at(table: pl.DataFrame | None, ordinals: np.ndarray, first: int, columns: list[str]) -> pl.DataFrame | None:
    if table is None:
        return None
    # (the table put together from its columns: a with_columns and a select, each a query of polars' engine, cost
    # ~0.2 ms a piece's part, on the thread that takes the pieces in order)
    idx = pl.Series("idx", first + ordinals.astype(np.int64))
    return pl.DataFrame([idx if c == "idx" else table.get_column(c) for c in columns if c == "idx" or c in table.columns])


_NOTHING_SPLIT = Split(None, np.zeros(0, np.int64), None, np.zeros(0, np.int64), 0)


@dataclass
class Scanned:
    """One piece's table and what a projection removed (as :class:`kernscope.load.kineto.Parsed` wants)."""

    table: pl.DataFrame  #: an args column without a value in the piece is left out (the pieces' join makes it null)
    dropped: int = 0
    ordinals: np.ndarray | None = None  #: each kept row's ordinal among the piece's events (None: all kept)
    dropped_first_ts: float = float("inf")  #: earliest ts (µs) of the ``ph: X`` events dropped
    via_layouts: int = 0  #: of the events dropped, those the scanner matched to a learned layout (not tokenized)
    rows_via_layouts: int = 0  #: of the rows, those read through a learned layout (their values read at its holes)
    split: Split | None = None  #: with ``scan(..., split=True)``: the rows split off (``table`` holds the events)


def available() -> bool:
    """True when the compiled scanner can run (built at install, not disabled by ``KERNSCOPE_NO_NATIVE=1``)."""
    return scanner() is not None


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


@dataclass(frozen=True)
class _Drops:
    """What the scanner drops unparsed (``_kineto.c``): phases; "X" events of these categories with these names
    (those the projection's name test has judged unwanted so far). Each as strings joined, with offsets."""

    phases: tuple[bytes, np.ndarray]
    cats: tuple[bytes, np.ndarray]
    names: tuple[bytes, np.ndarray]

    @staticmethod
    def joined(items: list[bytes]) -> tuple[bytes, np.ndarray]:
        off = np.zeros(len(items) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(x) for x in items])
        return b"".join(items), off

    @classmethod
    def of(cls, projection: Projection | None, keep: NameTest | None) -> _Drops:
        if projection is None or not projection.drops_events:
            return cls(cls.joined([]), cls.joined([]), cls.joined([]))
        # (a copy first: the other parsing thread may add names meanwhile; dict.copy holds the GIL throughout)
        judged = keep.memo.copy() if keep is not None else {}
        names = [n for n, kept in judged.items() if not kept]
        return cls(cls.joined([p.encode() for p in projection.drop_phases]),
                   cls.joined([c.encode() for c in projection.drop_cats]), cls.joined(names))


_NO_DROPS = _Drops(_Drops.joined([]), _Drops.joined([]), _Drops.joined([]))


def _run(lib: Any, buf: np.ndarray, lay: _Layout, cap: int, roomy: bool = False, drops: _Drops = _NO_DROPS,
         layouts: bool = True) -> tuple[
        int, list[np.ndarray], list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One call of the scanner with outputs for ``cap`` events (``roomy``: and for any dictionary; ``layouts``:
    events may be matched to the layouts of earlier ones, see ``Layout`` in _kineto.c)."""
    n = buf.size
    codes = [np.empty(cap, np.uint32) for _ in lay.strings]
    ints = [np.empty(cap, np.int64) for _ in lay.ints]
    valid = [np.empty(cap, np.uint8) for _ in lay.ints]
    # each distinct string is a distinct place in the text (so neither count nor bytes can exceed it)
    cap_dict = min(cap * len(lay.strings), n + 1) if roomy else min(2 * cap + 1024, n + 1)
    doff = np.empty(cap_dict + 2, np.int64)
    dbytes = np.empty(max(n if roomy else n // 8 + 4096, 1), np.uint8)
    counts = np.zeros(8, np.int64)
    ordinals = np.empty(cap, np.int64)
    vp = ctypes.c_void_p
    (ph, ph_off), (cat, cat_off), (name, name_off) = drops.phases, drops.cats, drops.names
    rows = lib.ks_kineto_scan(
        _ptr(buf), ctypes.c_int64(n), ctypes.c_int64(cap),
        (vp * len(codes))(*(a.ctypes.data for a in codes)), ctypes.c_int64(len(codes)),
        (vp * len(ints))(*(a.ctypes.data for a in ints)), (vp * len(valid))(*(a.ctypes.data for a in valid)),
        ctypes.c_int64(len(ints)), _ptr(doff), _ptr(dbytes), ctypes.c_int64(cap_dict + 1), ctypes.c_int64(dbytes.size),
        ctypes.c_char_p(lay.keys), _ptr(lay.offsets), _ptr(lay.slots), ctypes.c_int64(len(lay.slots)),
        ctypes.c_char_p(ph), _ptr(ph_off), ctypes.c_int64(len(ph_off) - 1),
        ctypes.c_char_p(cat), _ptr(cat_off), ctypes.c_int64(len(cat_off) - 1),
        ctypes.c_char_p(name), _ptr(name_off), ctypes.c_int64(len(name_off) - 1), _ptr(ordinals), _ptr(counts),
        ctypes.c_int64(0 if layouts else KS_NO_LAYOUTS))
    return int(rows), codes, ints, valid, doff, dbytes, counts, ordinals


@dataclass
class ScanHints:
    """What the scans of one document learned, for its later pieces (shared by the parsing threads; a stale
    value costs at most one rescan of a piece, never a wrong value)."""

    #: bytes of text per event seen so far (the outputs of a piece are sized from it, with a quarter more room)
    bytes_per_event: float = float(BYTES_PER_EVENT)


def scan(text: bytes | memoryview, args: Args_ = None, projection: Projection | None = None,
         keep: NameTest | None = None, hints: ScanHints | None = None, layouts: bool = True,
         texts: Texts = (), only_texts: bool = False, split: bool = False,
         scanned: tuple[Any, ...] | None = None) -> Scanned | None:
    """The event table of ``text`` (a run of events, no brackets), or None when the compiled scanner is not
    available or declines the text (then parse it with the other readers). ``args``: the args columns read
    (None: all); ``projection``/``keep``: the events to drop (see the module) and its name test; ``layouts``
    False: every event is tokenized in full, none matched to the layout of an earlier one (the same result,
    slower: a test's reference). ``texts``: (args key, column) pairs read as the value's JSON text, as written (an
    op's ``Input Dims``: :mod:`.opargs`), String columns after the event table's; an event with one is read in full
    (no layout), and a piece where one is over :data:`~.chunk.MAX_NAME_BYTES` is declined. ``only_texts``: the table
    is those columns alone, a row per event (none of its strings made a category: polars keeps those for the
    process's life). ``split``: the flow arrows, metadata events and counters are split off (:class:`Split`), each
    table right-sized from the scanner's outputs (split later, as a filter of a piece's table, they were copied
    into polars' allocator, whose freed pages stay mapped a while, where the pieces' own arrays go back at the join).
    ``scanned``: the scanner's outputs for ``text``, made ahead of time with this call's slots and without dropping
    any event by its name (:meth:`kernscope.load.headstart.Claim.take`), in place of a scan now."""
    lib = scanner()  # (of ABI 7 or later: it has ks_kineto_scan)
    if lib is None:
        return None
    buf = np.frombuffer(text, dtype=np.uint8)
    lay = _layout(args, texts)
    cap = int(buf.size / (hints.bytes_per_event if hints else BYTES_PER_EVENT) * 1.25) + 64
    keep = keep or (projection.compiled() if projection is not None else None)
    # the events of names judged unwanted in earlier pieces are dropped by the scanner itself, unparsed (a Python
    # function's event cost 0.6 of a parsed one when it was parsed and then filtered here); new names are judged below
    drops = _Drops.of(projection, keep)
    # (texts fill the dictionary with values as long as the text's: room for them at once, not a second scan)
    if scanned is not None:
        rows, codes, ints, valid, doff, dbytes, counts, c_ord = scanned
    else:
        rows, codes, ints, valid, doff, dbytes, counts, c_ord = _run(lib, buf, lay, cap, roomy=bool(texts), drops=drops,
                                                                     layouts=layouts)
    if rows == KS_ROWS:
        rows, codes, ints, valid, doff, dbytes, counts, c_ord = _run(lib, buf, lay, buf.size // 2 + 2, roomy=True,
                                                                     drops=drops, layouts=layouts)
    if rows < 0:
        return None
    c_dropped = int(counts[3])
    c_first_ts = float(counts[5]) / 1000.0 if counts[4] else float("inf")
    if hints is not None and rows + c_dropped:
        hints.bytes_per_event = min(float(BYTES_PER_EVENT), buf.size / (rows + c_dropped))
    ndict, nbytes = int(counts[0]), int(counts[1])
    # the dictionary after a null: code 0 (null or absent) gathers that null
    offsets = np.concatenate([[0], doff[: ndict + 1]])
    lens = np.diff(offsets)
    words = dictionary_series(offsets, dbytes[:nbytes])
    raw_words = words  # names are judged whole (a capped one is only for the table)
    codes = [c[:rows] for c in codes]
    ints = [a[:rows] for a in ints]
    present = [v[:rows].view(np.bool_) for v in valid]
    if ndict and int(lens.max()) > MAX_NAME_BYTES:
        # names over 4 KB keep their head and a hash (chunk.cap_names), as the other readers do; flow ids are
        # never capped there: a long one is theirs to read
        long = np.flatnonzero(lens > MAX_NAME_BYTES)
        if any(np.isin(codes[lay.strings.index(c)], long).any() for c in ("flow_id", *(c for _, c in texts))):
            return None
        words = cap_names(pl.DataFrame({"s": words}), ("s",))["s"]

    dropped, ordinals, first_ts = c_dropped, c_ord[:rows] if c_dropped else None, c_first_ts
    keep_rows = None
    if projection is not None and projection.drops_events and rows and keep is not None:
        keep_rows, first_ts_rows = _kept(raw_words, offsets, lens, dbytes, codes, ints[0], present[0], projection, keep)
        first_ts = min(first_ts, first_ts_rows)
    if keep_rows is not None:
        dropped += rows - len(keep_rows)
    phases = _phase_rows(offsets, lens, dbytes, codes[0], keep_rows) if split and not only_texts and rows else None
    if phases is not None:
        events, flow, meta, n_counters = phases

        # (a column without a value in the piece is left out of every part: not gathered)
        has_s = [k < len(FIXED_STRINGS) or bool(c.any()) for k, c in enumerate(codes)]
        has_i = [k < len(FIXED_INTS) or bool(v.any()) for k, v in enumerate(present)]

        def part(at: np.ndarray, only: list[str] | None = None) -> pl.DataFrame:
            s_ok = [h and (only is None or n in only) for h, n in zip(has_s, lay.strings)]
            i_ok = [h and (only is None or n in only) for h, n in zip(has_i, lay.ints)]
            # (take: twice the rate of an index)
            return _table(lay, words, [c.take(at) if ok else c[:0] for ok, c in zip(s_ok, codes)],
                          [a.take(at) if ok else a[:0] for ok, a in zip(i_ok, ints)],
                          [v.take(at) if ok else np.zeros(len(at), np.bool_) for ok, v in zip(i_ok, present)], only)

        def ords(at: np.ndarray) -> np.ndarray:
            return c_ord[at] if c_dropped else at

        flows = part(flow, FLOW_COLUMNS) if len(flow) else None
        metas = part(meta, META_COLUMNS) if len(meta) else None
        return Scanned(part(events), dropped, ords(events), first_ts, int(counts[6]), int(counts[7]),
                       Split(flows, ords(flow), metas, ords(meta), n_counters))
    if keep_rows is not None:
        ordinals = c_ord[:rows][keep_rows] if c_dropped else keep_rows
        codes = [c[keep_rows] for c in codes]
        ints = [a[keep_rows] for a in ints]
        present = [v[keep_rows] for v in present]
    else:
        # the columns keep their arrays (polars keeps a numpy array it is given): right-sized copies, not views
        # that would hold every piece's whole outputs, sized for the first guess, until the pieces are joined
        ints = [a.copy() for a in ints]
    if only_texts:
        table = pl.DataFrame([words.gather(pl.Series(codes[lay.strings.index(c)])).alias(c) for _, c in texts])
    else:
        table = _table(lay, words, codes, ints, present)
    return Scanned(table, dropped, ordinals, first_ts, int(counts[6]), int(counts[7]),
                   _NOTHING_SPLIT if split and not only_texts else None)


def dictionary_series(offsets: np.ndarray, data: np.ndarray) -> pl.Series:
    """A null, then the strings ``data[offsets[i]:offsets[i + 1]]`` for i >= 1 (the scanner's dictionary after its
    null entry; valid UTF-8, the scanner checked it), as one String Series (:func:`.strings.strings_of`)."""
    return strings_of(offsets[1:], data, null_first=True)


def _codes_of(offsets: np.ndarray, lens: np.ndarray, data: np.ndarray, wanted: tuple[str, ...]) -> np.ndarray:
    """The dictionary codes (entry 0 is the null; ``offsets``/``lens``: each entry's start and length in ``data``)
    of the strings ``wanted``."""
    found = []
    for w in wanted:
        wb = np.frombuffer(w.encode(), dtype=np.uint8)
        cand = np.flatnonzero(lens == len(wb))
        cand = cand[cand > 0]
        if len(cand) and len(wb):
            cand = cand[(data[offsets[cand][:, None] + np.arange(len(wb))] == wb).all(axis=1)]
        found.append(cand)
    return np.concatenate(found).astype(np.uint32) if found else np.zeros(0, dtype=np.uint32)


def _phase_rows(offsets: np.ndarray, lens: np.ndarray, data: np.ndarray, ph: np.ndarray, keep_rows: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """The scanned rows (``ph``: their phase codes; of ``keep_rows`` only, where given) that are events, flow arrows
    and metadata events, and the count of counters; None where every row is an event."""
    kind = np.zeros(len(offsets), dtype=np.uint8)  # per dictionary code: 0 event, 1 flow arrow, 2 metadata, 3 counter
    for k, phases in ((1, FLOW_PHASES), (2, ("M",)), (3, ("C",))):
        kind[_codes_of(offsets, lens, data, phases)] = k
    if not kind.any():
        return None
    of_row = kind[ph] if keep_rows is None else kind[ph[keep_rows]]
    if not of_row.any():
        return None
    if keep_rows is None:
        return (np.flatnonzero(of_row == 0), np.flatnonzero(of_row == 1), np.flatnonzero(of_row == 2),
                int(np.count_nonzero(of_row == 3)))
    return keep_rows[of_row == 0], keep_rows[of_row == 1], keep_rows[of_row == 2], int(np.count_nonzero(of_row == 3))


def _kept(words: pl.Series, offsets: np.ndarray, lens: np.ndarray, data: np.ndarray, codes: list[np.ndarray], ts: np.ndarray,
          has_ts: np.ndarray, projection: Projection, keep: NameTest) -> tuple[np.ndarray | None, float]:
    """The rows a projection keeps (None: all) and the earliest ts (µs) of the ``ph: X`` events it drops."""
    ph, cat, name = codes[0], codes[1], codes[2]
    drop = np.zeros(len(ph), dtype=bool)
    by_phase = _codes_of(offsets, lens, data, projection.drop_phases)
    if len(by_phase):
        drop |= np.isin(ph, by_phase)
    first_ts = float("inf")
    cats, x = _codes_of(offsets, lens, data, projection.drop_cats), _codes_of(offsets, lens, data, ("X",))
    if len(cats) and len(x):
        cand = np.flatnonzero((ph == x[0]) & np.isin(cat, cats) & has_ts)
        if len(cand):
            uniq = np.unique(name[cand])
            unwanted = np.zeros(len(words), dtype=bool)  # the null name (code 0) is kept
            for c, w in zip(uniq.tolist(), words.gather(uniq).to_list()):
                if w is not None and not keep(w.encode()):
                    unwanted[c] = True
            by_cat = cand[unwanted[name[cand]]]
            if len(by_cat):
                drop[by_cat] = True
                first_ts = float(ts[by_cat].min()) / 1000.0
    if not drop.any():
        return None, first_ts
    return np.flatnonzero(~drop), first_ts


def _table(lay: _Layout, words: pl.Series, codes: list[np.ndarray], ints: list[np.ndarray],
           present: list[np.ndarray], only: list[str] | None = None) -> pl.DataFrame:
    # only the strings of categorical columns become categories (polars' categories are global and kept for the
    # process's life: flow ids, or the names of dropped Python events, have no place there); codes renumbered
    # an args column without a value in the piece is left out of its table (the pieces' join makes it null in the
    # piece's rows, and one null literal where no piece has a value): materialized, such columns were ~20 MB of the
    # pieces a 200 MB trace holds until they are joined (ns-resolution: Python ids, communicator ranks)
    # (``only``: these columns alone, where they have a value)
    strings = {name: c for k, (name, c) in enumerate(zip(lay.strings, codes))
               if (only is None or name in only) and (k < len(FIXED_STRINGS) or c.any())}
    is_cat = {name: EVENT_SCHEMA.get(name) == pl.Categorical for name in strings}  # (a text arg: String)
    used = np.zeros(len(words), dtype=bool)
    for name, c in strings.items():
        if is_cat[name]:
            used[c] = True
    used[0] = True  # the null
    renum = (np.cumsum(used) - 1).astype(np.uint32)
    idx = pl.DataFrame({name: renum.take(c) if is_cat[name] else c for name, c in strings.items()})
    cats, text = pl.lit(words.filter(pl.Series(used)).cast(pl.Categorical)), pl.lit(words)
    cols = {c.name: c for c in idx.select((cats if is_cat[name] else text).gather(pl.col(name)).alias(name)
                                          for name in strings).get_columns()}
    for k, (name, v, ok) in enumerate(zip(lay.ints, ints, present)):
        if only is not None and name not in only:
            continue
        if k < len(FIXED_INTS):  # times: 0 where missing, and the missing mask
            cols[name] = pl.Series(name, v)
            cols[f"{name}_missing"] = pl.Series(f"{name}_missing", ~ok)
        elif ok.all():
            cols[name] = pl.Series(name, v)
        elif ok.any():
            cols[name] = pl.Series(name, v).set(pl.Series(~ok), None)
    return pl.DataFrame([cols[c] for c in (lay.columns if only is None else only) if c in cols])
