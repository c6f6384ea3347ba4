"""Kineto / Chrome-trace JSON -> columnar event table (:class:`~kernscope.model.RawTrace`).

The document is split into event-aligned chunks (:mod:`.document`) and the chunks are parsed on a
thread pool (:mod:`.chunk`: polars' JSON reader releases the GIL, so both cores work through the whole
file). A chunk that is not valid JSON is merged with the next one and parsed again (its cut was inside
a string, or it holds the end of the array); one that is still invalid gives a precise error, or with
``salvage`` is recovered event by event by bisection. The tables built are bounded by
``Limits.max_memory``.
"""

from __future__ import annotations

import mmap
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import polars as pl

from ..cores import usable_cores
from ..errors import TraceError
from ..model import RawTrace
from . import document
from .argspec import ARG_FIELDS, LOADER_ARGS
from .chunk import (
    EVENT_SCHEMA,
    FLOW_COLUMNS,
    FLOW_PHASES,
    META_COLUMNS,
    Bad,
    ChunkError,
    ReadHints,
    empty_table,
    nulls,
    parse_chunk,
    parse_lines,
)
from .document import UTF8_BOM, NeedsWholeDocument, Piece, Splitter, decode_metadata, tail_candidates
from .fastscan import ScanHints, Split
from .fastscan import available as fastscan_available
from .fastscan import scan as fastscan
from .gzhead import GzClaim, HeadStartFailed
from .headstart import AHEAD, HeadStart, Spec
from .headstart import identity as head_identity
from .lines import to_lines
from .native import TRIM_MIN_BYTES, trim_heap
from .project import Projection, project
from .scanslots import slots_of
from .source import Limits, TraceSource
from .structure import top_level_objects

#: merges of a chunk with the ones after it before the error is final
MAX_MERGES = 16
#: pieces of one document the line reader may refuse (one odd event) before it is not tried again
MAX_REFUSED = 3
#: skipped-event descriptions kept for the report (the count is always exact)
MAX_SKIP_LINES = 20
_I64_MAX = 2**63 - 1


@dataclass
class Parsed:
    table: pl.DataFrame
    bad: list[Bad]
    tail: dict[str, Any] | None = None  #: metadata after the array (final piece only)
    #: salvage: what was dropped in this piece, as (event index within the piece, description)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    skipped_count: int = 0
    #: projection: events cut out unparsed, and each kept row's ordinal among the chunk's events
    dropped: int = 0
    ordinals: np.ndarray | None = None
    dropped_first_ts: float = float("inf")  #: earliest ts (µs) of the ``ph: X`` events cut out
    #: which reader made the table: "compiled scanner", "line reader", "array reader", "salvage" or "" (no events)
    reader: str = "array reader"
    #: the rows the reader split off already (the compiled scanner: :attr:`.fastscan.Scanned.split`)
    split: Split | None = None


def _bracket(text: bytes | memoryview) -> bytes:
    return b"".join((b"[", text, b"]"))


def _locate(e: ChunkError, piece: Piece, first_event: int) -> str:
    if e.event is not None:
        return f"$.traceEvents[{first_event + e.event}]"
    if e.byte is not None:
        return f"byte {piece.offset + max(e.byte - 1, 0):,}"
    return f"the events after byte {piece.offset:,}"


def _bisect(events: list[bytes], lo: int, hi: int, good: list[pl.DataFrame], bad: list[int]) -> None:
    """Parse events[lo:hi]; on failure split in halves (a bad event costs O(log n) extra parses)."""
    if lo >= hi:
        return
    try:
        df, problems = parse_chunk(_bracket(b",".join(events[lo:hi])))
        if not problems:
            good.append(df)
            return
        if hi - lo == 1:
            bad.append(lo)
            return
    except ChunkError:
        if hi - lo == 1:
            bad.append(lo)
            return
    mid = (lo + hi) // 2
    _bisect(events, lo, mid, good, bad)
    _bisect(events, mid, hi, good, bad)


