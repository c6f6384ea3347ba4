"""A head start for the parse of a large gzipped Kineto trace: the whole stream inflated, cut and scanned on a thread
that starts while the command is still importing, and that the parse then takes every piece from.

A gzipped trace cannot be cut before it is inflated, and its inflate is one serial stream: the parse inflated it on
its main thread (zlib-ng, 0.18 s for 216 MB) and scanned the pieces on the others, after the imports (~0.25 s) that
left a core idle. :meth:`GzHeadStart.begin` starts a thread at once that makes one call into the compiled library
(``ks_kineto_head_gz`` in ``_kineto.c``): it inflates the file's gzip member through zlib-ng's own functions (those
of the ``zlib_ng`` module the parse imports anyway), cuts the text into the pieces
:class:`kernscope.load.document.Splitter` cuts a stream into, and scans each with the parse's scanner, the lock
released throughout; the last piece (the array's end and what follows it) it keeps as text. No numpy, no polars.

Unlike the head start of a plain file (:mod:`.headstart`), this one is not stopped when the parse begins: the parse
has no stream of its own, and takes each piece as it comes (:meth:`GzClaim.pieces`), its outputs in place of a scan
and the last piece's text. It stays a bounded number of pieces ahead of the parse (:data:`AHEAD_PIECES`). Where the
parse would not take the pieces as they are, the head start stops: a piece the scanner declines, an event over
the parse's limit, a damaged or truncated stream, a second gzip member, text before the event array that does not
decode as the Splitter decodes it. The parse then reads the file itself, from its start, as it always did (errors are
reported as they always were): :class:`HeadStartFailed` where pieces were already taken. The tables are the same
(``tests/test_gzhead.py``).
"""

from __future__ import annotations

import ctypes
import mmap
import threading
import time
from collections.abc import Iterator
from typing import Any

from .headstart import HEAD_MIN_BYTES, RACY_NS, Claim, HeadStart, Spec, _Arena, mapped_file, scan_arguments
from .scanslots import Slots

#: the pieces the head start may run ahead of the parse (their outputs wait in memory: ~2 MB a piece of 8 MB)
AHEAD_PIECES = 48
#: the compressed bytes inflated to find where the event array begins (the parse's splitter decodes the text before
#: it as the document's metadata; a document whose array begins later gets no head start)
HEAD_TEXT = 1 << 16
#: ``ks_kineto_head_gz``'s states (progress[2]) and its last piece's mark (``KsPiece.rc``)
GZ_RUNNING, GZ_DONE, GZ_FAILED, GZ_STOPPED = 0, 1, -1, -2
GZ_FINAL = -100
GZIP_MAGIC = b"\x1f\x8b"
#: the most text a byte of gzip is taken to inflate to, where the trailer's size may have wrapped (Kineto traces:
#: 8-20x; a piece slot costs 64 bytes)
MAX_RATIO = 128


class HeadStartFailed(Exception):
    """The head start stopped after the parse took pieces from it: the parse reads the file itself."""


def _zlib_functions() -> tuple[int, int, int] | None:
    """The addresses of zlib-ng's ``zng_inflateInit2``, ``zng_inflate`` and ``zng_inflateEnd`` in the ``zlib_ng``
    module's library (which exports them), or None."""
    try:
        from zlib_ng import zlib_ng

        lib = ctypes.CDLL(zlib_ng.__file__)
        names = ("zng_inflateInit2", "zng_inflate", "zng_inflateEnd")
        addresses = [ctypes.cast(getattr(lib, n), ctypes.c_void_p).value for n in names]
    except (ImportError, OSError, AttributeError):
        return None
    if not all(addresses):
        return None
    return addresses[0], addresses[1], addresses[2]  # type: ignore[return-value]


