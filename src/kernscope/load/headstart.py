"""A head start for the parse of a large plain Kineto trace: its first pieces scanned by the compiled scanner on a
thread while the command is still importing polars and the analysis.

A cold ``kernscope analyze`` spends its first ~0.2-0.3 s importing (Python, under one lock: one of two cores has
nothing to do), then parses. :meth:`HeadStart.begin` starts a thread at once that maps the file and makes one call into
the compiled library (``ks_kineto_head`` in ``_kineto.c``): it cuts the event array into the pieces the parse would cut
(:class:`kernscope.load.document.Splitter`: from the array's start, each ending at the first boundary between events
after ``chunk`` bytes) and scans them one after the other with the parse's own scanner (``ks_kineto_scan``), the lock
released throughout. It needs neither numpy nor polars, so it starts before either is imported. Five earlier head
starts (sessions 18, 24, 29, 37, 60; docs/performance.md) called into C once per piece and waited for the lock between
pieces while the imports held it.

The parse takes what was scanned (:meth:`HeadStart.claim`: the scan stops before its next piece) where everything the
scans depend on is the parse's own (:class:`Spec`): the file as it was when the head start opened it, the scanner's
slots, the phases and categories dropped and the pieces' size; else nothing is taken. A taken piece's outputs are the
arrays :func:`kernscope.load.fastscan.scan` would have made, except that no event was dropped by its name: the head
start judges no names (a Python test), so those events are parsed and then dropped in Python, as the parse does for
the names of a piece that it has not judged before. The table is the same (``tests/test_headstart.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from .nativelib import scanner
from .scanslots import EVENTS_KEY, HEAD_LIMIT, UTF8_BOM, Slots

#: a file of fewer bytes gets no head start (a few pieces: the thread's start costs more than it saves)
HEAD_MIN_BYTES = 24 << 20
#: a file changed this recently before the head start opened it is not trusted to show a later change by its
#: identity (a write within a coarse file system's timestamp granularity: git's "racily clean" rule)
RACY_NS = 2_000_000_000
#: the key of a parse's ``readers`` (``RawTrace.readers``) that counts the pieces it took from a head start
AHEAD = "scanned ahead"


class _Piece(ctypes.Structure):
    """``KsPiece`` in ``_kineto.c``."""

    _fields_ = [(n, ctypes.c_int64) for n in ("off", "len", "rc", "cap", "cap_dict", "cap_bytes", "size")] + [
        ("arena", ctypes.c_void_p)]


def identity(path: str) -> tuple[int, ...] | None:
    """(device, inode, size, modification and change times in ns) of a regular file, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@dataclass(frozen=True)
class Spec:
    """What a head start's scans share with the parse that takes them."""

    identity: tuple[int, ...] | None  #: the file's (:func:`identity`)
    slots: Slots
    drop_phases: tuple[str, ...]  #: events dropped whatever their name
    drop_cats: tuple[str, ...]  #: ``X`` events of these categories dropped by name (by the parse alone)
    chunk: int  #: the pieces' size (bytes of text before the cut)


def mapped_file(path: str, min_bytes: int, racy_ns: int, access: int = mmap.ACCESS_COPY
                ) -> tuple[Any, tuple[int, ...], mmap.mmap] | None:
    """(the compiled library, the file's :func:`identity`, a mapping of it) for a head start, or None where there is
    no library, the file is under ``min_bytes``, changed within ``racy_ns`` of now, cannot be mapped, or changed while
    it was being mapped. ``access``: the mapping's (a private one by default: ctypes takes the address of a writable
    buffer only; ``mmap.ACCESS_READ`` where the pages walked are given back, which on a private one would zero them)."""
    lib = scanner()
    ident = identity(path)
    if lib is None or ident is None or ident[2] < min_bytes:
        return None
    if max(ident[3], ident[4]) > time.time_ns() - racy_ns:
        return None
    try:
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=access)  # (nothing is written)
    except (OSError, ValueError):
        return None
    if identity(path) != ident:
        data.close()
        return None
    return lib, ident, data


