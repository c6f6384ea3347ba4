"""Split a Kineto/Chrome JSON document into metadata and event-aligned chunks, without parsing events.

A document is ``{...metadata..., "traceEvents": [ev, ev, ...], ...metadata...}`` (or a bare array of
events). The text before the array is decoded as metadata; the array is cut at event boundaries
(``}`` ``,`` ``{``) into chunks of about ``chunk_bytes``; the text after it is decoded when the stream
ends. A boundary found inside a string makes the chunk before it invalid JSON, which the parser sees
and repairs by merging the chunk with the next one (see :mod:`kernscope.load.kineto`).

Plain files are memory-mapped: chunks are zero-copy views joined once with their brackets. Gzip
files arrive as decompressed blocks and are cut as they stream, holding at most two chunks.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import TraceError
from .scanslots import CHUNK_BYTES as CHUNK_BYTES  # (re-exported: the parse's piece size, monkeypatched in tests)
from .scanslots import EVENTS_KEY as _EVENTS_KEY
from .scanslots import HEAD_LIMIT as HEAD_LIMIT
from .scanslots import UTF8_BOM as UTF8_BOM
from .source import BLOCK_BYTES, Limits, TraceSource

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
#: the other readers' pieces (polars' JSON reader, the line reader): at most this (their peak grows with the piece)
READER_CHUNK_BYTES = 4 << 20


def reader_chunk_bytes() -> int:
    """The other readers' piece size: ``READER_CHUNK_BYTES``, or ``CHUNK_BYTES`` where that is smaller."""
    return min(CHUNK_BYTES, READER_CHUNK_BYTES)


@dataclass
class Piece:
    """A run of whole events: ``text`` (no brackets), its byte offset in the document, and the text that
    separated it from the next piece (to rejoin them when the cut proves to be inside a string)."""

    text: bytes | memoryview
    offset: int
    sep: bytes = b","
    final: bool = False  #: the last piece: it also holds the array's end and what follows it
    #: a streamed piece's buffer (``text`` is a view of it), which :meth:`Splitter.recycle` takes back once parsed
    buffer: bytearray | None = field(default=None, repr=False, compare=False)


@dataclass
class Document:
    """Metadata found so far (head, then tail once the last piece is split) and the pieces."""

    path: str
    metadata: dict[str, Any] = field(default_factory=dict)
    bare_array: bool = False