def salvage_text(text: bytes) -> Parsed:
    """Every complete, valid event of ``text`` (a run of events, possibly cut off or damaged).

    The complete top-level objects are found by structure (strings and brackets, see ``structure``), so
    nested objects inside an event never pass for events; they are parsed in bulk, and a bad one is
    isolated by bisection. What is skipped is counted and described.
    """
    spans, junk = top_level_objects(text)
    events = [text[a:b] for a, b in spans]
    good: list[pl.DataFrame] = []
    bad: list[int] = []
    _bisect(events, 0, len(events), good, bad)
    lines: list[tuple[int, str]] = []
    for i in sorted(bad)[:MAX_SKIP_LINES]:
        snippet = events[i][:60].decode("utf-8", "replace").replace("\n", " ")
        lines.append((i, f"not a valid event: {snippet!r}"))
    for a, b in junk[: max(0, MAX_SKIP_LINES - len(lines))]:
        before = sum(1 for s, _ in spans if s < a)
        what = "an event cut off" if b == len(text.rstrip()) or text[a:b].lstrip()[:1] == b"{" else "bytes that are not an event"
        lines.append((before, f"{what} ({b - a:,} bytes at offset {a:,} of the piece)"))
    table = pl.concat(good) if good else empty_table()
    return Parsed(table, [], skipped=lines, skipped_count=len(bad) + len(junk), reader="salvage")