def _events_start(data: mmap.mmap) -> int | None:
    """Where the event array's first event may begin (after its ``[``), as the parse's splitter finds it; None where
    the text does not begin as a trace (the parse says what is wrong)."""
    head = data[: min(len(data), 1 << 16)]
    bom = len(UTF8_BOM) if head.startswith(UTF8_BOM) else 0
    rest = head[bom:].lstrip()
    if not rest:
        return None
    first = len(head) - len(rest)
    if rest[:1] == b"[":
        return first + 1
    if rest[:1] != b"{":
        return None
    k = EVENTS_KEY.search(data, first, min(len(data), HEAD_LIMIT))
    return k.end() if k is not None else None


class _Arena:
    """Frees a taken piece's outputs (one block of mapped pages) once no array over them is left."""

    def __init__(self, lib: Any, address: int, size: int) -> None:
        self.lib, self.address, self.size = lib, address, size

    def __del__(self) -> None:
        self.lib.ks_free_arena(ctypes.c_void_p(self.address), ctypes.c_int64(self.size))


class HeadStart:
    """The first pieces of one file scanned on a thread (see the module). Make one with :meth:`begin`."""

    def __init__(self, lib: Any, path: str, data: mmap.mmap, start: int, spec: Spec, text_bytes: int | None = None,
                 progress: int = 2) -> None:
        self.lib, self.path, self.spec = lib, path, spec
        self._data = data
        self._start = start
        n = len(data) if text_bytes is None else text_bytes
        self._pieces = (_Piece * (max(n - start, 0) // spec.chunk + 2))()
        #: [0]: nonzero asks the scan to stop; [1]: the pieces scanned (written by C with release order); more for a
        #: gzip head start (:class:`kernscope.load.gzhead.GzHeadStart`)
        self._progress = (ctypes.c_int64 * progress)()
        self._taken: set[int] = set()
        self._lock = threading.Lock()
        self._index: dict[int, int] = {}  #: piece offset -> its place
        self._closed = False
        self.started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="kernscope-headstart", daemon=True)
        self._thread.start()

    @classmethod
    def begin(cls, path: str, slots: Slots, drop_phases: tuple[str, ...], drop_cats: tuple[str, ...],
              chunk: int) -> HeadStart | None:
        """A head start for ``path`` (scans with ``slots``, events of ``drop_phases`` dropped, pieces of ``chunk``
        bytes), or None where it would not pay or could not be trusted: no compiled library, a file under
        :data:`HEAD_MIN_BYTES`, gzipped or not beginning as a trace, or changed within :data:`RACY_NS`."""
        mapped = mapped_file(path, HEAD_MIN_BYTES, RACY_NS)
        if mapped is None:
            return None
        lib, ident, data = mapped
        start = _events_start(data)
        if start is None:
            data.close()
            return None
        return cls(lib, path, data, start, Spec(ident, slots, drop_phases, drop_cats, chunk))

    def _run(self) -> None:
        i64 = ctypes.c_int64
        text = ctypes.c_char.from_buffer(self._data)
        try:
            self.lib.ks_kineto_head(ctypes.byref(text), i64(len(self._data)), i64(self._start), i64(self.spec.chunk),
                                    self._pieces, i64(len(self._pieces)), *scan_arguments(self.spec), self._progress)
        finally:
            del text  # (the mapping's buffer released: it can be closed)
            self.ended = time.perf_counter()

    def claim(self, spec: Spec) -> Claim | None:
        """What was scanned, for the parse whose :class:`Spec` is ``spec``: the scan stops before its next piece.
        None (and the head start closed) where the specs differ."""
        self.lib.ks_store_release(self._progress, ctypes.c_int64(1))
        if spec != self.spec:
            self.close()
            return None
        return Claim(self)

    def _take(self, offset: int, length: int) -> tuple[Any, ...] | None:
        with self._lock:
            if self._closed:
                return None
            i = self._find(offset)
            if i is None and self._thread.is_alive():
                self._thread.join()  # (the piece in progress when the scan was asked to stop: ~10 ms at most)
                i = self._find(offset)
            if i is None or i in self._taken:
                return None
            p = self._pieces[i]
            if p.len != length or p.rc < 0 or not p.arena:
                return None  # (a piece the scanner declined or outgrew: the parse scans it itself and decides)
            self._taken.add(i)
        return _outputs(self.lib, p, len(self.spec.slots.strings), len(self.spec.slots.ints))

    def _find(self, offset: int) -> int | None:
        done = self.lib.ks_load_acquire(ctypes.byref(self._progress, ctypes.sizeof(ctypes.c_int64)))
        for i in range(len(self._index), done):
            self._index[self._pieces[i].off] = i
        return self._index.get(offset)

    @property
    def scanned(self) -> int:
        """The pieces scanned so far."""
        return int(self.lib.ks_load_acquire(ctypes.byref(self._progress, ctypes.sizeof(ctypes.c_int64))))

    def wait(self) -> None:
        """Wait until the thread has scanned every piece it will (all of a trace it reads to its end; for tests and
        ``kernscope.testing.fuzz``: a command's parse takes the pieces as they come)."""
        self._thread.join()

    def close(self) -> None:
        """Stop the scan, and free the outputs of the pieces not taken (taken ones are freed with their arrays)."""
        self.lib.ks_store_release(self._progress, ctypes.c_int64(1))
        self._thread.join()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for i in range(int(self._progress[1])):
                if i not in self._taken and self._pieces[i].arena:
                    self.lib.ks_free_arena(ctypes.c_void_p(self._pieces[i].arena), ctypes.c_int64(self._pieces[i].size))
            with contextlib.suppress(BufferError, ValueError):
                self._data.close()


class Claim:
    """The pieces a head start scanned, taken by one parse (:meth:`take`); :meth:`close` frees the rest."""

    def __init__(self, head: HeadStart) -> None:
        self._head = head

    @property
    def taken(self) -> int:
        """The pieces taken so far."""
        return len(self._head._taken)

    def take(self, offset: int, length: int) -> tuple[Any, ...] | None:
        """The scanner's outputs for the piece of ``length`` bytes at ``offset`` of the file, as
        :func:`kernscope.load.fastscan.scan` makes them (rows, codes, ints, valid, dictionary offsets and bytes,
        counts, ordinals), or None where the head start did not scan it (then the parse does)."""
        return self._head._take(offset, length)

    def close(self) -> None:
        self._head.close()


def scan_arguments(spec: Spec) -> tuple[Any, ...]:
    """The scanner's arguments after a head start's pieces (``ks_kineto_head``'s ``nscodes`` to ``ndcat``): the slots
    read and the phases and categories dropped of ``spec``."""
    sl, i64 = spec.slots, ctypes.c_int64
    keys = b"".join(sl.keys)
    aoff = (i64 * (len(sl.keys) + 1))(0, *_cumsum([len(k) for k in sl.keys]))
    aslot = (i64 * max(len(sl.slots), 1))(*sl.slots)
    ph, ph_off = _joined(spec.drop_phases)
    cat, cat_off = _joined(spec.drop_cats)
    return (i64(len(sl.strings)), i64(len(sl.ints)), ctypes.c_char_p(keys), aoff, aslot, i64(len(sl.slots)),
            ctypes.c_char_p(ph), ph_off, i64(len(spec.drop_phases)), ctypes.c_char_p(cat), cat_off,
            i64(len(spec.drop_cats)))


def _cumsum(xs: list[int]) -> list[int]:
    out, total = [], 0
    for x in xs:
        total += x
        out.append(total)
    return out


def _joined(items: tuple[str, ...]) -> tuple[bytes, Any]:
    """Strings as the scanner takes a list of them: their bytes joined, and offsets."""
    raw = [s.encode() for s in items]
    return b"".join(raw), (ctypes.c_int64 * (len(raw) + 1))(0, *_cumsum([len(r) for r in raw]))


def _outputs(lib: Any, p: _Piece, nstrings: int, nints: int) -> tuple[Any, ...]:
    """Piece ``p``'s outputs as numpy arrays over its arena (laid out as ``KsPiece`` says), which they keep alive."""
    import numpy as np

    buf = (ctypes.c_char * p.size).from_address(p.arena)
    buf.owner = _Arena(lib, p.arena, p.size)  # (freed with the last array over it)
    cap, at = p.cap, 0

    def take(dtype: Any, count: int) -> Any:
        nonlocal at
        a = np.frombuffer(buf, dtype=dtype, count=count, offset=at)
        at += a.nbytes
        return a

    ints = [take(np.int64, cap) for _ in range(nints)]
    ordinals = take(np.int64, cap)
    doff = take(np.int64, p.cap_dict + 2)
    counts = take(np.int64, 8)
    codes = [take(np.uint32, cap) for _ in range(nstrings)]
    valid = [take(np.uint8, cap) for _ in range(nints)]
    dbytes = take(np.uint8, p.cap_bytes)
    return int(p.rc), codes, ints, valid, doff, dbytes, counts, ordinals