class GzHeadStart(HeadStart):
    """Every piece of one gzipped trace inflated and scanned on a thread (see the module). Make one with
    :meth:`begin`."""

    def __init__(self, lib: Any, path: str, data: mmap.mmap, spec: Spec, text_bytes: int,
                 functions: tuple[int, int, int]) -> None:
        self._functions = functions
        #: (metadata, bare array?, the first event's offset) as the parse's splitter finds them; None where not found
        self.document: tuple[dict[str, Any], bool, int] | None = None
        self.final_taken = False  #: the last piece (text, not scanned) was handed to the parse
        self._begun = threading.Event()  #: set once :attr:`document` is known (found or not)
        super().__init__(lib, path, data, 0, spec, text_bytes, progress=5)

    @classmethod
    def begin(cls, path: str, slots: Slots, drop_phases: tuple[str, ...], drop_cats: tuple[str, ...],
              chunk: int) -> GzHeadStart | None:
        """A head start for the gzipped trace ``path`` (see :meth:`HeadStart.begin`), or None where it would not pay
        or could not be trusted: no compiled library or zlib-ng functions, not gzip, under :data:`HEAD_MIN_BYTES`
        inflated (as its gzip trailer says), or changed within :data:`RACY_NS`."""
        functions = _zlib_functions()
        mapped = mapped_file(path, 32, RACY_NS) if functions is not None else None
        if functions is None or mapped is None:
            return None
        lib, ident, data = mapped
        # the inflated size, modulo 4 GiB (the gzip trailer's ISIZE): a larger trace that reads as small gets no head
        # start. The pieces are counted for at least MAX_RATIO times the file (a trace over 4 GiB, whose ISIZE wrapped:
        # where its pieces outgrew the count, the parse would read it again from its start)
        inflated = int.from_bytes(data[-4:], "little")
        if data[:2] != GZIP_MAGIC or inflated < max(HEAD_MIN_BYTES, 1):
            data.close()
            return None
        text_bytes = max(inflated, MAX_RATIO * len(data)) + chunk
        return cls(lib, path, data, Spec(ident, slots, drop_phases, drop_cats, chunk), text_bytes, functions)

    def _run(self) -> None:
        i64 = ctypes.c_int64
        try:
            try:
                self.document = _document_start(self._data, self.path)
            finally:
                if self.document is None:
                    self._progress[2] = GZ_FAILED
                self._begun.set()
            if self.document is None:
                return
            from .source import Limits

            text = ctypes.c_char.from_buffer(self._data)
            try:
                self.lib.ks_kineto_head_gz(
                    ctypes.byref(text), i64(len(self._data)), *(ctypes.c_void_p(a) for a in self._functions),
                    i64(self.document[2]), i64(self.spec.chunk), i64(Limits().max_event_bytes), i64(AHEAD_PIECES),
                    self._pieces, i64(len(self._pieces)), *scan_arguments(self.spec), self._progress)
            finally:
                del text  # (the mapping's buffer released: it can be closed)
        except Exception:  # (never raised into the parse: it reads the file itself)
            self._progress[2] = GZ_FAILED
        finally:
            self.ended = time.perf_counter()

    @property
    def state(self) -> int:
        """``GZ_RUNNING``, ``GZ_DONE`` (every piece is there), ``GZ_FAILED`` or ``GZ_STOPPED``."""
        return int(self.lib.ks_load_acquire(ctypes.byref(self._progress, 2 * ctypes.sizeof(ctypes.c_int64))))

    def claim(self, spec: Spec) -> GzClaim | None:
        """Every piece, for the parse whose :class:`Spec` is ``spec`` (the head start goes on); None (and the head
        start closed) where the specs differ or it has already stopped without a piece."""
        if spec != self.spec or (self.state in (GZ_FAILED, GZ_STOPPED) and self.scanned == 0):
            self.close()
            return None
        return GzClaim(self)

    def _final(self, i: int) -> memoryview:
        """The last piece's text (piece ``i``: a block of its own, freed with the last view of it)."""
        p = self._pieces[i]
        with self._lock:
            self._taken.add(i)  # (not freed by close: its view frees it)
            self.final_taken = True
        buf = (ctypes.c_char * p.size).from_address(p.arena)
        buf.owner = _Arena(self.lib, p.arena, p.size)
        return memoryview(buf).cast("B")[: p.len]


def _document_start(data: mmap.mmap, path: str) -> tuple[dict[str, Any], bool, int] | None:
    """(metadata, bare array?, the first event's offset) of a gzipped trace, as the parse's splitter finds them in
    its first :data:`HEAD_TEXT` bytes of compressed text; None where it does not find them there."""
    from zlib_ng import zlib_ng

    from ..errors import TraceError
    from .document import _head
    from .source import _ZError

    try:
        text = zlib_ng.decompressobj(31).decompress(data[:HEAD_TEXT], HEAD_TEXT)
        found = _head(text, path)
    except (_ZError, TraceError):
        return None
    return found if found is not None and found[2] < len(text) else None


class GzClaim(Claim):
    """Every piece of a :class:`GzHeadStart`, taken by one parse as they come (:meth:`pieces`)."""

    _head: GzHeadStart

    @property
    def taken(self) -> int:
        """The scanned pieces taken so far (the last piece, text, is not one)."""
        return len(self._head._taken) - int(self._head.final_taken)

    def pieces(self, splitter: Any, poll_s: float = 0.0005) -> Iterator[Any]:
        """The pieces of the trace in order, as ``splitter`` (the parse's :class:`~kernscope.load.document.Splitter`,
        whose document metadata this sets) would have cut them: a scanned piece's text is a mapping of its length
        that nothing reads (the parse takes its outputs by :meth:`take`), the last piece's its text. Raises
        :class:`HeadStartFailed` where the head start stops before its last piece."""
        from .document import Piece

        head = self._head
        head._begun.wait()
        if head.document is None:
            raise HeadStartFailed(f"{head.path}: the head start found no event array in the text it inflated first")
        splitter.doc.metadata, splitter.doc.bare_array, _ = head.document
        source = splitter.source
        i = 0
        while True:
            done = head.scanned
            if i >= done:
                state = head.state
                if state != GZ_RUNNING and head.scanned <= i:
                    raise HeadStartFailed(f"{head.path}: the head start stopped (state {state}) after {i} pieces")
                time.sleep(poll_s)
                continue
            p = head._pieces[i]
            source.consumed = int(head._progress[4])
            source.json_bytes = int(p.off + p.len)
            head.lib.ks_store_release(ctypes.byref(head._progress, 3 * ctypes.sizeof(ctypes.c_int64)), ctypes.c_int64(i))
            if p.rc == GZ_FINAL:
                source.consumed = source.stored_bytes
                yield Piece(head._final(i), int(p.off), final=True)
                return
            # (a stand-in of the piece's length: anonymous pages never touched, so never resident)
            yield Piece(memoryview(mmap.mmap(-1, max(int(p.len), 1)))[: int(p.len)], int(p.off))
            i += 1