class _Pipeline:
    """Parses the pieces of one document in order, in parallel, merging pieces whose cut was wrong."""

    def __init__(self, splitter: Splitter, *, salvage: bool, limits: Limits, workers: int,
                 progress: Callable[[int, int], None] | None = None, projection: Projection | None = None,
                 head: HeadStart | None = None) -> None:
        self.splitter = splitter
        wanted = None if salvage else projection
        #: events cut out unparsed (rows), and the args columns read (None: all)
        self.projection = wanted if wanted is not None and wanted.drops_events else None
        self.args = wanted.args if wanted is not None else None
        self.keep_rx = self.projection.compiled() if self.projection is not None else None
        self.path = splitter.path
        self.salvage = salvage
        self.limits = limits
        self.workers = max(1, workers)
        #: the pieces' event rows (every column), and their flow arrows and metadata events (their own columns), split
        #: as each piece is parsed (``fastscan.Split``, :func:`split_phases`); counters are counted
        self.tables: list[pl.DataFrame] = []
        self.flow_tables: list[pl.DataFrame] = []
        self.meta_tables: list[pl.DataFrame] = []
        self.counters = 0
        #: the pieces' tables not yet merged into a block (``tables[first_loose:]``) and the bytes of their JSON
        self.first_loose = 0
        self.loose_bytes = 0
        #: bytes of decompressed text parsed since the C heap was last trimmed (gzip traces: :data:`TRIM_BYTES`)
        self.untrimmed = 0
        self.events_before = 0
        self.skipped: list[str] = []
        self.skipped_count = 0
        self.tail: dict[str, Any] = {}
        self.dropped = 0  #: events the projection cut out unparsed
        self.dropped_first_ts = float("inf")  #: earliest ts (µs) of the ``ph: X`` events cut out
        self.memory = 0.0
        self.budget = limits.memory()
        self.progress = progress
        #: pieces the line reader refused; after MAX_REFUSED it is not tried again in this document
        self.refused = 0
        #: what the line reader learned about this document (integer epoch µs, typed args)
        self.hints = ReadHints()
        #: the compiled scanner (:mod:`.fastscan`) is tried first on every piece when it was built
        self.native = fastscan_available()
        self.scan_hints = ScanHints()
        #: the pieces a head start scanned, where its scans are this parse's (``headstart.Spec``)
        self.head = head.claim(self._spec(splitter)) if head is not None and self.native else None
        if head is not None and self.head is None:
            head.close()
        #: pieces read by each reader (what ``--timings`` shows)
        self.readers: dict[str, int] = {}

    def _spec(self, splitter: Splitter) -> Spec:
        """What a head start's scans must share with this parse's (see :class:`~.headstart.Spec`)."""
        p = self.projection
        return Spec(head_identity(self.path), slots_of(self.args), p.drop_phases if p is not None else (),
                    p.drop_cats if p is not None else (), splitter.chunk_bytes)

    # -- parsing one piece ------------------------------------------------------------------
    def _parse(self, piece: Piece) -> Parsed:
        if not piece.final:
            ahead = self.head.take(piece.offset, len(piece.text)) if self.head is not None else None
            return self._events(piece.text, ahead)
        last: ChunkError | None = None
        below: int | None = None  # candidates after a known syntax error cannot parse: look only before it
        narrowed = True
        while narrowed:
            narrowed = False
            for pos, tail in tail_candidates(piece.text, self.splitter.doc.bare_array, self.path, below):
                head = bytes(piece.text[:pos]).rstrip()
                if not head.strip():
                    return Parsed(empty_table(), [], tail, reader="")
                try:
                    parsed = self._events(head)
                    parsed.tail = tail
                    return parsed
                except ChunkError as e:
                    last = e
                    if not e.syntax:  # a bad value or byte inside the events: no other end of the array helps
                        break
                    at = e.byte - 1 if e.byte is not None else None  # position in head ("[" + head was parsed)
                    if at is not None and at < pos and (below is None or at < below):
                        below, narrowed = at, True
                        break
        if self.salvage:
            return self._salvage_final(piece)
        if last is not None and (not last.syntax or last.byte is not None):
            raise last  # the text is broken at a known place (its message says where, or that it was cut off)
        raise ChunkError("the event array does not end properly", syntax=True)

    def _events(self, text: bytes | memoryview, ahead: tuple[Any, ...] | None = None) -> Parsed:
        """A run of whole events, projected when a projection applies, else parsed whole.

        It goes through the line reader (:mod:`.lines`); a single event, and text that reader refuses,
        through the JSON-array reader (errors and their locations come from there). The compiled scanner
        goes first (``ahead``: its outputs made by a head start); what it declines takes those readers."""
        if self.native:
            scanned = fastscan(text, self.args, self.projection, self.keep_rx, self.scan_hints, split=True, scanned=ahead)
            if scanned is not None:
                return Parsed(scanned.table, [], dropped=scanned.dropped, ordinals=scanned.ordinals,
                              dropped_first_ts=scanned.dropped_first_ts, reader="compiled scanner", split=scanned.split)
        if self.refused < MAX_REFUSED:
            got = self._lines(text)
            if got is not None:
                return got
        if self.projection is not None:
            got = self._projected(text)
            if got is not None:
                return got
        df, bad = parse_chunk(_bracket(text), self.args)
        return Parsed(df, bad)

    def _lines(self, text: bytes | memoryview) -> Parsed | None:
        nd = to_lines(text, self.projection, self.keep_rx)
        if nd is None:
            return None
        try:
            df, bad = parse_lines(nd.text, nd.lines, self.args, self.hints, nd.longest, nd.meta)
        except ChunkError:  # a cut inside an event, or bad input: this piece goes to the array reader
            self.refused += 1
            return None
        if bad and nd.dropped:
            return None  # the whole text is parsed, so bad values are reported at their positions
        return Parsed(df, bad, dropped=nd.dropped, ordinals=nd.ordinals, dropped_first_ts=nd.dropped_first_ts,
                      reader="line reader")

    def _projected(self, text: bytes | memoryview) -> Parsed | None:
        """Events ``text`` without those the projection drops; None when nothing was dropped or the kept
        text is not clean (then the whole text is parsed, so errors and their locations are as always)."""
        assert self.projection is not None
        cut = project(text, self.projection, self.keep_rx)
        if cut is None:
            return None
        try:
            df, bad = parse_chunk(_bracket(cut.text), self.args)
        except ChunkError:
            return None
        if bad:
            return None
        exact = df.height == len(cut.kept_ordinals)
        return Parsed(df, [], dropped=cut.dropped, ordinals=cut.kept_ordinals if exact else None,
                      dropped_first_ts=cut.dropped_first_ts)

    def _salvage_final(self, piece: Piece) -> Parsed:
        text = bytes(piece.text)
        for pos, tail in tail_candidates(text, self.splitter.doc.bare_array, self.path):
            out = salvage_text(text[:pos])
            out.tail = tail
            return out
        out = salvage_text(text)  # truncated: no end of the array at all
        out.tail = {}
        return out

    # -- driving the pool ---------------------------------------------------------------------
    def run(self, pieces: Iterator[Piece]) -> None:
        try:
            self._run(pieces)
        finally:
            if self.head is not None:  # (the head start's thread joined, what it scanned and was not taken freed)
                self.head.close()
                if self.head.taken:
                    self.readers[AHEAD] = self.head.taken

    def _run(self, pieces: Iterator[Piece]) -> None:
        with ThreadPoolExecutor(self.workers) as pool:
            window: deque[tuple[Piece, Future[Parsed]]] = deque()

            def fill() -> None:
                while len(window) < self.workers + 1:
                    piece = next(pieces, None)
                    if piece is None:
                        return
                    window.append((piece, pool.submit(self._parse, piece)))

            fill()
            while window:
                piece, fut = window.popleft()
                merges = 0
                while True:
                    try:
                        parsed = fut.result()
                        break
                    except ChunkError as e:
                        if piece.final or merges >= MAX_MERGES:
                            parsed = self._give_up(piece, e)
                            break
                        nxt_piece = window.popleft()[0] if window else next(pieces, None)
                        if nxt_piece is None:
                            parsed = self._give_up(piece, e)
                            break
                        piece = Piece(bytes(piece.text) + piece.sep + bytes(nxt_piece.text), piece.offset,
                                      nxt_piece.sep, nxt_piece.final)
                        fut = pool.submit(self._parse, piece)
                        merges += 1
                self._accept(parsed)
                self._merge_loose(len(piece.text))
                src = self.splitter.source
                if src.gz:
                    self.untrimmed += len(piece.text)
                    if self.untrimmed >= TRIM_BYTES:  # the freed pieces' text back to the system now, not at the end
                        trim_heap()
                        self.untrimmed = 0
                src.release(piece.offset + len(piece.text))
                if self.progress is not None:
                    done = src.consumed if src.gz else piece.offset + len(piece.text)
                    self.progress(done, src.stored_bytes)
                self.splitter.recycle(piece)  # (a streamed piece's buffer, for the pieces to come)
                fill()

    def _give_up(self, piece: Piece, e: ChunkError) -> Parsed:
        if self.salvage:
            if piece.final:
                return self._salvage_final(piece)
            return salvage_text(bytes(piece.text))
        raise _trace_error(self.path, e, _locate(e, piece, self.events_before))

    def _accept(self, parsed: Parsed) -> None:
        if parsed.reader:
            self.readers[parsed.reader] = self.readers.get(parsed.reader, 0) + 1
        table = parsed.table
        if parsed.bad:
            rows = np.unique(np.concatenate([b.rows for b in parsed.bad]))
            if not self.salvage:
                b = parsed.bad[0]
                raise TraceError(self.path, f"$.traceEvents[{self.events_before + int(b.rows[0])}].{b.field} {b.reason} "
                                            f"({len(b.rows):,} such events)")
            for b in parsed.bad:
                for r in b.rows[: max(0, MAX_SKIP_LINES - len(self.skipped))]:
                    self.skipped.append(f"skipped $.traceEvents[{self.events_before + int(r)}]: .{b.field} {b.reason}")
            self.skipped_count += len(rows)
            keep = np.ones(table.height, dtype=bool)
            keep[rows] = False
            table = table.filter(pl.Series(keep))
        for rel, why in parsed.skipped[: max(0, MAX_SKIP_LINES - len(self.skipped))]:
            self.skipped.append(f"skipped $.traceEvents[{self.events_before + rel}]: {why}")
        self.skipped_count += parsed.skipped_count
        if parsed.tail is not None:
            self.tail = parsed.tail
        first = self.events_before
        table = _with_idx(table, parsed, first)
        split = parsed.split
        self.events_before += parsed.table.height + parsed.skipped_count + parsed.dropped + (split.rows if split else 0)
        self.dropped += parsed.dropped
        self.dropped_first_ts = min(self.dropped_first_ts, parsed.dropped_first_ts)
        if split is not None:  # (by the scanner)
            flows, metas, counters = split.flows_at(first), split.metas_at(first), split.counters
        else:
            table, flows, metas, counters = split_phases(table)
        self.counters += counters
        for part, kept in ((flows, self.flow_tables), (metas, self.meta_tables)):
            if part is not None:
                kept.append(part)
                self.memory += part.estimated_size()
        self.memory += table.estimated_size()
        if self.memory > self.budget:
            raise TraceError(
                self.path,
                f"the decoded events outgrow the memory budget ({self.memory / 1e9:.1f} GB of tables after "
                f"{self.splitter.source.json_bytes / 1e9:.1f} GB of JSON from a {self.splitter.source.stored_bytes / 1e6:,.0f} MB "
                f"file; budget {self.budget / 1e9:.1f} GB): raise it with --max-memory, or this may be a decompression bomb",
            )
        self.tables.append(table)

    def _merge_loose(self, text_bytes: int) -> None:
        """Count ``text_bytes`` more of JSON parsed into the loose pieces; merge them into a block past
        :data:`BLOCK_BYTES`."""
        self.loose_bytes += text_bytes
        if self.loose_bytes >= BLOCK_BYTES and len(self.tables) > self.first_loose:
            self.tables[self.first_loose:] = [merge_pieces(self.tables[self.first_loose:])]
            self.first_loose = len(self.tables)
            for kept, columns in ((self.flow_tables, FLOW_COLUMNS), (self.meta_tables, META_COLUMNS)):
                if len(kept) > 1:
                    kept[:] = [stacked(kept, columns)]
            self.loose_bytes = 0
            trim_heap()  # the pieces' numpy buffers (C heap) back to the system