def decode_metadata(raw: dict[str, msgspec.Raw], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k == "traceEvents":
            continue
        try:
            out[k] = msgspec.json.decode(v)
        except msgspec.DecodeError as e:
            raise TraceError(path, f"metadata key {k!r} is not valid JSON ({e})") from None
        except RecursionError:
            raise TraceError(path, f"metadata key {k!r} is nested too deeply") from None
        except UnicodeDecodeError as e:
            raise TraceError(path, f"metadata key {k!r} has invalid UTF-8 ({e.reason})") from None
    return out


def _head(text: bytes, path: str) -> tuple[dict[str, Any], bool, int] | None:
    """(metadata before the events, bare array?, offset where the events begin) or None if not found yet."""
    return _HeadFinder(path, limit=len(text))(text)


#: the ``"`` that closes ``"traceEvents"`` is this many bytes after the one that opens it
_KEY_QUOTES = len(b'"traceEvents"') - 1
#: what may follow that closing quote before the ``[``
_KEY_GAP = b" \t\n\r\x0b\x0c:"


class _HeadFinder:
    """:func:`_head` of a growing buffer (a stream's first blocks; ``_head`` is one call on the whole text) that looks
    at each byte about once: searching
    the whole buffer again after each 1 MB block was quadratic (60 MB of blanks, or of one metadata string, before
    the events took 5.8 s). The first non-blank byte is searched from where the last search ended, and the
    ``"traceEvents"`` key from where one that the text so far ends inside would begin: within the last
    :data:`_KEY_QUOTES` bytes, or, when the text ends in a quote and then only blanks and colons, at that quote's
    :data:`_KEY_QUOTES` bytes before."""

    def __init__(self, path: str, limit: int = HEAD_LIMIT) -> None:
        self.path = path
        self.limit = limit  #: bytes of the buffer searched at most
        self.first = -1  #: the first non-blank byte (-1: none yet)
        self.seen = 0  #: bytes looked at
        self.solid = -1  #: the last byte looked at that is not in _KEY_GAP
        self.key_from = 0  #: no "traceEvents" key starts before this

    def __call__(self, buf: bytes | bytearray | memoryview) -> tuple[dict[str, Any], bool, int] | None:
        n = min(len(buf), self.limit)
        new = bytes(buf[self.seen : n])  # the bytes not looked at yet
        solid = new.rstrip(_KEY_GAP)
        if solid:
            self.solid = self.seen + len(solid) - 1
        if self.first < 0:
            # a UTF-8 byte order mark first (Windows tools write one) is read as a blank, as RFC 8259 allows
            bom = len(UTF8_BOM) if self.seen == 0 and new.startswith(UTF8_BOM) else 0
            lead = len(new) - len(new[bom:].lstrip())
            if lead == len(new):
                self.seen = n
                return None
            self.first = self.key_from = self.seen + lead
        self.seen = n
        if buf[self.first] == ord("["):
            return {}, True, self.first + 1
        if buf[self.first] != ord("{"):
            raise TraceError(self.path, "not JSON: expected a JSON object with 'traceEvents' (or an event array)")
        k = _EVENTS_KEY.search(buf, self.key_from, n)
        if k is None:
            quote = self.solid >= 0 and buf[self.solid] == ord('"')
            self.key_from = max(self.key_from, (self.solid if quote else n) - _KEY_QUOTES)
            return None
        return _metadata_before(bytes(buf[self.first : k.start()]), k.end(), self.path)


def _metadata_before(text: bytes, events_at: int, path: str) -> tuple[dict[str, Any], bool, int] | None:
    """The metadata keys of ``text`` (the document before its ``"traceEvents"`` key), the events starting at
    ``events_at``; None when they do not decode as the start of an object ("traceEvents" inside a string, or an
    odd layout: the caller falls back)."""
    head = text.rstrip().rstrip(b",")
    try:
        raw = _TOP.decode(head + b"}")
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    except RecursionError:
        raise TraceError(path, "metadata before 'traceEvents' is nested too deeply") from None
    return decode_metadata(raw, path), False, events_at


_BLANK = b" \t\r\n"


def _last_nonblank(b: bytes, end: int) -> int:
    """Index of the last non-blank byte of ``b[:end]`` (-1 if none), without copying the prefix: windows that double
    from the end, stripped in C (a loop per byte took 5 s over 30 MB of blanks at a trace's end)."""
    width = 64
    while end > 0:
        lo = max(0, end - width)
        kept = b[lo:end].rstrip(_BLANK)
        if kept:
            return lo + len(kept) - 1
        end, width = lo, width * 2
    return -1


def _first_nonblank(b: bytes, start: int, stop: int) -> int:
    """Index of the first non-blank byte of ``b[start:stop]`` (``stop`` if none), as :func:`_last_nonblank` does."""
    width = 64
    while start < stop:
        hi = min(stop, start + width)
        window = b[start:hi]
        lead = len(window) - len(window.lstrip(_BLANK))
        if lead < len(window):
            return start + lead
        start, width = hi, width * 2
    return stop


def tail_candidates(text: bytes | memoryview, bare: bool, path: str,
                    below: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Possible ends of the event array in the last piece, latest first: (position of its ``]``, metadata after it).

    A candidate must be a ``]`` after an event's ``}`` (or at the array start), followed by the end of
    the document (``}``) or by more keys that decode as the rest of an object. The caller confirms a
    candidate by parsing the events before it. ``below``: only candidates before this position (the caller
    learnt that the text after it cannot be whole events). Each candidate costs O(1) until the text after
    it looks like the end of the document, so a damaged piece with many ``]`` is not quadratic.
    """
    b = bytes(text) if isinstance(text, memoryview) else text
    last = _last_nonblank(b, len(b))
    pos = len(b) if below is None else min(below, len(b))
    tries = 0
    while tries < 100_000:
        pos = b.rfind(b"]", 0, pos)
        if pos < 0:
            return
        tries += 1
        j = _last_nonblank(b, pos)
        if j >= 0 and b[j] != ord("}"):
            continue
        k = _first_nonblank(b, pos + 1, last + 1)
        if bare:
            if k > last:
                yield pos, {}
            continue
        if k == last and b[k] == ord("}"):
            yield pos, {}
            continue
        if k > last or b[k] != ord(",") or b[last] != ord("}"):
            continue
        try:
            raw = _TOP.decode(b"{" + b[k + 1 : last + 1])
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError):
            continue
        yield pos, decode_metadata(raw, path)


class Splitter:
    """Cuts the event array of a source into pieces."""

    def __init__(self, source: TraceSource, limits: Limits, *, chunk_bytes: int | None = None, salvage: bool = False) -> None:
        self.source = source
        self.path = source.path
        self.limits = limits
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.salvage = salvage
        self.doc = Document(self.path)
        self._buffers: _Buffers | None = None  #: a streamed document's piece buffers (_stream)

    def pieces(self) -> Iterator[Piece]:
        plain = self.source.plain
        if plain is not None:
            yield from self._plain(plain)
        else:
            yield from self._stream()

    # -- memory-mapped files ---------------------------------------------------------------------
    def _plain(self, data: Any) -> Iterator[Piece]:
        mv = memoryview(data)
        found = None
        window = 1 << 16
        head = _HeadFinder(self.path, limit=len(mv))  # each larger window searched from where the last one ended
        while found is None:  # the array starts within the first kilobytes in Kineto's layout
            found = head(mv[:window])
            if found is None and (window >= HEAD_LIMIT or window >= len(mv)):
                raise NeedsWholeDocument("no 'traceEvents' array found near the start")
            window *= 8
        self.doc.metadata, self.doc.bare_array, start = found
        n = len(mv)
        pos = start
        while pos < n:
            cut = pos + self.chunk_bytes
            if cut >= n:
                break
            m = _Boundaries(cut).find(data)  # (the stream's search, here over the whole mapped file at once)
            if m is None:
                break
            close, brace = m
            if close - pos > self.chunk_bytes + self.limits.max_event_bytes:
                raise TraceError(self.path, f"an event is larger than {self.limits.max_event_bytes >> 20} MB "
                                            f"(near byte {cut:,}); this is not a Kineto trace or it is corrupt")
            yield Piece(mv[pos : close + 1], pos, bytes(mv[close + 1 : brace]))
            pos = brace
        yield Piece(mv[pos:n], pos, final=True)

    # -- streamed (gzip) ------------------------------------------------------------------------
    def _stream(self) -> Iterator[Piece]:
        blocks = self.source.blocks(salvage=self.salvage)
        buf = bytearray()
        start = None
        head = _HeadFinder(self.path)
        for block in blocks:
            buf += block
            found = head(buf)
            if found is not None:
                self.doc.metadata, self.doc.bare_array, start = found
                break
            if len(buf) > HEAD_LIMIT:
                raise NeedsWholeDocument("no 'traceEvents' array found near the start")
        if start is None:
            if not bytes(buf).strip():
                raise TraceError(self.path, "file is empty")
            raise NeedsWholeDocument("no 'traceEvents' array found")
        offset = start  # document offset of the buffer's first byte
        # the text is written into buffers of one size, each a piece, and each taken back once its piece is parsed
        # (recycle): a new buffer a piece was fresh memory to fault in, 8 MB at a time (a 216 MB gzip: 89 k more page
        # faults than the same file plain, and ~0.3 s of CPU)
        pool = self._buffers = _Buffers(self.chunk_bytes + 2 * BLOCK_BYTES)
        fill = _Fill(pool)
        fill.add(memoryview(buf)[start:])
        del buf
        cuts = _Boundaries(self.chunk_bytes)
        while True:
            # cut what is there, the first block and the last too (a small file arrives as one or two blocks: its
            # pieces still parse in parallel); the array's end never follows a boundary, so it stays in the final piece
            while fill.n > self.chunk_bytes:
                m = cuts.find(fill.data, fill.n)
                if m is None:
                    if fill.n > self.chunk_bytes + self.limits.max_event_bytes:
                        raise TraceError(self.path, f"an event is larger than {self.limits.max_event_bytes >> 20} MB "
                                                    f"(near byte {offset:,}); this is not a Kineto trace or it is corrupt")
                    break
                cuts = _Boundaries(self.chunk_bytes)
                # the buffer itself becomes the piece (cut after its last event): no copy of the piece's text; what
                # follows the cut, under a block, starts the next buffer
                close, brace = m
                data, n = fill.data, fill.n
                sep = bytes(data[close + 1 : brace])
                fill.restart(memoryview(data)[brace:n])
                yield Piece(memoryview(data)[: close + 1], offset, sep, buffer=data)
                offset += brace
            nxt = next(blocks, None)
            if nxt is None:
                break
            fill.add(nxt)
        yield Piece(memoryview(fill.data)[: fill.n], offset, final=True)

    def recycle(self, piece: Piece) -> None:
        """Take back a parsed piece's buffer for the next pieces (streamed pieces; the caller holds no view of its
        text any more). A buffer something still views (an array of the text) is left to be freed, not reused."""
        if piece.buffer is None or self._buffers is None:
            return
        if isinstance(piece.text, memoryview):
            try:
                piece.text.release()
            except BufferError:
                return
        self._buffers.give(piece.buffer)


class _Buffers:
    """Buffers of one size for a stream's pieces: :meth:`take` one (a free one, else a new one), :meth:`give` it back
    once no one views it. At most :data:`KEPT_BUFFERS` wait free."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free: list[bytearray] = []

    def take(self) -> bytearray:
        return self.free.pop() if self.free else bytearray(self.size)

    def give(self, buf: bytearray) -> None:
        if len(buf) != self.size or len(self.free) >= KEPT_BUFFERS:
            return  # (one grown for a long event: not this pool's size)
        try:  # a bytearray something still views cannot change size: a one-byte change that reallocates nothing tells
            last = buf.pop()
        except BufferError:
            return
        buf.append(last)
        self.free.append(buf)