_ARG_COLUMNS = frozenset(f.column for f in ARG_FIELDS)


def split_phases(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None, int]:
    """A piece's table (with ``idx``) as (its event rows, its flow arrows ("s", "f", "t") in :data:`FLOW_COLUMNS`,
    its metadata events ("M") in :data:`META_COLUMNS`, its count of counters ("C"), which are dropped); None where a
    piece has no such row. Split as each piece arrives, the arrows (a third of a Kineto trace's rows: two per kernel
    launch) hold their own eight columns until the pieces are joined, not a row of every column."""
    if not table.height or "ph" not in table.columns:
        return table, None, None, 0
    ph = table.get_column("ph")
    is_flow = ph.is_in(FLOW_PHASES).fill_null(False)
    is_meta = (ph == "M").fill_null(False)
    is_counter = (ph == "C").fill_null(False)
    n_flow, n_meta, n_counter = int(is_flow.sum()), int(is_meta.sum()), int(is_counter.sum())
    if not (n_flow or n_meta or n_counter):
        return table, None, None, 0
    flows = table.filter(is_flow).select(c for c in FLOW_COLUMNS if c in table.columns) if n_flow else None
    metas = table.filter(is_meta).select(c for c in META_COLUMNS if c in table.columns) if n_meta else None
    rest = table.filter(~(is_flow | is_meta | is_counter))
    return rest, flows, metas, n_counter


def stacked(tables: list[pl.DataFrame], columns: list[str]) -> pl.DataFrame:
    """``columns`` of ``tables`` one under the other, each contiguous (a column a table lacks: null in its rows; see
    :func:`_joined`); an empty table of the event schema's types when there is none."""
    if not tables:
        return empty_table().with_columns(pl.lit(0, dtype=pl.Int64).alias("idx")).select(columns)
    heights = [t.height for t in tables]
    return pl.DataFrame([_joined(c, [t.get_column(c) if c in t.columns else None for t in tables], heights, rechunk=True)
                         for c in columns])


def _with_idx(table: pl.DataFrame, parsed: Parsed, first: int) -> pl.DataFrame:
    """Add ``idx``: each row's position in the file's event array (rows dropped by salvage keep their gaps)."""
    if parsed.ordinals is not None:  # a projected piece whose events were all found: exact positions
        return _beside(table, pl.Series("idx", first + parsed.ordinals.astype(np.int64)))
    idx = np.arange(first, first + parsed.table.height, dtype=np.int64)
    if table.height != parsed.table.height:  # bad rows were filtered out above
        keep = np.ones(parsed.table.height, dtype=bool)
        keep[np.unique(np.concatenate([b.rows for b in parsed.bad]))] = False
        idx = idx[keep]
    return _beside(table, pl.Series("idx", idx))


def _beside(table: pl.DataFrame, column: pl.Series) -> pl.DataFrame:
    """``table`` with ``column`` added (or replaced): put beside the others without a query of polars' engine, which
    ``with_columns`` makes (~35 µs a piece, on the thread that takes the pieces in order)."""
    return table.hstack([column]) if column.name not in table.columns else table.with_columns(column)


#: a gzip trace's C heap is trimmed after this many bytes of decompressed text were parsed: its pieces are buffers
#: from the C heap, freed but kept mapped until a trim (200 MB replicas of six classes gzipped: peak RSS -12 to -25%,
#: the same time; a trim after every 8 MB piece: v100 -17% instead of -13%, but 5% slower)
TRIM_BYTES = 16 << 20
#: the parsed pieces' tables are merged into one block per this many bytes of their JSON, so that a huge trace's
#: thousands of per-piece buffers do not all wait for the final concatenation (session 15: they fragmented the
#: allocators' pages, 1 GB beyond the tables at 10 GB). Each merge copies its pieces, which are copied again by the
#: final concatenation. Session 23, alternating runs: with the command's allocator settings (``oneshot.tune_allocators``)
#: blocks of 256 MB and of 2 GB give the same time and peak (1 GB replicas within noise; 10 GB: 3.74-3.82 against
#: 3.79-3.80 GB, 40-43 s). Without them, as in a notebook that imported polars first, 256 MB blocks cost the 1 GB
#: replicas 3-10% of their time and 2-15% of their peak (a100: 1.08-1.16x -> 1.01-1.04x its JSON) and the 10 GB replica
#: 3.99-4.16 GB against 3.76-3.81. So a trace of up to 2 GB is joined once, at the end
BLOCK_BYTES = 2 << 30
#: from this many rows on, the pieces' columns are joined one at a time (see ``_join_pieces``): two columns in
#: flight held 0.13 GB more at the peak of a 1.1 GB trace's cold analyze (4.8 M events: 1.07 -> 0.94x the JSON, the
#: same time); below it, two at a time save ~13 ms on a 200 MB trace
SERIAL_JOIN_ROWS = 2_000_000