#: free piece buffers a stream keeps for its next pieces (the pieces in flight are the parser's workers + 1)
KEPT_BUFFERS = 4


class _Fill:
    """The text of the piece being gathered: ``data[:n]``. The first piece's buffer grows with its text, as a small
    document needs no more (a buffer of a piece's size for a 2.5 MB gzip cost ~25 ms to allocate and fault in); the
    pieces after a cut fill a buffer from ``pool``. An event that runs past a pool buffer moves the text to a buffer
    that grows again (not the pool's)."""

    def __init__(self, pool: _Buffers) -> None:
        self.pool = pool
        self.data = bytearray()
        self.n = 0
        self.pooled = False  #: ``data`` is a pool buffer (of its fixed size); else exactly the text (``n == len``)

    def add(self, text: bytes | bytearray | memoryview) -> None:
        k = len(text)
        if self.pooled and self.n + k > len(self.data):
            self.data, self.pooled = bytearray(memoryview(self.data)[: self.n]), False
        if self.pooled:
            self.data[self.n : self.n + k] = text
        else:
            self.data += text
        self.n += k

    def restart(self, rest: memoryview) -> None:
        """Start the next piece with ``rest`` (the text after a cut, a view of the current buffer) in a pool buffer."""
        self.data, self.pooled, self.n = self.pool.take(), True, 0
        self.add(rest)
        rest.release()