def merge_pieces(tables: list[pl.DataFrame]) -> pl.DataFrame:
    """One table (contiguous columns) from consecutive pieces' tables. A column some pieces leave out (an args
    column they had no value of) is null in their rows; one all of them leave out stays out (the final
    concatenation makes it one null literal, as it does for a piece)."""
    out = stacked(tables, list(dict.fromkeys(c for t in tables for c in t.columns)))
    tables.clear()
    return out


def _joined(name: str, parts: list[pl.Series | None], heights: list[int], *, rechunk: bool) -> pl.Series:
    """One column from the pieces' (a piece without it: ``None``, null in its ``heights`` rows, of the type the
    other pieces give it, else the event schema's)."""
    dtype = next((p.dtype for p in parts if p is not None), None) or EVENT_SCHEMA[name]
    return pl.concat([nulls(n, dtype).alias(name) if p is None else p
                      for p, n in zip(parts, heights)], rechunk=rechunk)


@dataclass
class _Joined:
    """The pieces joined (:func:`_join_pieces`): the event rows, the flow arrows and metadata events, and the count of
    counters (each piece's split as it was parsed: :class:`.fastscan.Split`, :func:`split_phases`)."""

    events: pl.DataFrame  #: everything but flow arrows, metadata and counters
    flows: pl.DataFrame
    metas: pl.DataFrame
    counters: int


def _join_pieces(tables: list[pl.DataFrame], columns: list[str], unread: frozenset[str] = frozenset(),
                 flow_tables: list[pl.DataFrame] | None = None, meta_tables: list[pl.DataFrame] | None = None,
                 counters: int = 0) -> _Joined:
    """One contiguous table from the pieces' event rows (their flow arrows, metadata and counters were split off as
    they came: by the compiled scanner, else :func:`split_phases`), column by column, two columns at a time on two
    threads (the pieces' buffers are freed as each column is built, so this never holds two copies of the table;
    polars copies without the GIL: 43 -> 30 ms for a 206 MB trace); the flow arrows and metadata events stacked
    likewise. Contiguous columns keep the joins and ``with_columns`` of linking from copying the whole table again.
    Args columns in ``unread`` (a projection does not read them: null in every piece) or with no value at all become
    one null literal each, which takes no memory however long the table (a materialized null Int64 column of a 200
    MB trace is 4 MB). A piece may leave out a column it did not read (the metadata args of a piece without metadata
    events): its rows are null there."""
    per_piece = [dict(zip(t.columns, t.get_columns())) for t in tables]
    heights = [t.height for t in tables]
    tables.clear()
    for d in per_piece:
        for c in unread:
            d.pop(c, None)
    out: dict[str, pl.Series] = {}
    literal = [c for c in columns if c in unread]  # event columns made one null literal each
    # (the compiled scanner leaves an args column out of a piece where it has no value)
    literal_if_absent = frozenset(c for c in columns if c in _ARG_COLUMNS)

    def build(c: str) -> None:
        parts = [d.pop(c, None) for d in per_piece]
        if c in literal_if_absent and all(p is None for p in parts):  # no piece has a value: nothing to join
            literal.append(c)
            return
        col = _joined(c, parts, heights, rechunk=True)
        del parts
        # (nulls in every event row, e.g. no communication in this trace: values only in the flow or metadata rows
        # split off count too; such columns were 235 MB of the 10 GB replica's table at the end of its parse)
        if c in _ARG_COLUMNS and col.null_count() == col.len():
            literal.append(c)
        else:
            out[c] = col
        size = int(col.estimated_size())  # (about what its parts held in the heap)
        del col
        with freed_lock:  # a trim per 16 MB of parts freed (TRIM_MIN_BYTES: none for a small trace)
            freed[0] += size
            if freed[0] < TRIM_MIN_BYTES:
                return
            freed[0] = 0
        trim_heap()

    freed, freed_lock = [0], threading.Lock()

    todo = [c for c in columns if c not in unread]
    # columns are independent and polars releases the GIL while it copies: two at a time, but one at a time on
    # a large trace (each column in flight holds its parts and its copy: 0.5 GB a column at 10 GB)
    with ThreadPoolExecutor(2 if sum(heights) < SERIAL_JOIN_ROWS else 1) as pool:
        # the flow arrows first, beside the first columns (stacked after them on this thread, 7-10 ms of a 200 MB
        # trace's join: one core idle meanwhile)
        flows = pool.submit(stacked, flow_tables or [], FLOW_COLUMNS)
        list(pool.map(build, todo))
    per_piece.clear()
    events = pl.DataFrame({c: out[c] for c in columns if c in out})
    if literal:
        events = events.with_columns(pl.lit(None, dtype=EVENT_SCHEMA[c]).alias(c) for c in literal).select(columns)
    return _Joined(events, flows.result(), stacked(meta_tables or [], META_COLUMNS), counters)


def _trace_error(path: str, e: ChunkError, where: str) -> TraceError:
    msg = str(e)
    low = msg.lower()
    if "truncated" in low or "does not end" in low:
        return TraceError(path, f"truncated JSON ({msg}); the file may have been cut off mid-write, try --salvage")
    if "utf-8" in low:
        return TraceError(path, f"invalid UTF-8 in JSON ({msg}) at {where}")
    if "nested too deeply" in low:
        return TraceError(path, f"{msg} at {where}")
    if e.event is not None or "expected" in low:
        detail = msg.split(" - at `", 1)[0]
        return TraceError(path, f"malformed event field: {detail} at {where}")
    return TraceError(path, f"not valid JSON ({msg}) at {where}")


def _check_ranges(table: pl.DataFrame, path: str, salvage: bool) -> tuple[pl.DataFrame, list[str], int]:
    """``ts + dur`` must fit int64 ns (each alone was checked while parsing)."""
    over = table.select(((pl.col("dur") > 0) & (pl.col("ts") > _I64_MAX - pl.col("dur"))).alias("o"))["o"]
    n = int(over.sum())
    if not n:
        return table, [], 0
    first = int(np.flatnonzero(over.to_numpy())[0])
    reason = "'ts' + 'dur' does not fit int64 nanoseconds"
    if not salvage:
        raise TraceError(path, f"$.traceEvents[{first}] (counting decoded events): {reason} ({n:,} such events)")
    return table.filter(~over), [f"skipped $.traceEvents[{first}]: {reason}"], n


def _whole_document(source: TraceSource, limits: Limits) -> tuple[dict[str, Any], bytes]:
    """Decode the top-level object in one piece (odd layouts): (metadata, the event array's inner text)."""
    path = source.path
    data: mmap.mmap | bytes | memoryview | None = source.plain
    if data is None:
        chunks = []
        total = 0
        for b in source.blocks():
            total += len(b)
            if total > limits.memory():
                raise TraceError(path, f"decompressed size exceeds the memory budget ({limits.memory() / 1e9:.1f} GB); "
                                       "raise it with --max-memory")
            chunks.append(bytes(b))
        data = b"".join(chunks)
    if bytes(memoryview(data)[:len(UTF8_BOM)]) == UTF8_BOM:  # (read as a blank, as the pieces' reader does)
        data = memoryview(data)[len(UTF8_BOM):]
    head = bytes(memoryview(data)[:4096]).lstrip()[:1]
    if not head:
        raise TraceError(path, "file is empty")
    if head not in (b"{", b"["):
        raise TraceError(path, "not JSON: expected a JSON object with 'traceEvents' (or an event array)")
    try:
        if head == b"[":
            raw_events = msgspec.json.decode(data, type=msgspec.Raw)
            meta: dict[str, Any] = {}
        else:
            top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
            if "traceEvents" not in top:
                raise TraceError(path, "JSON object has no 'traceEvents' key: not a PyTorch/Kineto trace")
            raw_events = top["traceEvents"]
            meta = decode_metadata(top, path)
    except msgspec.DecodeError as e:
        msg = str(e)
        if "truncated" in msg.lower():
            raise TraceError(path, f"truncated JSON ({msg}); the file may have been cut off mid-write, try --salvage") from None
        if "utf-8" in msg.lower():
            raise TraceError(path, f"invalid UTF-8 in JSON ({msg})") from None
        raise TraceError(path, f"not valid JSON ({msg})") from None
    except msgspec.ValidationError as e:
        raise TraceError(path, f"not a JSON object of trace events ({e})") from None
    except RecursionError:
        raise TraceError(path, "JSON is nested too deeply (over 1000 levels)") from None
    except UnicodeDecodeError as e:
        raise TraceError(path, f"invalid UTF-8 in JSON ({e.reason} at byte {e.start})") from None
    ev = bytes(raw_events).strip()
    if not ev.startswith(b"["):
        raise TraceError(path, "'traceEvents' is not an array")
    return meta, ev