#: what may follow an event's "}" up to a boundary's end: blanks, a comma, blanks (a prefix of _BOUNDARY's rest)
_BOUNDARY_TAIL = re.compile(rb"\s*(,\s*)?")


class _Boundaries:
    """The first boundary between events (``}``, blanks, ``,``, blanks, ``{``) at or after ``start`` of a buffer (a
    mapped file, whole, or a stream's growing buffer), each byte looked at about once: searching a stream's buffer
    again after each block was quadratic (320 MB of blanks between two events of a gzip took 19 s to refuse). When a
    search finds none, the text may end inside one: it begins at the last ``}`` and only blanks and a comma follow
    (:data:`_BOUNDARY_TAIL`); that is kept, and the next bytes continue it or end it; before it, and anywhere else
    searched, no boundary begins."""

    def __init__(self, start: int) -> None:
        self.pos = start  #: bytes before this are known: no boundary begins there but at ``open``
        self.open = -1  #: the "}" of the boundary the text may end inside (-1: none)
        self.comma = False  #: and whether its comma came

    def find(self, buf: bytearray | mmap.mmap | bytes, end: int | None = None) -> tuple[int, int] | None:
        """(position of the boundary's ``}``, of its ``{``) in ``buf[:end]`` (``end`` None: all of it), or None when the
        text so far holds none."""
        n = len(buf) if end is None else end
        while self.open >= 0:  # continue the open boundary with the new bytes only
            new = bytes(buf[self.pos : n])
            j = self.pos + len(new) - len(new.lstrip())
            if j == n:
                self.pos = n
                return None
            if buf[j] == ord(",") and not self.comma:
                self.comma, self.pos = True, j + 1
                continue
            if buf[j] == ord("{") and self.comma:
                return self.open, j
            self.open, self.pos = -1, j  # it was not one; what follows is searched
        m = _BOUNDARY.search(buf, self.pos, n)
        if m is not None:
            return m.start(), m.end() - 1
        last = buf.rfind(b"}", self.pos, n)
        tail = _BOUNDARY_TAIL.fullmatch(buf, last + 1, n) if last >= 0 else None
        if tail is not None:
            self.open, self.comma = last, tail.group(1) is not None
        self.pos = n
        return None


class NeedsWholeDocument(Exception):
    """The fast split cannot handle this layout: decode the document in one piece instead."""