def piece_bytes(salvage: bool = False) -> int:
    """The size (bytes of JSON text) of the pieces a parse cuts: the compiled scanner's (``document.CHUNK_BYTES``), or
    the other readers' smaller ones where it is not available or ``salvage`` reads a damaged file."""
    if fastscan_available() and not salvage:
        return document.CHUNK_BYTES
    return document.reader_chunk_bytes()


def parse_source(source: TraceSource, *, salvage: bool = False, limits: Limits | None = None,
                 workers: int | None = None, progress: Callable[[int, int], None] | None = None,
                 projection: Projection | None = None, head: HeadStart | None = None) -> RawTrace:
    """Decode an opened trace into an unlinked event table.

    ``projection``: skip the events it drops without parsing them (see :mod:`.project`); ignored with
    ``salvage``. ``RawTrace.projected_out`` counts them. ``head``: the first pieces of the file scanned ahead
    (:mod:`.headstart`), taken where its scans are this parse's; closed here either way."""
    limits = limits or Limits()
    # two more threads than cores: a worker's Python steps hold the GIL between its numpy and polars calls,
    # and the spare threads keep the cores busy meanwhile (2 cores: 1.5 -> 1.7 cores used, parse ~10% faster)
    workers = workers if workers is not None else min(usable_cores() + 2, 8)
    chunk_bytes = piece_bytes(salvage)

    def pipeline(head: HeadStart | None) -> tuple[Splitter, _Pipeline]:
        splitter = Splitter(source, limits, salvage=salvage, chunk_bytes=chunk_bytes)
        return splitter, _Pipeline(splitter, salvage=salvage, limits=limits, workers=workers, progress=progress,
                                   projection=projection, head=head)

    splitter, pipe = pipeline(head)
    try:
        if isinstance(pipe.head, GzClaim):  # (a gzipped trace inflated and scanned ahead: every piece comes from it)
            try:
                pipe.run(pipe.head.pieces(splitter))
            except HeadStartFailed:  # it stopped where this parse reads otherwise: the file is read again, whole
                splitter, pipe = pipeline(None)
                pipe.run(splitter.pieces())
        else:
            pipe.run(splitter.pieces())
        meta = {**splitter.doc.metadata, **pipe.tail}
    except NeedsWholeDocument:
        meta, events_text = _whole_document(source, limits)
        inner = events_text[1:-1] if events_text.endswith(b"]") else events_text[1:]
        whole = TraceSource(source.path, inner, gz=False)
        sub = Splitter(whole, limits, salvage=salvage, chunk_bytes=chunk_bytes)
        sub.doc.bare_array = True
        pipe = _Pipeline(sub, salvage=salvage, limits=limits, workers=workers, projection=projection)
        pipe.run(_bare_pieces(sub, inner))
    event_cols = ["idx", *(c for c in EVENT_SCHEMA if c not in ("meta_name", "sort_index"))]
    empty = empty_table().with_columns(pl.lit(0, dtype=pl.Int64).alias("idx"))
    unread = frozenset(f.column for f in ARG_FIELDS if pipe.args is not None and f.column not in pipe.args
                       and f.column not in LOADER_ARGS)
    parts = (_join_pieces(pipe.tables, event_cols, unread, pipe.flow_tables, pipe.meta_tables, pipe.counters)
             if pipe.tables else _Joined(empty.select(event_cols), empty.select(FLOW_COLUMNS), empty.select(META_COLUMNS), 0))
    table, flows, metas = parts.events, parts.flows, parts.metas
    table, more, n_over = _check_ranges(table, source.path, salvage)
    skipped = pipe.skipped + more
    skipped_count = pipe.skipped_count + n_over
    if skipped_count > len(skipped):
        skipped.append(f"... {skipped_count:,} events skipped in all")
    salvaged = table.height + flows.height + metas.height + parts.counters if salvage else None
    return RawTrace(table.select(event_cols), meta, flows=flows, meta_events=metas, salvaged=salvaged,
                    skipped=skipped if salvage else [], projected_out=pipe.dropped,
                    projected_first_ts=pipe.dropped_first_ts, readers=dict(pipe.readers))


def _bare_pieces(splitter: Splitter, inner: bytes) -> Iterator[Piece]:
    """Pieces of an array's inner text that is known to be whole (whole-document path)."""
    from .document import _BOUNDARY

    n = len(inner)
    pos = 0
    while pos < n:
        cut = pos + splitter.chunk_bytes
        m = _BOUNDARY.search(inner, cut) if cut < n else None
        if m is None:
            break
        yield Piece(inner[pos : m.start() + 1], pos, inner[m.start() + 1 : m.end() - 1])
        pos = m.end() - 1
    yield Piece(inner[pos:] + b"]", pos, final=True)
